"""Benchmark 5 (issue #13): ingest of 50,000 small synthetic documents; documents per second and peak memory.

A tree of short markdown files (a title, two sections, ~450 bytes; every one different) is generated into a
temporary directory, 1,000 files per folder. Each measured ingest runs in a fresh child process: what
`parsers.ingest.ingest` does (under the writer lock, `stage`: discover, parse in the process pool, write
the parse results in batches; then `commit`: LanceDB, Parquet exports) into a fresh store, the two steps
timed and measured apart. The process tree (the ingesting process, the pool's forkserver and workers) is
sampled every 0.25 s as `bench_ingest.py` samples it: the peak total PSS of the tree (PSS counts a page the
forked processes share once in all), the peak RSS of the ingesting process, and the peak sum of the tree's
RSS (which counts shared pages once per process, so it overstates). The ingesting process's exact peaks
(ru_maxrss, after the stage and at the end) are printed too: sampling can miss a short peak.

The baseline, measured in the same run, is the same ingest of a tree a tenth the size (`--baseline-docs`):
the ratio of the two peaks, per step, says whether memory grows with the tree (1.0: bounded by the batch
size).

    .venv/bin/python bench/bench_ingest_scale.py                          # 50,000 documents (target <= 1.5 GB)
    .venv/bin/python bench/bench_ingest_scale.py --docs 2000 --baseline-docs 200   # a quick run
    .venv/bin/python bench/bench_ingest_scale.py --docs 20000 --batch-size 256 --workers 2 --no-baseline
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil

from bench.bench_ingest import TreeMemory
from citekeeper.store import CorpusStore
from parsers.ingest import STAGE_BATCH_DOCS, commit, stage
from parsers.parse_pool import usable_cpus
from parsers.records import ParseConfig

TARGET_MB = 1536  # 1.5 GB
PER_FOLDER = 1000
WORDS = (
    "inventory shelf audit ledger supplier invoice carton pallet crate batch order receipt courier "
    "warehouse forklift barcode scanner label freight invoice dispatch customer return refund stock "
    "count review manager region quarter budget forecast estimate"
).split()


def document(i: int) -> str:
    """A short, unique markdown document (~450 bytes): a title and two sections of two sentences each."""
    rng = random.Random(i)
    words = lambda n: " ".join(rng.choice(WORDS) for _ in range(n))  # noqa: E731
    return (
        f"# Note {i}\n\n"
        f"Note {i} records the {words(4)} of item {i}. It was checked on day {i % 365} by team {i % 17}.\n\n"
        f"## Details\n\nThe item {i} weighs {i % 97} kilograms and sits on shelf {i % 13}. Its {words(5)} "
        f"was last updated in week {i % 52}.\n\n"
        f"## History\n\nItem {i} came from supplier {i % 211} with {words(6)}. Nothing else is known about it.\n"
    )


def generate(root: Path, n_docs: int) -> int:
    """n_docs documents under root (PER_FOLDER to a folder); returns their total size in bytes."""
    total = 0
    for i in range(n_docs):
        folder = root / f"part-{i // PER_FOLDER:03d}"
        if i % PER_FOLDER == 0:
            folder.mkdir(parents=True, exist_ok=True)
        text = document(i)
        (folder / f"note-{i:06d}.md").write_text(text)
        total += len(text.encode())
    return total


def maxrss_mb() -> float:
    """This process's peak RSS so far (exact, never sampled)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(source: Path, workers: int | None, batch_size: int) -> dict:
    """In this (fresh) process: one full ingest of `source` into a fresh store, memory sampled throughout.
    What `ingest()` does, its two steps apart (under the writer lock: stage, then commit), so that each
    step's peak is known."""
    config = ParseConfig(workers=workers)
    with tempfile.TemporaryDirectory(prefix="ck-scale-store-") as scratch:
        store = CorpusStore(Path(scratch) / "store")
        before_rss = psutil.Process().memory_info().rss
        with TreeMemory() as memory, store.lock():
            started, cpu = time.perf_counter(), time.process_time()
            memory.phase = "stage"
            stage(source, store, "v1", config=config, batch_size=batch_size)
            staged_s, maxrss_stage = time.perf_counter() - started, maxrss_mb()
            memory.phase = "commit"
            result = commit(store, "v1", batch_size=batch_size)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        manifest = result.manifest
        store_bytes = sum(p.stat().st_size for p in (Path(scratch) / "store").rglob("*") if p.is_file())
    return {
        "wall_s": wall,
        "cpu_main_s": cpu,
        "n_documents": manifest.n_documents,
        "n_chunks": manifest.n_chunks,
        "n_errors": manifest.n_errors,
        "durations_s": {"stage": staged_s, **result.durations_s},
        "peak_pss_mb": memory.peak("pss"),
        "peak_rss_main_mb": memory.peak("rss_own"),
        "peak_rss_tree_mb": memory.peak("rss_tree"),
        "rss_before_mb": before_rss / 2**20,
        "phases": {
            phase: {key: memory.peak(key, phase) for key in ("pss", "rss_tree", "rss_own")}
            for phase in ("stage", "commit")
        },
        "maxrss_main_mb": maxrss_mb(),
        "maxrss_stage_mb": maxrss_stage,
        "store_mb": store_bytes / 2**20,
    }


def measure_in_child(source: Path, workers: int | None, batch_size: int) -> dict:
    command = [sys.executable, __file__, "--measure", str(source), "--batch-size", str(batch_size)]
    if workers is not None:
        command += ["--workers", str(workers)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"measuring child failed:\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(n_docs: int, workers: int | None, batch_size: int, scratch: Path) -> dict:
    source = scratch / f"tree-{n_docs}"
    started = time.perf_counter()
    size = generate(source, n_docs)
    generated_s = time.perf_counter() - started
    measured = measure_in_child(source, workers, batch_size)
    shutil.rmtree(source)
    durations = ", ".join(f"{k} {v:.1f}s" for k, v in measured["durations_s"].items())
    print(
        f"  {n_docs:,} documents ({size / 2**20:.1f} MB of markdown, generated in {generated_s:.1f}s): "
        f"{measured['n_documents']:,} documents, {measured['n_chunks']:,} chunks, {measured['n_errors']} errors"
    )
    print(
        f"    {measured['n_documents'] / measured['wall_s']:.1f} docs/s (wall {measured['wall_s']:.1f}s: {durations}; "
        f"CPU of the ingesting process {measured['cpu_main_s']:.1f}s)"
    )
    print(
        f"    peak PSS of the process tree {measured['peak_pss_mb']:.0f} MB; peak RSS of the ingesting process "
        f"{measured['peak_rss_main_mb']:.0f} MB sampled, {measured['maxrss_main_mb']:.0f} MB exact (ru_maxrss; "
        f"{measured['rss_before_mb']:.0f} MB before); peak sum of RSS over the tree "
        f"{measured['peak_rss_tree_mb']:.0f} MB; store on disk {measured['store_mb']:.0f} MB"
    )
    stage_peaks, commit_peaks = measured["phases"]["stage"], measured["phases"]["commit"]
    print(
        f"    stage: peak PSS of the tree {stage_peaks['pss']:.0f} MB, "
        f"ingesting process {stage_peaks['rss_own']:.0f} MB sampled, {measured['maxrss_stage_mb']:.0f} MB exact; "
        f"commit: peak PSS of the tree {commit_peaks['pss']:.0f} MB, "
        f"ingesting process {commit_peaks['rss_own']:.0f} MB sampled"
    )
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=50_000, help="documents in the measured tree (default 50,000)")
    parser.add_argument("--baseline-docs", type=int, help="documents in the baseline tree (default: a tenth)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the baseline run")
    parser.add_argument("--workers", type=int, help="parse workers (default: one per usable CPU)")
    parser.add_argument("--batch-size", type=int, default=STAGE_BATCH_DOCS, help="documents per staged batch")
    parser.add_argument("--scratch", type=Path, help="where the trees are generated (default: a temp dir)")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # a child: ingest this tree
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.workers, args.batch_size)))
        return

    load = os.getloadavg()[0]
    print(
        f"bench_ingest_scale: {usable_cpus()} usable CPUs, parse workers {args.workers or usable_cpus()}, "
        f"batch size {args.batch_size} documents, load average {load:.1f} at start"
    )
    with tempfile.TemporaryDirectory(prefix="ck-scale-", dir=args.scratch) as scratch:
        baseline = None
        if not args.no_baseline:
            n_base = args.baseline_docs or max(args.docs // 10, 1)
            print(f"baseline: {n_base:,} documents")
            baseline = run(n_base, args.workers, args.batch_size, Path(scratch))
        print(f"measured: {args.docs:,} documents")
        measured = run(args.docs, args.workers, args.batch_size, Path(scratch))
    peak = measured["peak_pss_mb"]
    print(f"documents per second: {measured['n_documents'] / measured['wall_s']:.1f}")
    print(
        f"peak PSS of the process tree: {peak:.0f} MB (target <= {TARGET_MB} MB) -> "
        f"{'OK' if peak <= TARGET_MB else 'OVER'}"
    )
    if baseline is not None:
        base = baseline["phases"]
        print(
            f"ratio of peaks {args.docs:,} docs / {baseline['n_documents']:,} docs"
            " (1.0: memory does not grow with the tree):"
        )
        print(
            f"  stage:  PSS of the tree {measured['phases']['stage']['pss'] / base['stage']['pss']:.2f}x, "
            f"ingesting process {measured['maxrss_stage_mb'] / baseline['maxrss_stage_mb']:.2f}x (exact peaks)"
        )
        print(
            f"  commit: PSS of the tree {measured['phases']['commit']['pss'] / base['commit']['pss']:.2f}x, "
            f"ingesting process {measured['maxrss_main_mb'] / baseline['maxrss_main_mb']:.2f}x"
            " (exact peaks, whole ingest)"
        )
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
