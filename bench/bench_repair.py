"""Repair benchmark: 100,000 citations over the two 1,000,000-chunk synthetic versions of bench_diff.py.

The store is bench_diff.generate's (version `old`, then `new`, which edits, removes and adds chunks in 5% of
the documents). 100,000 answers, one citation each (half structured, half marker form, a third with the
cited text_hash), cite chunks of `old`, chosen by what the diff says became of them so that the statuses
against `new` are mixed: valid, relocated (moved chunks), drifted (a modified chunk, quote still in its
successor), stale (a modified chunk, quote gone from it), removed, and a few invalid ones (a wrong text_hash).
The store is built and the answers registered in a child process, so that does not count towards the peak.

Then, in this process, per repeat: the `stale` run (changes.citation_status.check_citations, what
`citekeeper stale --against new` runs; the cached diff removed first) and right after it the repair
(changes.repair.repair_citations, apply=False, what `citekeeper repair --against new` runs; it reuses the
status the stale run stored). Prints both times, the ratio repair/stale (target <= 1x), the status mix, the
repair kinds and the peak RSS of this process. Unless --no-apply, one more repair with apply=True then runs on
a copy of the store taken after the last stale run (untimed copy; printed apart, not in the ratio).

Stale and removed citations are re-anchored one by one, each search over the target corpus (~18 ms each on
1M chunks here); --lost sets their share (default 5%).

    .venv/bin/python bench/bench_repair.py [--chunks 1000000] [--citations 100000] [--lost 0.05] [--repeat 1]
                                           [--min-score 0.9] [--no-apply]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_diff import generate
from changes.citation_status import check_citations
from changes.diff import diff_versions
from changes.repair import DEFAULT_MIN_SCORE, REPAIR_KINDS, repair_citations
from changes.statuses import NAMES
from citekeeper.answers.store import AnswerStore
from citekeeper.layout import StoreLayout
from citekeeper.store import CorpusStore

OLD, NEW = "old", "new"
# Shares of the citations per intended status (valid takes the rest); stale and removed come from --lost, 3:2.
RELOCATED, DRIFTED, INVALID = 0.06, 0.04, 0.005


def _quotes(text: pl.Expr) -> dict[str, pl.Expr]:
    """Verbatim pieces of a bench_diff chunk text ("Document D paragraph P revision 0: the <8 words> and more
    words follow here."). Its edit changes only the revision number, so `body` survives it and `revision` and
    `head` do not; `revision` is verbatim in other chunks of the same document (found exactly by re-anchoring),
    `head` names the paragraph and is found only by the fuzzy tier, in its successor."""
    return {
        "head": text.str.extract(r"^([^:]*):", 1),
        "body": text.str.extract(r": (.*)$", 1),
        "revision": text.str.extract(r"(revision [^:]*: .*) and more words", 1),
    }


def _pick(frame: pl.DataFrame, n: int, rng: np.random.Generator) -> pl.DataFrame:
    """n rows, with repeats (many answers may cite one chunk)."""
    return frame[rng.integers(0, frame.height, size=n)] if n else frame.clear()


def citations(root: Path, n_citations: int, lost: float) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The citations to register (one per answer): chunk_id, quote, text_hash, intended status; and the old
    chunk table (chunk_id, doc_id, text) they were drawn from."""
    store = CorpusStore(root)
    old = store.read_chunks(OLD, columns=["chunk_id", "doc_id", "ordinal", "text", "text_hash"])
    new = store.read_chunks(NEW, columns=["chunk_id", "text"]).rename({"chunk_id": "new_chunk_id", "text": "new_text"})
    changes = diff_versions(store, OLD, NEW).chunks.select(
        pl.col("old_chunk_id").alias("chunk_id"), "change", "new_chunk_id"
    )
    shutil.rmtree(store.layout.diff_dir(OLD, NEW))  # the timed stale runs compute it themselves
    old = old.join(changes, on="chunk_id", how="left").join(new, on="new_chunk_id", how="left")
    old = old.with_columns(**_quotes(pl.col("text")))
    n_stale = round(n_citations * lost * 3 / 5)
    n_removed = round(n_citations * lost) - n_stale
    n = {
        "relocated": round(n_citations * RELOCATED),
        "drifted": round(n_citations * DRIFTED),
        "stale": n_stale,
        "removed": n_removed,
        "invalid": round(n_citations * INVALID),
    }
    n["valid"] = n_citations - sum(n.values())
    rng = np.random.default_rng(12)
    unchanged = old.filter(pl.col("change").is_null())
    modified = old.filter(pl.col("change") == "modified")
    assert modified.select(pl.col("new_text").str.contains(pl.col("body"), literal=True).all()).item(), (
        "body must survive"
    )
    assert not modified.select(pl.col("new_text").str.contains(pl.col("revision"), literal=True).any()).item()
    assert not modified.select(pl.col("new_text").str.contains(pl.col("head"), literal=True).any()).item()
    any_quote = (pl.int_range(pl.len()) % 4).replace_strict(
        [0, 1, 2, 3], ["head", "body", "revision", None], return_dtype=pl.String
    )

    def quoted(frame: pl.DataFrame, how: pl.Expr, status: str) -> pl.DataFrame:
        return frame.with_columns(quote_kind=how).select(
            "chunk_id",
            "doc_id",
            "ordinal",
            "text_hash",
            "quote_kind",
            quote=pl.when(pl.col("quote_kind") == "head")
            .then("head")
            .when(pl.col("quote_kind") == "body")
            .then("body")
            .when(pl.col("quote_kind") == "revision")
            .then("revision"),
            intended=pl.lit(status),
        )

    every_other = pl.when(pl.int_range(pl.len()) % 2 == 0)
    parts = [
        quoted(_pick(unchanged, n["valid"], rng), any_quote, "valid"),
        quoted(_pick(old.filter(pl.col("change") == "moved"), n["relocated"], rng), any_quote, "relocated"),
        quoted(_pick(modified, n["drifted"], rng), pl.lit("body"), "drifted"),
        quoted(
            _pick(modified, n["stale"], rng), every_other.then(pl.lit("revision")).otherwise(pl.lit("head")), "stale"
        ),
        quoted(
            _pick(old.filter(pl.col("change") == "removed"), n["removed"], rng),
            every_other.then(pl.lit("revision")).otherwise(pl.lit(None)),
            "removed",
        ),
        quoted(_pick(unchanged, n["invalid"], rng), pl.lit("body"), "invalid").with_columns(
            text_hash=pl.lit("sha256:") + pl.col("text_hash").str.slice(7).str.reverse()
        ),
    ]
    cited = pl.concat(parts).sample(fraction=1.0, shuffle=True, seed=12).with_row_index("i")
    # A third carry their text_hash; every invalid one does (that is what makes it invalid).
    cited = cited.with_columns(
        text_hash=pl.when((pl.col("i") % 3 == 0) | (pl.col("intended") == "invalid")).then("text_hash")
    )
    return cited, old.select("chunk_id", "text")


def answer_records(cited: pl.DataFrame) -> list[dict]:
    """One answer per citation; even rows structured, odd rows marker form."""
    records = []
    for row in cited.iter_rows(named=True):
        citation = {"chunk_id": row["chunk_id"]}
        if row["quote"] is not None:
            citation["quote"] = row["quote"]
        if row["text_hash"] is not None:
            citation["text_hash"] = row["text_hash"]
        claim = f"Paragraph {row['ordinal']} of {row['doc_id']} is what answer {row['i']} rests on"
        record = {
            "answer_id": f"ans_{row['i']:07d}",
            "question": f"What does {row['doc_id']} say?",
            "corpus_version": OLD,
        }
        if row["i"] % 2 == 0:
            record |= {"answer": f"{claim}.", "claims": [{"text": f"{claim}.", "citations": [citation]}]}
        else:
            record |= {"answer": f"{claim} [1].", "references": [{"ref": 1, **citation}]}
        records.append(record)
    return records


def build(root: Path, n_chunks: int, n_citations: int, lost: float) -> None:
    """Child process: the two versions, then the answers citing `old`, registered in the store's answer store."""
    started = time.perf_counter()
    generate(root, n_chunks, 0.01)
    print(
        f"committed 2 versions of {n_chunks:,} chunks (1% changed) in {time.perf_counter() - started:.1f}s", flush=True
    )
    started = time.perf_counter()
    cited, old_text = citations(root, n_citations, lost)
    checks = cited.join(old_text, on="chunk_id").filter(pl.col("quote").is_not_null())
    assert checks.select(pl.col("text").str.contains(pl.col("quote"), literal=True).all()).item(), (
        "quotes must be verbatim"
    )
    path = root.parent / "answers.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for record in answer_records(cited):
            handle.write(json.dumps(record) + "\n")
    added = AnswerStore(root).add(path)
    assert len(added.added) == n_citations and not added.errors, added.summary()
    (root.parent / "intended.json").write_text(json.dumps(dict(cited.group_by("intended").len().iter_rows())))
    print(f"registered {n_citations:,} answers, one citation each, in {time.perf_counter() - started:.1f}s", flush=True)


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    started = time.perf_counter()
    value = fn(*args, **kwargs)
    return time.perf_counter() - started, value


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--citations", type=int, default=100_000)
    parser.add_argument(
        "--lost", type=float, default=0.05, help="share of stale + removed citations (re-anchored one by one)"
    )
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--min-score", type=float, default=DEFAULT_MIN_SCORE, help="repair's --min-score")
    parser.add_argument(
        "--no-apply", dest="apply", action="store_false", help="skip the repair with apply=True on a copy"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_repair_") as tmp:
        root = Path(tmp) / "store"
        child = multiprocessing.get_context("spawn").Process(
            target=build, args=(root, args.chunks, args.citations, args.lost)
        )
        child.start()
        child.join()
        if child.exitcode:
            raise SystemExit(f"building the store failed (exit {child.exitcode})")
        intended = json.loads((Path(tmp) / "intended.json").read_text())
        store = CorpusStore(root)
        import lancedb  # noqa: F401  (the store imports it on first open: ~3 s, which both commands would pay)

        rss_before = peak_rss_mb()
        stales, repairs, rss_stale = [], [], None
        copy = Path(tmp) / "copy"
        for repeat in range(args.repeat):
            shutil.rmtree(StoreLayout(root).diff_dir(OLD, NEW), ignore_errors=True)  # as right after an ingest
            seconds, check = timed(check_citations, store, NEW)
            stales.append(seconds)
            rss_stale = rss_stale or peak_rss_mb()
            if args.apply and repeat == args.repeat - 1:
                shutil.copytree(root, copy)  # untimed; the copy holds the status this stale run stored
            seconds, result = timed(repair_citations, store, NEW, min_score=args.min_score, apply=False)
            repairs.append(seconds)
        rss_repair = peak_rss_mb()
        if args.apply:
            apply_s, applied = timed(repair_citations, CorpusStore(copy), NEW, min_score=args.min_score, apply=True)
            revisions = AnswerStore(copy).answers()["revision"].value_counts().sort("revision")
    stale_s, repair_s = statistics.median(stales), statistics.median(repairs)
    statuses = check.counts()
    print(
        f"citations: {args.citations:,} in {args.citations:,} answers (half structured, half marker form), "
        f"intended mix: { {s: intended.get(s, 0) for s in NAMES} }"
    )
    print(f"status mix (stale run): {statuses}")
    print(f"repair kinds: {result.counts()}")
    print(f"answers repaired: {len(result.records):,} (needs_review: {int(result.repairs['needs_review'].sum()):,})")
    print(f"stale run (check_citations): {stale_s:.2f}s (median of {args.repeat}; runs: {_list(stales)})")
    print(
        f"repair (repair_citations, apply=False, after it): {repair_s:.2f}s "
        f"(median of {args.repeat}; runs: {_list(repairs)})"
    )
    print(
        f"ratio repair/stale: {repair_s / stale_s:.3f}x (target <= 1x) -> {'OK' if repair_s <= stale_s else 'MISSED'}"
    )
    if args.apply:
        print(
            f"repair with apply=True (on a copy): {apply_s:.2f}s, "
            f"{len(applied.applied.revised):,} revisions registered; "
            f"answers by current revision: {dict(revisions.iter_rows())}"
        )
    print(
        f"peak RSS: {rss_repair:.0f} MB "
        f"(before the runs: {rss_before:.0f} MB; after the first stale run: {rss_stale:.0f} MB)"
    )
    assert statuses == {s: intended.get(s, 0) for s in NAMES}, "the status mix is not the intended one"
    assert sum(result.counts().values()) == args.citations and set(result.counts()) == set(REPAIR_KINDS)


def _list(seconds: list[float]) -> str:
    return ", ".join(f"{s:.2f}" for s in seconds)


if __name__ == "__main__":
    main()
