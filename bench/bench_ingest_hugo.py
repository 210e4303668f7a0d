"""Ingest time per document on Hugo's own docs (a real site: ~950 Markdown pages with nested front matter,
shortcodes and tables) against bare `unstructured.partition.md.partition_md` over the same files.

Each round times a bare `partition_md(filename=...)` loop over the files and a full serial `parsers.ingest`
(workers=1: discover, front matter, parse, chunk, LanceDB commit, Parquet export) into a fresh store,
alternating which goes first; the best round of each is compared. As in bench_ingest.py [1], the loop takes the
files in the order ingest parses them and the ratio is on CPU time of this process (wall time is printed too).
A page that partition_md raises on is counted, its time included.

    .venv/bin/python bench/bench_ingest_hugo.py [--source DIR] [--rounds N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_ingest import TARGET, Timer, parse_order, summary, time_ingest
from citekeeper.store import CorpusStore
from tests.eval_data import REAL_CORPORA

DEFAULT_SOURCE = REAL_CORPORA / "hugo-docs" / "v0.148.0"


def time_partition_md(files: list[Path]) -> Timer:
    """The bare loop's time; `failed`: how many files partition_md raised on."""
    from unstructured.partition.md import partition_md

    failed = 0
    with Timer() as timer:
        for path in files:
            try:
                partition_md(filename=str(path))
            except Exception:
                failed += 1
    timer.failed = failed
    return timer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    files = parse_order(sorted(p for p in args.source.rglob("*.md") if p.is_file()))
    partition_runs, ingest_runs = [], []
    with tempfile.TemporaryDirectory() as scratch:
        time_partition_md(files[:3])  # warm-up: imports, lazy model loads
        time_ingest(files[0].parent, Path(scratch))
        for round_index in range(args.rounds):
            steps = [
                lambda: partition_runs.append(time_partition_md(files)),
                lambda: ingest_runs.append(time_ingest(args.source, Path(scratch))),
            ]
            for step in steps if round_index % 2 == 0 else reversed(steps):
                step()
        latest = CorpusStore(Path(scratch) / "store").latest()
    print(
        f"files: {len(files)} from {args.source} ({latest.n_documents} ingested); best of {args.rounds} rounds; "
        f"partition_md raised on {partition_runs[0].failed}"
    )
    partition_cpu, partition_wall = summary("bare partition_md", partition_runs, len(files))
    ingest_cpu, ingest_wall = summary("citekeeper ingest (serial)", ingest_runs, len(files))
    print(f"throughput: ingest {1 / ingest_wall:.1f} docs/s, partition_md {1 / partition_wall:.1f} docs/s (wall)")
    print(f"wall-time ratio ingest/partition_md: {ingest_wall / partition_wall:.3f} (noisy on a shared machine)")
    print(f"ratio ingest/partition_md (CPU time per document): {ingest_cpu / partition_cpu:.3f} (target <= {TARGET})")


if __name__ == "__main__":
    main()
