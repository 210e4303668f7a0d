"""Ingest time per document against bare `unstructured.partition`, and the parse pool against a serial parse.

The corpus is every file of every httpx-docs release tag (one source tree).

[1] Each round times a bare `partition(filename=...)` loop over the files and a full serial
`parsers.ingest` (workers=1: discover, parse, chunk, LanceDB commit, Parquet export) into a fresh store,
alternating which goes first; the best round of each is compared. The loop takes the files in the order
ingest parses them (copies together, biggest first), so unstructured's caches serve both alike. The ratio uses
CPU time of this process (all its threads, so LanceDB's Rust threads count): the machine is shared, and wall
time swings with other people's load. Wall time is printed too.

[2] Each round runs a full ingest of the same tree twice, serially (workers=1) and with the process pool
(one worker per usable CPU), each in a fresh child process that first ingests one file (imports, spaCy and
the pool's forkserver warm up there; that start-up is printed apart) and then times the whole tree while
sampling the memory of its process tree every 0.5 s (more often, the sampling would take CPU from the
workers). The ratio is documents per second of the pool over serial, on wall time (the pool's CPU time is
spent in other processes). Memory is the peak total PSS of the child and its descendants (the forkserver
and the workers share the pages they forked with: PSS counts a shared page once in all), and the child's
own peak RSS.

    .venv/bin/python bench/bench_ingest.py [--source DIR] [--rounds N] [--skip-partition]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil

from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from parsers.parse_pool import usable_cpus
from parsers.records import ParseConfig
from tests.eval_data import HTTPX_DOCS

TARGET = 1.15
POOL_TARGET = 1.7
DEFAULT_SOURCE = HTTPX_DOCS
SERIAL = ParseConfig(workers=1)
MODES = {"serial": SERIAL, "pool": ParseConfig()}


class Timer:
    """Wall and CPU seconds of a block."""

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def time_partition(files: list[Path]) -> Timer:
    from unstructured.partition.auto import partition

    with Timer() as timer:
        for path in files:
            partition(filename=str(path))
    return timer


def time_ingest(source: Path, scratch: Path, config: ParseConfig = SERIAL) -> Timer:
    store_dir = scratch / "store"
    shutil.rmtree(store_dir, ignore_errors=True)
    with Timer() as timer:
        ingest(source, CorpusStore(store_dir), config=config)
    return timer


def summary(label: str, timers: list[Timer], per: int, unit: str = "doc") -> tuple[float, float]:
    """Best round, per unit of work: (cpu, wall) seconds."""
    cpu, wall = min(t.cpu for t in timers) / per, min(t.wall for t in timers) / per
    rounds = ", ".join(f"{t.cpu:.2f}/{t.wall:.2f}s" for t in timers)
    print(f"{label:<28} {cpu * 1000:8.1f} ms/{unit} CPU, {wall * 1000:8.1f} ms/{unit} wall (rounds cpu/wall: {rounds})")
    return cpu, wall


def parse_order(files: list[Path]) -> list[Path]:
    """The order ingest parses files in (parsers.parse_pool): grouped by content, biggest group first."""
    groups: dict[str, list[Path]] = {}
    for path in files:
        groups.setdefault(hashlib.sha256(path.read_bytes()).hexdigest(), []).append(path)
    return [
        path for group in sorted(groups.values(), key=lambda g: g[0].stat().st_size, reverse=True) for path in group
    ]


def compare_with_partition(source: Path, files: list[Path], rounds: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        time_partition(files[:3])  # warm-up: imports, lazy model loads
        time_ingest(files[0].parent, Path(scratch))
        partition_runs, ingest_runs = [], []
        for round_index in range(rounds):
            steps = [
                lambda: partition_runs.append(time_partition(files)),
                lambda: ingest_runs.append(time_ingest(source, Path(scratch))),
            ]
            for step in steps if round_index % 2 == 0 else reversed(steps):
                step()
        n_documents = CorpusStore(Path(scratch) / "store").latest().n_documents
    print(f"[1] files: {len(files)} from {source} ({n_documents} ingested); best of {rounds} rounds")
    partition_cpu, partition_wall = summary("bare unstructured.partition", partition_runs, len(files))
    ingest_cpu, ingest_wall = summary("citekeeper ingest (serial)", ingest_runs, len(files))
    print(f"wall-time ratio ingest/partition: {ingest_wall / partition_wall:.3f} (noisy on a shared machine)")
    print(f"ratio ingest/partition (CPU time per document): {ingest_cpu / partition_cpu:.3f} (target <= {TARGET})")


# ---------------------------------------------------------------------- [2] pool against serial


class TreeMemory:
    """Per phase (`phase`, set by the caller): peak total PSS and peak sum of RSS of this process and its
    descendants, and peak RSS of this process, sampled every `interval` seconds (ru_maxrss would not do: a child
    started from a big process inherits its peak)."""

    def __init__(self, interval: float = 0.25):
        self.interval, self.phase = interval, "start"
        self.peaks: dict[str, dict[str, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def peak(self, key: str, phase: str | None = None) -> float:
        """MB: the peak of `key` (pss, rss_tree, rss_own) in `phase`, or over all phases."""
        return max((p[key] for name, p in self.peaks.items() if phase in (None, name)), default=0) / 2**20

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            phase, pss, rss = self.phase, 0, 0
            for process in [me, *me.children(recursive=True)]:
                try:
                    info = process.memory_full_info()
                except psutil.Error:  # a worker that just ended
                    continue
                pss, rss = pss + info.pss, rss + info.rss
            peaks = self.peaks.setdefault(phase, {"pss": 0, "rss_tree": 0, "rss_own": 0})
            for key, value in (("pss", pss), ("rss_tree", rss), ("rss_own", me.memory_info().rss)):
                peaks[key] = max(peaks[key], value)
            self._stop.wait(self.interval)


def measure(mode: str, source: Path) -> dict:
    """In a fresh process: warm up on one file, then ingest the whole tree; what a child prints as JSON."""
    config = MODES[mode]
    with tempfile.TemporaryDirectory() as scratch:
        one_file = Path(scratch) / "one"
        one_file.mkdir()
        shutil.copy(sorted(source.rglob("*.md"))[0], one_file)
        startup = time_ingest(one_file, Path(scratch), config)
        with TreeMemory(interval=0.5) as memory:
            timed = time_ingest(source, Path(scratch), config)
        n_documents = CorpusStore(Path(scratch) / "store").latest().n_documents
    return {
        "mode": mode,
        "startup_s": startup.wall,
        "wall_s": timed.wall,
        "n_documents": n_documents,
        "peak_pss_mb": memory.peak("pss"),
        "peak_rss_main_mb": memory.peak("rss_own"),
    }


def measure_in_child(mode: str, source: Path) -> dict:
    command = [sys.executable, __file__, "--measure", mode, "--source", str(source)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare_pool_with_serial(source: Path, rounds: int) -> None:
    runs: dict[str, list[dict]] = {"serial": [], "pool": []}
    for round_index in range(rounds):
        for mode in ("serial", "pool") if round_index % 2 == 0 else ("pool", "serial"):
            runs[mode].append(measure_in_child(mode, source))
    n_documents = runs["serial"][0]["n_documents"]
    print(
        f"[2] {n_documents} documents from {source}, {usable_cpus()} usable CPUs; best of {rounds} rounds, "
        "each run in a fresh process"
    )
    best = {}
    for mode, measured in runs.items():
        best[mode] = min(m["wall_s"] for m in measured)
        rounds_text = ", ".join(f"{m['wall_s']:.2f}s" for m in measured)
        print(
            f"ingest {mode:<7} {n_documents / best[mode]:7.2f} docs/s (wall {best[mode]:.2f}s; rounds: {rounds_text}); "
            f"start-up on one file {min(m['startup_s'] for m in measured):.2f}s; "
            f"peak PSS of the process tree {max(m['peak_pss_mb'] for m in measured):.0f} MB, "
            f"peak RSS of the ingesting process {max(m['peak_rss_main_mb'] for m in measured):.0f} MB"
        )
    print(f"throughput ratio pool/serial (wall time): {best['serial'] / best['pool']:.2f}x (target >= {POOL_TARGET}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-partition", action="store_true", help="Only [2], the pool against serial.")
    parser.add_argument("--measure", choices=sorted(MODES), help=argparse.SUPPRESS)  # a child of [2]
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.source)))
        return
    if not args.skip_partition:
        files = parse_order(sorted(p for p in args.source.rglob("*") if p.is_file()))
        compare_with_partition(args.source, files, args.rounds)
    compare_pool_with_serial(args.source, args.rounds)


if __name__ == "__main__":
    main()
