"""Re-anchoring benchmark: 10,000 lost citations against a synthetic target version of 100,000 and of
1,000,000 chunks; the time per citation must not grow with the corpus (target: 1M <= 2x 100k).

The corpus: documents of --chunks-per-doc chunks, each chunk three 16-word sentences drawn from a
30,000-word vocabulary with Zipf-distributed frequencies (the most frequent words are English stop words),
so full-text search meets posting lists that grow with the corpus, as on real text. Documents are their
chunks joined by blank lines (chunk offsets index into them). The lost citations (stale or removed: their
chunk is gone), each with a successor/cited document that no longer holds the evidence unless said:
- `moved`: a sentence that now sits verbatim in another document       -> expected `exact`, that span;
- `own`: a sentence that moved within its own (preferred) document      -> expected `exact`, that span;
- `across`: the end of one chunk and the start of the next, elsewhere   -> expected `exact`, that span;
- `edited`: a sentence of another document with one word replaced     -> expected `fuzzy`, that chunk;
- `gone`: a sentence that is nowhere in the target version             -> no suggestion, or `fts`.

Per size, in child processes (so each peak RSS is its own): the corpus is written to Parquet; the version's
full-text index (citekeeper.search_index.EmbeddingStore.text_index, what `citekeeper stale` builds on first
need and then reuses) is built and timed on its own; then, in a fresh process, the documents and chunks are
read as `stale` reads them and the citations re-anchored (changes.reanchor.reanchor with the Reanchorer
that changes.citation_status builds: candidates from the persisted full-text index; the last tier from
EmbeddingStore.chunk_index). The embedding model is made unavailable on purpose (a missing model
directory), so the last tier is full-text only (`fts`): embedding 1,000,000 chunks on CPU would take hours
and is a one-time cost per text_hash, not part of re-anchoring. Prints, per size: index build time,
re-anchoring time per citation (and the one-time setup inside it), methods found per kind, peak RSS;
then the ratio of the time per citation at the largest size to the smallest.

    .venv/bin/python bench/bench_reanchor.py [--sizes 100000 1000000] [--citations 10000] [--chunks-per-doc 20]
    .venv/bin/python bench/bench_reanchor.py --sizes 2000 20000 --citations 500      # quick
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

VERSION = "target"
VOCABULARY = 30_000
ZIPF = 1.07
WORDS_PER_SENTENCE = 16
STOP_WORDS = "the of and to a in is for on with that by as it are be this from or an".split()
SYLLABLES = "ka ri to ne mu sa lo pe di ve zu an or el in ta mo gu fi ba".split()
# Shares of the citations per kind (in this order; `gone` takes the rest).
MIX = {"moved": 0.35, "own": 0.15, "across": 0.1, "edited": 0.25}


def vocabulary(rng: np.random.Generator) -> np.ndarray:
    words, seen = list(STOP_WORDS), set(STOP_WORDS)
    while len(words) < VOCABULARY:
        word = "".join(rng.choice(SYLLABLES, rng.integers(2, 5)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return np.array(words)


def sentences(rng: np.random.Generator, vocab: pl.Series, n: int) -> pl.Series:
    """`n` sentences of WORDS_PER_SENTENCE Zipf-distributed words, ending with a period."""
    p = 1.0 / np.arange(1, len(vocab) + 1) ** ZIPF
    picks = rng.choice(len(vocab), size=n * WORDS_PER_SENTENCE, p=p / p.sum())
    words = vocab.gather(picks).reshape((n, WORDS_PER_SENTENCE))
    return words.arr.join(" ") + "."


def generate(out: Path, n_chunks: int, chunks_per_doc: int, n_citations: int, seed: int) -> None:
    """Write chunks.parquet, documents.parquet and citations.parquet of one size under `out`."""
    rng = np.random.default_rng(seed)
    vocab = pl.Series(vocabulary(rng))
    parts = [sentences(rng, vocab, n_chunks) for _ in range(3)]
    chunks = (
        pl.DataFrame({"s1": parts[0], "s2": parts[1], "s3": parts[2]})
        .with_columns(text=pl.concat_str("s1", "s2", "s3", separator=" "), doc=pl.int_range(pl.len()) // chunks_per_doc)
        .with_columns(doc_id=pl.format("doc_{}", "doc"), ordinal=pl.int_range(pl.len()).over("doc"))
        .with_columns(chunk_id=pl.format("ck_{}_{}", "doc", "ordinal"), length=pl.col("text").str.len_chars() + 2)
        .with_columns(end_char=pl.col("length").cum_sum().over("doc") - 2)
        .with_columns(
            start_char=pl.col("end_char") - pl.col("length") + 2,
            text_hash=pl.col("text").hash(seed=7).cast(pl.String),
            source_path=pl.format("docs/{}.md", "doc_id"),
            access_scope=pl.lit("user_visible"),
        )
    )
    documents = chunks.group_by("doc_id", maintain_order=True).agg(text=pl.col("text").str.join("\n\n"))
    chunks.select(
        "chunk_id", "doc_id", "text", "text_hash", "start_char", "end_char", "source_path", "access_scope"
    ).write_parquet(out / "chunks.parquet")
    documents.write_parquet(out / "documents.parquet")

    n_docs = documents.height
    counts = {kind: int(share * n_citations) for kind, share in MIX.items()}
    counts["gone"] = n_citations - sum(counts.values())
    rows = []
    for kind, count in counts.items():
        at = rng.integers(0, n_chunks - 1, count)
        if kind == "across":  # the last sentence of a chunk, the blank line and the next chunk's first one
            at = np.where(chunks["doc"].gather(at) == chunks["doc"].gather(at + 1), at, at - 1)
        picked = chunks[at]
        other = (picked["doc"].to_numpy() + rng.integers(1, n_docs, count)) % n_docs  # never the evidence's document
        elsewhere = pl.Series([f"doc_{d}" for d in other])
        sentence = picked["s2"]
        if kind == "across":
            evidence = picked["s3"] + "\n\n" + chunks[at + 1]["s1"]
        elif kind == "edited":  # one word replaced: partial_ratio stays >= 0.85
            words = sentence.str.split(" ")
            slot = pl.Series(rng.integers(1, WORDS_PER_SENTENCE - 1, count))
            evidence = (
                pl.DataFrame({"w": words, "i": slot})
                .select(
                    pl.concat_list(
                        pl.col("w").list.head(pl.col("i")), pl.lit(["zzqx"]), pl.col("w").list.slice(pl.col("i") + 1)
                    ).list.join(" ")
                )
                .to_series()
            )
        elif kind == "gone":
            evidence = sentences(rng, vocab, count)
        else:
            evidence = sentence
        expected = picked["chunk_id"]
        if kind == "across":  # the chunk holding the longer part of the span carries it
            following = chunks[at + 1]
            expected = pl.select(
                pl.when(following["s1"].str.len_chars() > picked["s3"].str.len_chars())
                .then(following["chunk_id"])
                .otherwise(expected)
            ).to_series()
        rows.append(
            pl.DataFrame(
                {
                    "kind": kind,
                    "evidence": evidence,
                    "doc_id": picked["doc_id"] if kind == "own" else elsewhere,
                    "new_doc_id": picked["doc_id"] if kind == "own" else elsewhere,
                    "expected_chunk_id": expected,
                }
            )
        )
    citations = pl.concat(rows).with_columns(citation_id=pl.format("c{}", pl.int_range(pl.len())))
    citations.sample(fraction=1.0, shuffle=True, seed=seed).write_parquet(out / "citations.parquet")


def _embeddings(out: Path):
    from citekeeper.search_index import EmbeddingStore

    warnings.simplefilter("ignore")  # the model is missing on purpose
    return EmbeddingStore(out / "store", model=str(out / "no-model"), language="en")


def build_index(out: Path, result: Path) -> None:
    chunks = pl.read_parquet(out / "chunks.parquet")
    started = time.perf_counter()
    _embeddings(out).text_index(VERSION, chunks)
    seconds = time.perf_counter() - started
    result.write_text(json.dumps({"seconds": seconds, "peak_mb": _peak_mb()}))


def run_reanchor(out: Path, result: Path) -> None:
    from changes.reanchor import Reanchorer, reanchor

    chunks = pl.read_parquet(out / "chunks.parquet")
    docs = pl.read_parquet(out / "documents.parquet")
    citations = pl.read_parquet(out / "citations.parquet")
    loaded_mb = _peak_mb()
    embeddings = _embeddings(out)
    started = time.perf_counter()
    reanchorer = Reanchorer(
        docs,
        chunks,
        index_factory=lambda: embeddings.chunk_index(VERSION, chunks),
        text_index_factory=lambda: embeddings.text_index(VERSION, chunks),
    )
    # One citation first, to time apart what a run does once: open the full-text index, index the documents
    # and chunks by doc_id (a sentence of the first chunk, cited from the last document, is found there).
    reanchorer.suggest_many([(chunks["text"][0].split(". ")[0], [docs["doc_id"][-1]])])
    setup = time.perf_counter() - started
    suggestions = reanchor(citations, reanchorer)
    seconds = time.perf_counter() - started
    judged = citations.join(suggestions, on="citation_id").with_columns(
        exact_span=pl.col("suggested_text") == pl.col("evidence"),
        right_chunk=pl.col("suggested_chunk_id") == pl.col("expected_chunk_id"),
    )
    summary = (
        judged.group_by("kind", "suggested_method")
        .agg(n=pl.len(), exact_span=pl.col("exact_span").sum(), right_chunk=pl.col("right_chunk").sum())
        .sort("kind", "suggested_method", nulls_last=True)
    )
    result.write_text(
        json.dumps(
            {
                "seconds": seconds,
                "setup": setup,
                "n": citations.height,
                "peak_mb": _peak_mb(),
                "loaded_mb": loaded_mb,
                "summary": summary.to_dicts(),
            }
        )
    )


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(target, *args) -> None:
    process = multiprocessing.get_context("spawn").Process(target=target, args=args)
    process.start()
    process.join()
    if process.exitcode:
        raise SystemExit(f"{target.__name__} failed (exit {process.exitcode})")


def measure(n_chunks: int, args, tmp: Path) -> dict:
    out = tmp / f"n{n_chunks}"
    out.mkdir()
    started = time.perf_counter()
    _child(generate, out, n_chunks, args.chunks_per_doc, args.citations, args.seed)
    print(
        f"[{n_chunks:,} chunks] corpus of {n_chunks // args.chunks_per_doc:,} documents "
        f"and {args.citations:,} citations generated in {time.perf_counter() - started:.1f}s",
        flush=True,
    )
    _child(build_index, out, out / "index.json")
    index = json.loads((out / "index.json").read_text())
    print(
        f"[{n_chunks:,} chunks] full-text index built in {index['seconds']:.1f}s (peak RSS {index['peak_mb']:.0f} MB)",
        flush=True,
    )
    runs = []
    for _ in range(args.repeat):
        _child(run_reanchor, out, out / "run.json")
        runs.append(json.loads((out / "run.json").read_text()))
    run = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
    per = run["seconds"] / run["n"] * 1000
    print(
        f"[{n_chunks:,} chunks] re-anchored {run['n']:,} citations in {run['seconds']:.1f}s: {per:.2f} ms per citation "
        f"(one-time setup inside it: {run['setup']:.2f}s; median of {len(runs)}); peak RSS {run['peak_mb']:.0f} MB "
        f"({run['loaded_mb']:.0f} MB after reading the documents, chunks and citations)",
        flush=True,
    )
    for row in run["summary"]:
        print(
            f"    {row['kind']:>7} -> {row['suggested_method']!s:>10}: {row['n']:6,}  "
            f"(span == evidence: {row['exact_span']:,}; expected chunk: {row['right_chunk']:,})"
        )
    return {"n_chunks": n_chunks, "ms_per_citation": per, "index_s": index["seconds"], "peak_mb": run["peak_mb"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="target version sizes, in chunks"
    )
    parser.add_argument("--citations", type=int, default=10_000)
    parser.add_argument("--chunks-per-doc", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=1, help="re-anchoring runs per size (the median is kept)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_reanchor_") as tmp:
        results = [measure(n, args, Path(tmp)) for n in args.sizes]
    small, large = results[0], results[-1]
    if len(results) > 1:
        ratio = large["ms_per_citation"] / small["ms_per_citation"]
        print(
            f"time per citation {large['n_chunks']:,} / {small['n_chunks']:,} chunks: {large['ms_per_citation']:.2f} / "
            f"{small['ms_per_citation']:.2f} ms = {ratio:.2f}x (target <= 2x) -> {'OK' if ratio <= 2 else 'MISSED'}"
        )
    print("index build: " + ", ".join(f"{r['n_chunks']:,} chunks {r['index_s']:.1f}s" for r in results))
    print(
        "peak RSS of the re-anchoring process: "
        + ", ".join(f"{r['n_chunks']:,} chunks {r['peak_mb']:.0f} MB" for r in results)
    )


if __name__ == "__main__":
    main()
