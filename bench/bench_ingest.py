"""Ingest time per document against bare `unstructured.partition` on the same files, in the same run.

The corpus is every file of every httpx-docs release tag (one source tree). Each round times a bare
`partition(filename=...)` loop over the files and a full `parsers.ingest` (discover, parse, chunk,
LanceDB commit, Parquet export) into a fresh store, alternating which goes first; the best round of
each is compared. The ratio uses CPU time of this process (all its threads, so LanceDB's Rust threads
count): the machine is shared, and wall time swings with other people's load. Wall time is printed too.

    .venv/bin/python bench/bench_ingest.py [--source DIR] [--rounds N]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from unstructured.partition.auto import partition  # noqa: E402

from parsers.ingest import ingest  # noqa: E402
from citekeeper.store import CorpusStore  # noqa: E402
from tests.eval_data import HTTPX_DOCS  # noqa: E402

TARGET = 1.15
DEFAULT_SOURCE = HTTPX_DOCS


class Timer:
    """Wall and CPU seconds of a block."""

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def time_partition(files: list[Path]) -> Timer:
    with Timer() as timer:
        for path in files:
            partition(filename=str(path))
    return timer


def time_ingest(source: Path, scratch: Path) -> Timer:
    store_dir = scratch / "store"
    shutil.rmtree(store_dir, ignore_errors=True)
    with Timer() as timer:
        ingest(source, CorpusStore(store_dir))
    return timer


def summary(label: str, timers: list[Timer], per: int, unit: str = "doc") -> tuple[float, float]:
    """Best round, per unit of work: (cpu, wall) seconds."""
    cpu, wall = min(t.cpu for t in timers) / per, min(t.wall for t in timers) / per
    rounds = ", ".join(f"{t.cpu:.2f}/{t.wall:.2f}s" for t in timers)
    print(f"{label:<28} {cpu * 1000:8.1f} ms/{unit} CPU, {wall * 1000:8.1f} ms/{unit} wall "
          f"(rounds cpu/wall: {rounds})")
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    files = sorted(p for p in args.source.rglob("*") if p.is_file())
    with tempfile.TemporaryDirectory() as scratch:
        time_partition(files[:3])  # warm-up: imports, lazy model loads
        time_ingest(files[0].parent, Path(scratch))
        partition_runs, ingest_runs = [], []
        for round_index in range(args.rounds):
            steps = [lambda: partition_runs.append(time_partition(files)),
                     lambda: ingest_runs.append(time_ingest(args.source, Path(scratch)))]
            for step in steps if round_index % 2 == 0 else reversed(steps):
                step()
        n_documents = CorpusStore(Path(scratch) / "store").latest().n_documents
    print(f"files: {len(files)} from {args.source} ({n_documents} ingested); best of {args.rounds} rounds")
    partition_cpu, partition_wall = summary("bare unstructured.partition", partition_runs, len(files))
    ingest_cpu, ingest_wall = summary("citekeeper ingest", ingest_runs, len(files))
    print(f"wall-time ratio ingest/partition: {ingest_wall / partition_wall:.3f} (noisy on a shared machine)")
    print(f"ratio ingest/partition (CPU time per document): {ingest_cpu / partition_cpu:.3f} (target <= {TARGET})")


if __name__ == "__main__":
    main()
