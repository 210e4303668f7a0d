"""Diff benchmark: two synthetic corpus versions of 1,000,000 chunks with 1% of the chunks changed.

Both versions are committed to a real CorpusStore (LanceDB tables + Parquet exports), as ingest would.
Prints the time of `citekeeper diff` (changes.diff.diff_versions, its cache cleared before each run)
against a bare polars scan of the chunk_id and text_hash columns of both versions' Parquet exports,
measured in the same run (target: diff <= 2x the scan), and the peak RSS of this process (target <= 2 GB).
The store is built in a child process, so building it does not count towards the peak.

    .venv/bin/python bench/bench_diff.py [--chunks 1000000] [--changed 0.01] [--repeat 5]
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from changes.diff import diff_versions
from citekeeper.layout import StoreLayout
from citekeeper.schema import INGEST_ERRORS
from citekeeper.store import STORED_SCHEMAS, CorpusStore, VersionManifest
from citekeeper.tables import to_arrow
from tests.store_helpers import export_into_store

CHUNKS_PER_DOC = 100
CHANGES_PER_DOC = 20  # of which: modified 12, removed 4, added 4
ADDED = 2  # variant of added chunks
NOW = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = np.array("client request response timeout proxy pool stream header cookie redirect auth retry".split())


def _hash(texts: pl.Expr) -> pl.Expr:
    return pl.lit("sha256:") + texts.hash(seed=7).cast(pl.String).str.zfill(20)


def _chunks(doc_index: np.ndarray, ordinal: np.ndarray, variant: np.ndarray) -> pl.DataFrame:
    """Chunk rows in the stored schema's columns; `variant` > 0 gives a chunk a different (edited) text."""
    # Filler words derive from (doc, ordinal), so a chunk has the same text in both versions.
    picks = (doc_index[:, None] * 131 + ordinal[:, None] * 17 + np.arange(8)[None, :] * 29) % len(WORDS)
    filler = WORDS[picks]
    frame = pl.DataFrame(
        {"doc": doc_index, "ordinal": ordinal, "variant": variant, "filler": [" ".join(w) for w in filler]}
    )
    text = (
        pl.when(pl.col("variant") == ADDED)
        .then(pl.format("{}/{} #{}", "ordinal", "doc", "variant"))  # short and unlike anything removed
        .otherwise(
            pl.format(
                "Document {} paragraph {} revision {}: the {} and more words follow here.",
                "doc",
                "ordinal",
                "variant",
                "filler",
            )
        )
    )
    return (
        frame.with_columns(text=text, doc_id=pl.format("doc_{}", "doc"))
        .sort("doc_id", "ordinal")
        .with_columns(
            text_hash=_hash(pl.col("text")),
            chunk_id=pl.lit("ck_") + _hash(pl.col("doc_id") + pl.col("text")).str.slice(7),
        )
        .with_columns(length=pl.col("text").str.len_chars() + 2, ordinal=pl.int_range(pl.len()).over("doc_id"))
        .with_columns(end_char=pl.col("length").cum_sum().over("doc_id") - 2)
        .with_columns(
            start_char=pl.col("end_char") - pl.col("length") + 2,
            section_path=pl.concat_list(pl.col("doc_id")),
            element_types=pl.concat_list(pl.lit("NarrativeText")),
            source_path=pl.format("docs/{}.md", "doc_id"),
            title=pl.col("doc_id"),
            filetype=pl.lit("md"),
            access_scope=pl.lit("user_visible"),
            ingested_at=pl.lit(NOW),
        )
        .with_columns(doc_content_hash=_hash(pl.col("text_hash").str.join("").over("doc_id")))
    )


def _documents(chunks: pl.DataFrame) -> pl.DataFrame:
    """Document rows whose canonical text the chunks' offsets index into."""
    return (
        chunks.group_by("doc_id", maintain_order=True)
        .agg(
            pl.col("doc_content_hash", "source_path", "title", "filetype", "access_scope", "ingested_at").first(),
            text=pl.col("text").str.join("\n\n"),
            n_chunks=pl.len(),
        )
        .with_columns(size_bytes=pl.col("text").str.len_bytes())
    )


def _commit(store: CorpusStore, name: str, parent: str | None, chunks: pl.DataFrame, replaced: list[str]) -> None:
    manifest = VersionManifest(
        name=name, parent=parent, created_at="", n_documents=0, n_chunks=0, n_errors=0, corpus_hash=f"bench-{name}"
    )
    with store.lock():
        store.commit_version(
            manifest,
            replaced_doc_ids=replaced,
            chunks=to_arrow(chunks, STORED_SCHEMAS["chunks"]),
            documents=to_arrow(_documents(chunks), STORED_SCHEMAS["documents"]),
            errors=INGEST_ERRORS.empty_table(),
        )


def generate(root: Path, n_chunks: int, changed: float) -> None:
    """Commit version `old`, then `new`, which edits, removes and adds chunks in 5% of the documents."""
    n_docs = n_chunks // CHUNKS_PER_DOC
    doc_index = np.repeat(np.arange(n_docs), CHUNKS_PER_DOC)
    ordinal = np.tile(np.arange(CHUNKS_PER_DOC), n_docs)
    store = CorpusStore(root)
    _commit(store, "old", None, _chunks(doc_index, ordinal, np.zeros(n_chunks, dtype=np.int64)), [])

    n_affected = int(n_chunks * changed) // CHANGES_PER_DOC
    affected = np.random.default_rng(1).choice(n_docs, size=n_affected, replace=False)
    hit = np.isin(doc_index, affected)
    variant = np.where(ordinal < 12, 1, 0)  # modified: same position, edited text
    keep = hit & ~((ordinal >= 12) & (ordinal < 16))  # removed
    added_docs = np.repeat(affected, 4)
    rewritten = _chunks(
        np.concatenate([doc_index[keep], added_docs]),
        np.concatenate([ordinal[keep], np.tile(np.arange(1000, 1004), n_affected)]),
        np.concatenate([variant[keep], np.full(len(added_docs), ADDED)]),
    )
    _commit(store, "new", "old", rewritten, [f"doc_{i}" for i in affected])
    export_into_store(store, "chunks", "old")  # the baseline scans both exports; a commit keeps only the latest's


def scan_ids(root: Path) -> int:
    """The baseline: read chunk_id and text_hash of both versions' Parquet exports."""
    store = CorpusStore(root)
    frames = [
        pl.scan_parquet(store.parquet_path("chunks", v)).select("chunk_id", "text_hash").collect()
        for v in ("old", "new")
    ]
    return sum(f.height for f in frames)


def run_diff(root: Path):
    """What `citekeeper diff old new` does, without the cached result of an earlier run."""
    shutil.rmtree(StoreLayout(root).diff_dir("old", "new"), ignore_errors=True)
    return diff_versions(CorpusStore(root), "old", "new")


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
        out = Path(tmp) / "store"
        started = time.perf_counter()
        child = multiprocessing.get_context("spawn").Process(target=generate, args=(out, args.chunks, args.changed))
        child.start()
        child.join()
        if child.exitcode:
            raise SystemExit(f"generating the versions failed (exit {child.exitcode})")
        elapsed = time.perf_counter() - started
        print(f"committed 2 versions of {args.chunks:,} chunks ({args.changed:.0%} changed) in {elapsed:.1f}s")
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
    print(
        f"peak RSS: {peak_mb:.0f} MB (before the runs: {rss_before:.0f} MB; target <= 2048 MB) -> "
        f"{'OK' if peak_mb <= 2048 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
