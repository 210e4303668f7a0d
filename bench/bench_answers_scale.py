"""Answers at scale: `answers add`, `stale` and `verify --no-model` on N answers (one cited claim each) over the
two 1,000,000-chunk synthetic versions of bench_diff.py, at two sizes.

For each size (default 100,000 and 1,000,000 answers) the store and the answers file are built in a child
process (bench_diff.generate; the citations of bench_repair.citations, none lost by default: re-anchoring a lost
citation is a search of its own, measured by bench_reanchor.py), then each command runs
in a fresh child process of its own, so its peak RSS is its own:
  add     citekeeper.answers.store.AnswerStore.add           (what `citekeeper answers add FILE` runs)
  stale   changes.citation_status.check_citations         (`citekeeper stale --against new`)
  verify  verifiers.verify_store.verify_store, scorer=None  (`citekeeper verify --version new --no-model`)
and, as the baseline of `stale`, a bare polars join of the citations' chunk ids to both versions' chunk ids and
text hashes (read from the answer store's Parquet and the LanceDB tables). Prints per size each command's wall
time, time per answer and peak RSS, then the targets: peak RSS <= 2 GB for each at the largest size; stale <=
10x the bare join; time per answer at the largest size <= 1.2x that at the smallest.

    .venv/bin/python bench/bench_answers_scale.py [--sizes 100000 1000000] [--chunks 1000000] [--lost 0.0]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_diff import generate
from bench.bench_repair import NEW, OLD, answer_records, citations

COMMANDS = ("add", "stale", "verify")
RSS_TARGET_MB = 2048
STALE_OVER_JOIN = 10.0
PER_ANSWER_GROWTH = 1.2


def build(root: Path, n_chunks: int, n_answers: int, lost: float) -> None:
    """Child process: both versions and the answers file (not registered: `add` is measured)."""
    generate(root, n_chunks, 0.01)
    cited, _ = citations(root, n_answers, lost)
    with (root.parent / "answers.jsonl").open("w", encoding="utf-8") as handle:
        for record in answer_records(cited):
            handle.write(json.dumps(record) + "\n")


def run_command(command: str, root: Path, out: multiprocessing.Queue) -> None:
    """Child process: one command, timed; reports (seconds, peak RSS MB, a count to check it did the work)."""
    import lancedb  # noqa: F401  (~3 s on first import, paid alike by every command and the join: not timed)

    from citekeeper.answers.store import AnswerStore
    from citekeeper.store import CorpusStore

    started = time.perf_counter()
    if command == "add":
        done = AnswerStore(root).add(root.parent / "answers.jsonl").n_registered
    elif command == "stale":
        from changes.citation_status import check_citations

        done = check_citations(CorpusStore(root), NEW).outline.height
    elif command == "verify":
        from verifiers.verify_store import verify_store

        result, _ = verify_store(CorpusStore(root), root.parent / "verify", version=NEW)
        done = result.claims.height
    else:
        done = bare_join(root)
    out.put((time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, done))


def bare_join(root: Path) -> int:
    """The baseline of stale: each citation joined to its chunk's id and hash in both versions."""
    from citekeeper.answers.store import AnswerStore
    from citekeeper.store import CorpusStore

    store = CorpusStore(root)
    cited = AnswerStore(root).snapshot().scan("citations").select("chunk_id").collect()
    old, new = (store.read_chunks(v, columns=["chunk_id", "text_hash"]) for v in (OLD, NEW))
    joined = cited.join(old, on="chunk_id", how="left").join(new, on="chunk_id", how="left", suffix="_new")
    return joined.height


def in_child(target, *args):
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=target, args=(*args, queue) if target is run_command else args)
    child.start()
    result = queue.get() if target is run_command else None
    child.join()
    if child.exitcode:
        raise SystemExit(f"{target.__name__}{args[:1]} failed (exit {child.exitcode})")
    return result


def measure(n_answers: int, n_chunks: int, lost: float) -> dict[str, tuple[float, float, int]]:
    with tempfile.TemporaryDirectory(prefix="bench_answers_") as tmp:
        root = Path(tmp) / "store"
        started = time.perf_counter()
        in_child(build, root, n_chunks, n_answers, lost)
        print(
            f"{n_answers:,} answers over {n_chunks:,} chunks: built in {time.perf_counter() - started:.1f}s", flush=True
        )
        figures = {}
        for command in (*COMMANDS, "join"):
            figures[command] = in_child(run_command, command, root)
            seconds, rss, done = figures[command]
            print(
                f"  {command:<6} {seconds:8.2f}s  {seconds / n_answers * 1e6:8.1f} us/answer  "
                f"peak RSS {rss:7.0f} MB  ({done:,} rows)",
                flush=True,
            )
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument(
        "--lost",
        type=float,
        default=0.0,
        help="share of stale + removed citations (re-anchored one by one: bench_reanchor.py)",
    )
    args = parser.parse_args()
    sizes = sorted(args.sizes)
    results = {n: measure(n, args.chunks, args.lost) for n in sizes}
    small, large = sizes[0], sizes[-1]
    print(f"\ntargets at {large:,} answers:")
    for command in COMMANDS:
        seconds, rss, _ = results[large][command]
        growth = (seconds / large) / (results[small][command][0] / small)
        print(
            f"  {command:<6} peak RSS {rss:.0f} MB (target <= {RSS_TARGET_MB})"
            f" -> {'OK' if rss <= RSS_TARGET_MB else 'MISSED'};"
            f" time per answer {large:,} / {small:,}: {growth:.2f}x (target <= {PER_ANSWER_GROWTH})"
            f" -> {'OK' if growth <= PER_ANSWER_GROWTH else 'MISSED'}"
        )
    ratio = results[large]["stale"][0] / results[large]["join"][0]
    verdict = "OK" if ratio <= STALE_OVER_JOIN else "MISSED"
    print(f"  stale / bare join: {ratio:.1f}x (target <= {STALE_OVER_JOIN:g}) -> {verdict}")


if __name__ == "__main__":
    main()
