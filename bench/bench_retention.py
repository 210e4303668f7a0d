"""Retention benchmark: 100 consecutive versions of a 200,000-chunk synthetic corpus, each changing 1% of documents.

The versions are committed to a real CorpusStore one after the other, as nightly ingests would (bench_diff.py's
synthetic chunks, 100 per document; a version re-writes every chunk of its changed documents). Then
`citekeeper gc --keep-last 7` (citekeeper.retention.gc) runs, and the benchmark prints, each against a baseline
built in the same run:

(a) store bytes after gc / (bytes of one version + bytes of the changes in the kept window); target <= 1.5.
    Numerator: every byte of the store (LanceDB tables, Parquet exports, manifests, ...). Denominator: every byte
    of a fresh store holding just the oldest kept version, committed in one go (its LanceDB tables, exports and
    manifest), plus, for each later kept version, the bytes its own commit added to the LanceDB tables when the
    100 versions were built (data fragments, deletion files, index delta, table manifests).
(b) read time of the latest version's chunks after the 100 commits and gc / the same read on a fresh store
    holding the latest version committed in one go; target <= 1.2. Two reads: the LanceDB scan (the chunks table
    checked out at the version's tag, every column: what the storage layout, and so compaction, governs) and
    CorpusStore.read_chunks (that scan, then the rows sorted by doc_id and ordinal in polars: the fresh store's
    rows are already in that order, which polars detects, while any store built by increments holds changed
    documents at the end and pays for the reordering). Best of --repeat reads of each, interleaved (the machine
    may be shared: the best time is the least disturbed one); the median of the per-pair ratios is printed too,
    and the same figures before gc (no compaction: 100 commits' fragments and deletion files).
Peak RSS of each process: the builder, the gc, and the reader (this process).

    .venv/bin/python bench/bench_retention.py [--versions 100] [--chunks 200000] [--changed 0.01] [--keep-last 7]
                                              [--repeat 11]
    .venv/bin/python bench/bench_retention.py --versions 10 --chunks 20000   # a quick check
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import statistics
import sys
import tempfile
import time
from importlib.metadata import version as distribution_version
from pathlib import Path

import lancedb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_diff import CHUNKS_PER_DOC, _chunks, _commit
from citekeeper.retention import _path_bytes, gc, store_bytes
from citekeeper.store import CorpusStore

FIRST_VARIANT = 10  # bench_diff's variant 2 means "an added chunk"; edits here use 10, 11, ...


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def name(step: int) -> str:
    return f"v{step:04d}"


def build(root: Path, n_chunks: int, n_versions: int, changed: float, out: Path) -> None:
    """Commit n_versions versions; record each commit's growth of the LanceDB directory and its seconds."""
    n_docs = n_chunks // CHUNKS_PER_DOC
    doc_index = np.repeat(np.arange(n_docs), CHUNKS_PER_DOC)
    ordinal = np.tile(np.arange(CHUNKS_PER_DOC), n_docs)
    store = CorpusStore(root)
    lance = root / "lance"
    rng = np.random.default_rng(13)
    n_changed = max(1, round(n_docs * changed))
    growth, seconds = {}, []
    for step in range(n_versions):
        before = _path_bytes(lance) if lance.exists() else 0
        started = time.perf_counter()
        if step == 0:
            _commit(store, name(0), None, _chunks(doc_index, ordinal, np.zeros(n_chunks, dtype=np.int64)), [])
        else:
            docs = rng.choice(n_docs, size=n_changed, replace=False)
            hit = np.isin(doc_index, docs)
            rows = _chunks(doc_index[hit], ordinal[hit], np.full(int(hit.sum()), FIRST_VARIANT + step))
            _commit(store, name(step), name(step - 1), rows, [f"doc_{i}" for i in docs])
        seconds.append(time.perf_counter() - started)
        growth[name(step)] = _path_bytes(lance) - before
    out.write_text(json.dumps({"growth": growth, "commit_s": seconds, "peak_mb": _peak_mb()}))


def run_gc(root: Path, keep_last: int, out: Path) -> None:
    summary = gc(CorpusStore(root), keep_last)
    out.write_text(json.dumps({"summary": summary.to_dict(), "text": summary.text(), "peak_mb": _peak_mb()}))


def copy_version(source: Path, version: str, root: Path, out: Path) -> None:
    """A fresh store holding `version` of the store at `source`, committed in one go."""
    chunks = CorpusStore(source).read_chunks(version)
    started = time.perf_counter()
    _commit(CorpusStore(root), version, None, chunks, [])
    out.write_text(
        json.dumps(
            {"bytes": store_bytes(CorpusStore(root)), "commit_s": time.perf_counter() - started, "peak_mb": _peak_mb()}
        )
    )


def in_child(target, *args) -> dict:
    """Run target(*args, out) in a fresh process; its JSON result."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = Path(handle.name)
    child = multiprocessing.get_context("spawn").Process(target=target, args=(*args, out))
    child.start()
    child.join()
    if child.exitcode:
        raise SystemExit(f"{target.__name__} failed (exit {child.exitcode})")
    result = json.loads(out.read_text())
    out.unlink()
    return result


def scan(root: Path, version: str) -> None:
    """The LanceDB side of a read: the chunks table checked out at the version's tag, every stored column."""
    CorpusStore(root).lance_at("chunks", version).to_table()


def read_chunks(root: Path, version: str) -> None:
    """CorpusStore.read_chunks: the scan, plus the frame sorted by (doc_id, ordinal) with corpus_version."""
    CorpusStore(root).read_chunks(version)


READS = {"LanceDB scan": scan, "read_chunks": read_chunks}


def read_seconds(read, root: Path, version: str) -> float:
    started = time.perf_counter()
    read(root, version)
    return time.perf_counter() - started


def read_ratios(store_root: Path, fresh_root: Path, version: str, repeat: int) -> dict[str, tuple[float, float, float]]:
    """For each kind of read: (best seconds on the store, best on the fresh store, median of the per-pair ratios).
    `repeat` pairs of reads, back to back in alternating order so both see the same machine load; one warm-up
    read each first."""
    result = {}
    for label, read in READS.items():
        read_seconds(read, store_root, version), read_seconds(read, fresh_root, version)
        pairs = []
        for i in range(repeat):
            if i % 2:
                fresh = read_seconds(read, fresh_root, version)
                pairs.append((read_seconds(read, store_root, version), fresh))
            else:
                pairs.append((read_seconds(read, store_root, version), read_seconds(read, fresh_root, version)))
        result[label] = (
            min(p[0] for p in pairs),
            min(p[1] for p in pairs),
            statistics.median(p[0] / p[1] for p in pairs),
        )
    return result


def breakdown(root: Path) -> tuple[int, int, int]:
    """(LanceDB, Parquet exports, everything else) bytes of a store root."""
    lance, parquet = _path_bytes(root / "lance"), _path_bytes(root / "parquet")
    return lance, parquet, _path_bytes(root) - lance - parquet


def mb(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--chunks", type=int, default=200_000)
    parser.add_argument("--changed", type=float, default=0.01, help="fraction of documents each version changes")
    parser.add_argument("--keep-last", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=11)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_retention_") as tmp:
        root, oldest_root, latest_root = (Path(tmp) / n for n in ("store", "fresh-oldest", "fresh-latest"))
        print(
            f"lancedb {lancedb.__version__}, pylance {distribution_version('pylance')}, {os.cpu_count()} CPUs; "
            f"versions {args.versions}, chunks {args.chunks:,}, keep-last {args.keep_last}"
        )
        started = time.perf_counter()
        built = in_child(build, root, args.chunks, args.versions, args.changed)
        n_docs = args.chunks // CHUNKS_PER_DOC
        print(
            f"committed {args.versions} versions of {args.chunks:,} chunks ({n_docs:,} documents, "
            f"{max(1, round(n_docs * args.changed))} changed per version) in {time.perf_counter() - started:.0f}s; "
            f"commit median {statistics.median(built['commit_s'][1:] or built['commit_s']):.2f}s"
        )
        latest = name(args.versions - 1)
        bytes_before = store_bytes(CorpusStore(root))
        in_child(copy_version, root, latest, latest_root)
        before = read_ratios(root, latest_root, latest, args.repeat)

        collected = in_child(run_gc, root, args.keep_last)
        summary = collected["summary"]
        print(collected["text"])
        kept = list(summary["kept"])
        oldest = in_child(copy_version, root, kept[0], oldest_root)
        window = sum(built["growth"][v] for v in kept[1:])
        denominator = oldest["bytes"] + window
        bytes_after = store_bytes(CorpusStore(root))
        parts = {label: breakdown(r) for label, r in (("after gc", root), (f"fresh {kept[0]}", oldest_root))}
        after = read_ratios(root, latest_root, latest, args.repeat)
        peak_mb = _peak_mb()

    ratio_a = bytes_after / denominator
    print()
    print(
        f"store bytes before gc: {mb(bytes_before)}; after gc --keep-last {args.keep_last}: {mb(bytes_after)} "
        f"(gc {summary['seconds']:.1f}s)"
    )
    print(
        f"one version (fresh store of {kept[0]}, one commit): {mb(oldest['bytes'])}; changes of the kept window "
        f"({len(kept) - 1} commits' LanceDB growth): {mb(window)}"
    )
    for label, (lance, parquet, rest) in parts.items():
        print(f"  {label}: LanceDB {mb(lance)}, Parquet exports {mb(parquet)}, the rest {mb(rest)}")
    print(
        f"(a) store bytes / (one version + kept changes): {ratio_a:.2f} (target <= 1.5) -> "
        f"{'OK' if ratio_a <= 1.5 else 'MISSED'}"
    )
    for label in READS:
        (after_s, fresh_s, after_median), (before_s, fresh_before_s, before_median) = after[label], before[label]
        ratio_b = after_s / fresh_s
        print(
            f"{label} of {latest}'s chunks, best of {args.repeat}: {after_s:.3f}s after gc, {before_s:.3f}s before "
            f"gc; fresh one-commit store {fresh_s:.3f}s (in the before-gc pass {fresh_before_s:.3f}s)"
        )
        print(
            f"(b) {label}: after {args.versions} commits + gc / one commit: {ratio_b:.2f} (target <= 1.2) -> "
            f"{'OK' if ratio_b <= 1.2 else 'MISSED'}; median of the pair ratios {after_median:.2f}; "
            f"without gc: {before_s / fresh_before_s:.2f} (median {before_median:.2f})"
        )
    print(f"peak RSS: builder {built['peak_mb']:.0f} MB, gc {collected['peak_mb']:.0f} MB, reader {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
