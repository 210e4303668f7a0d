"""Diff benchmark: two synthetic corpus versions of 1,000,000 chunks with 1% of the chunks changed.

Prints the diff time against a bare polars scan of the chunk_id and text_hash columns of both versions,
measured in the same run (target: diff <= 2x the scan), and the peak RSS of this process (target <= 2 GB).
The versions are generated in a child process, so generating them does not count towards the peak.

    .venv/bin/python bench/bench_diff.py [--chunks 1000000] [--changed 0.01] [--repeat 3]
"""
from __future__ import annotations

import argparse
import multiprocessing
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from verifiers.diff import diff_frames  # noqa: E402

CHUNKS_PER_DOC = 100
CHANGES_PER_DOC = 20  # of which: modified 12, removed 4, added 4
ADDED = 2  # variant of added chunks
WORDS = np.array("client request response timeout proxy pool stream header cookie redirect auth retry".split())


def _hash(texts: pl.Expr) -> pl.Expr:
    return pl.lit("sha256:") + texts.hash(seed=7).cast(pl.String).str.zfill(20)


def _chunks(doc_index: np.ndarray, ordinal: np.ndarray, variant: np.ndarray) -> pl.DataFrame:
    """Chunk rows; `variant` > 0 gives a chunk a different (edited) text."""
    # Filler words derive from (doc, ordinal), so a chunk has the same text in both versions.
    picks = (doc_index[:, None] * 131 + ordinal[:, None] * 17 + np.arange(8)[None, :] * 29) % len(WORDS)
    filler = WORDS[picks]
    frame = pl.DataFrame({"doc": doc_index, "ordinal": ordinal, "variant": variant, "filler": [" ".join(w) for w in filler]})
    text = (
        pl.when(pl.col("variant") == ADDED)
        .then(pl.format("{}/{} #{}", "ordinal", "doc", "variant"))  # short and unlike anything removed
        .otherwise(pl.format("Document {} paragraph {} revision {}: the {} and more words follow here.", "doc", "ordinal", "variant", "filler"))
    )
    return (
        frame.with_columns(text=text, doc_id=pl.format("doc_{}", "doc"))
        .with_columns(text_hash=_hash(pl.col("text")), chunk_id=pl.lit("ck_") + _hash(pl.col("doc_id") + pl.col("text")).str.slice(7))
        .with_columns(length=pl.col("text").str.len_chars() + 2)
        .with_columns(end_char=pl.col("length").cum_sum().over("doc_id") - 2)
        .with_columns(start_char=pl.col("end_char") - pl.col("length") + 2, section_path=pl.concat_list(pl.col("doc_id")))
        .select("chunk_id", "doc_id", "text_hash", "start_char", "end_char", "section_path", "text")
    )


def _documents(chunks: pl.DataFrame) -> pl.DataFrame:
    return chunks.group_by("doc_id").agg(
        doc_content_hash=pl.lit("sha256:") + pl.col("text_hash").str.join("").hash(seed=3).cast(pl.String),
        source_path=pl.format("docs/{}.md", pl.col("doc_id").first()),
    )


def generate(out: Path, n_chunks: int, changed: float) -> None:
    n_docs = n_chunks // CHUNKS_PER_DOC
    doc_index = np.repeat(np.arange(n_docs), CHUNKS_PER_DOC)
    ordinal = np.tile(np.arange(CHUNKS_PER_DOC), n_docs)
    old = _chunks(doc_index, ordinal, np.zeros(n_chunks, dtype=np.int64))

    n_affected = int(n_chunks * changed) // CHANGES_PER_DOC
    affected = np.random.default_rng(1).choice(n_docs, size=n_affected, replace=False)
    hit = np.isin(doc_index, affected)
    variant = np.where(hit & (ordinal < 12), 1, 0)  # modified: same position, edited text
    keep = ~(hit & (ordinal >= 12) & (ordinal < 16))  # removed
    added_docs = np.repeat(affected, 4)
    new = pl.concat(
        [
            _chunks(doc_index[keep], ordinal[keep], variant[keep]),
            _chunks(added_docs, np.tile(np.arange(1000, 1004), n_affected), np.full(len(added_docs), ADDED)),
        ]
    ).sort("doc_id", "start_char")
    for name, frame in (("old", old), ("new", new)):
        frame.write_parquet(out / f"chunks_{name}.parquet")
        _documents(frame).write_parquet(out / f"docs_{name}.parquet")


def scan_ids(out: Path) -> int:
    """The baseline: read chunk_id and text_hash of both versions."""
    frames = [pl.scan_parquet(out / f"chunks_{v}.parquet").select("chunk_id", "text_hash").collect() for v in ("old", "new")]
    return sum(f.height for f in frames)


def run_diff(out: Path):
    return diff_frames(
        "old",
        "new",
        pl.scan_parquet(out / "docs_old.parquet"),
        pl.scan_parquet(out / "docs_new.parquet"),
        pl.scan_parquet(out / "chunks_old.parquet"),
        pl.scan_parquet(out / "chunks_new.parquet"),
    )


def timed(fn, *args) -> tuple[float, object]:
    started = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - started, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--changed", type=float, default=0.01)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_diff_") as tmp:
        out = Path(tmp)
        started = time.perf_counter()
        child = multiprocessing.get_context("spawn").Process(target=generate, args=(out, args.chunks, args.changed))
        child.start()
        child.join()
        if child.exitcode:
            raise SystemExit(f"generating the versions failed (exit {child.exitcode})")
        print(f"generated 2 versions of {args.chunks:,} chunks ({args.changed:.0%} changed) in {time.perf_counter() - started:.1f}s")
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        scans, diffs = [], []
        for _ in range(args.repeat):  # interleaved, so both see the same machine load
            scans.append(timed(scan_ids, out)[0])
            seconds, diff = timed(run_diff, out)
            diffs.append(seconds)
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    scan_s, diff_s = statistics.median(scans), statistics.median(diffs)
    counts = diff.chunk_counts()
    print(f"chunk changes: {counts}")
    print(f"document changes: {diff.doc_counts()}")
    print(f"baseline scan of chunk_id+text_hash (both versions): {scan_s:.3f}s (median of {args.repeat})")
    print(f"diff: {diff_s:.3f}s (median of {args.repeat})")
    print(f"ratio diff/scan: {diff_s / scan_s:.2f}x (target <= 2x) -> {'OK' if diff_s <= 2 * scan_s else 'MISSED'}")
    print(f"peak RSS: {peak_mb:.0f} MB (before the runs: {rss_before:.0f} MB; target <= 2048 MB) -> "
          f"{'OK' if peak_mb <= 2048 else 'MISSED'}")


if __name__ == "__main__":
    main()
