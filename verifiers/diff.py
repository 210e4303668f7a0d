"""Diff two corpus versions at document and chunk level, in polars.

Documents are compared first by content hash; only chunks of documents that changed are read and
compared, so the cost follows the size of the change, not of the corpus. Within those documents,
chunks are matched by hash joins (same chunk_id, then same text in the same document, then same text
anywhere); text similarity (rapidfuzz) is computed only for chunks still unmatched within one
document.

Chunk changes: unchanged (same id, hash and locator), moved (same text, new offsets or section in its
document), relocated (same text, another document), modified (best successor by similarity above a
threshold, with its score), removed, added.
Document changes: unchanged, added, removed, renamed (same content, new path), modified.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from rapidfuzz import fuzz, process

from citekeeper.schema import CHUNK_DIFF, DOC_DIFF
from citekeeper.tables import conform, read_parquet, write_parquet

CHUNK_COLUMNS = ["chunk_id", "doc_id", "text_hash", "start_char", "end_char", "section_path", "text"]
DOC_COLUMNS = ["doc_id", "doc_content_hash", "source_path"]
DEFAULT_THRESHOLD = 0.5  # minimum text similarity (0..1) for a chunk to count as a modified successor

Frame = pl.DataFrame | pl.LazyFrame


@dataclass(frozen=True)
class VersionDiff:
    old_version: str
    new_version: str
    chunks: pl.DataFrame  # schema CHUNK_DIFF
    docs: pl.DataFrame  # schema DOC_DIFF

    def chunk_counts(self) -> dict[str, int]:
        return _counts(self.chunks)

    def doc_counts(self) -> dict[str, int]:
        return _counts(self.docs)

    def changed_docs(self) -> pl.DataFrame:
        return self.docs.filter(pl.col("change") != "unchanged")


def _counts(frame: pl.DataFrame) -> dict[str, int]:
    return dict(frame.group_by("change").len().sort("change").iter_rows())


# ---------------------------------------------------------------- documents


def _with_occurrence(frame: pl.DataFrame, key: str | list[str], order: str) -> pl.DataFrame:
    """Number equal keys 0, 1, 2... so duplicates pair up one to one in a join."""
    return frame.sort(order).with_columns(pl.int_range(pl.len()).over(key).alias("_occ"))


def _doc_rows(paired: pl.DataFrame, change: pl.Expr) -> pl.DataFrame:
    """DOC_DIFF columns from an old/new join whose new-side columns carry the suffix `_new`."""
    return paired.select(
        change.alias("change"),
        pl.col("doc_id").alias("old_doc_id"),
        pl.col("doc_id_new").alias("new_doc_id"),
        pl.col("source_path").alias("old_source_path"),
        pl.col("source_path_new").alias("new_source_path"),
        pl.col("doc_content_hash").alias("old_content_hash"),
        pl.col("doc_content_hash_new").alias("new_content_hash"),
    )


def diff_documents(old_docs: Frame, new_docs: Frame) -> pl.DataFrame:
    """Document-level changes; columns of DOC_DIFF without the version columns."""
    old = old_docs.lazy().select(DOC_COLUMNS).collect()
    new = new_docs.lazy().select(DOC_COLUMNS).collect()
    same_id = old.join(new, on="doc_id", how="inner", suffix="_new", coalesce=False)
    both = _doc_rows(
        same_id,
        pl.when(pl.col("doc_content_hash") == pl.col("doc_content_hash_new")).then(pl.lit("unchanged")).otherwise(pl.lit("modified")),
    )
    # Documents on one side only: equal content under another doc_id is a rename.
    gone = _with_occurrence(old.join(new, on="doc_id", how="anti"), "doc_content_hash", "doc_id")
    came = _with_occurrence(new.join(old, on="doc_id", how="anti"), "doc_content_hash", "doc_id")
    paired = gone.join(came, on=["doc_content_hash", "_occ"], how="full", suffix="_new", coalesce=False)
    unpaired = _doc_rows(
        paired,
        pl.when(pl.col("doc_id").is_null())
        .then(pl.lit("added"))
        .when(pl.col("doc_id_new").is_null())
        .then(pl.lit("removed"))
        .otherwise(pl.lit("renamed")),
    )
    return pl.concat([both, unpaired]).sort("change", "old_doc_id", "new_doc_id", nulls_last=True)


# ---------------------------------------------------------------- chunks


def _side(frame: pl.DataFrame, prefix: str) -> pl.DataFrame:
    return frame.rename({c: f"{prefix}_{c}" for c in frame.columns if c in CHUNK_COLUMNS})


def _link(old: pl.DataFrame, new: pl.DataFrame, links: pl.DataFrame) -> pl.DataFrame:
    """Old and new chunk rows side by side for each (old_chunk_id, new_chunk_id) link."""
    return links.join(_side(old, "old"), on="old_chunk_id").join(_side(new, "new"), on="new_chunk_id")


def _same_text_links(old: pl.DataFrame, new: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Pair chunks with equal `by` keys; the k-th occurrence on one side pairs with the k-th on the other."""
    keys = [*by, "_occ"]
    columns = list(dict.fromkeys([*by, "chunk_id", "start_char"]))
    o = _with_occurrence(old.select(columns), by, "start_char").select(*keys, pl.col("chunk_id").alias("old_chunk_id"))
    n = _with_occurrence(new.select(columns), by, "start_char").select(*keys, pl.col("chunk_id").alias("new_chunk_id"))
    return o.join(n, on=keys).select("old_chunk_id", "new_chunk_id")


def _by_doc(frame: pl.DataFrame) -> dict[str, tuple[list[str], list[str]]]:
    """doc_id -> (chunk_ids, texts), in one group_by instead of a frame per document."""
    grouped = frame.group_by("doc_id", maintain_order=True).agg("chunk_id", "text")
    return {doc_id: (ids, texts) for doc_id, ids, texts in grouped.iter_rows()}


def _similar_links(old: pl.DataFrame, new: pl.DataFrame, threshold: float) -> pl.DataFrame:
    """Greedy best-first pairing by text similarity, only within each document present on both sides."""
    pairs: list[tuple[str, str, float]] = []
    new_by_doc = _by_doc(new)
    for doc_id, (old_ids, old_texts) in _by_doc(old).items():
        if doc_id not in new_by_doc:
            continue
        new_ids, new_texts = new_by_doc[doc_id]
        scores = process.cdist(old_texts, new_texts, scorer=fuzz.ratio, workers=1, dtype=np.float64) / 100.0
        pairs.extend(_greedy(scores, old_ids, new_ids, threshold))
    schema = {"old_chunk_id": pl.String, "new_chunk_id": pl.String, "similarity": pl.Float64}
    return pl.DataFrame(pairs, schema=schema, orient="row")


def _greedy(scores: np.ndarray, old_ids: list[str], new_ids: list[str], threshold: float) -> list[tuple[str, str, float]]:
    """Greedy best-first pairing. A pair that is the best of both its row and its column is one greedy
    would take, so each round takes all such mutual-best pairs at once (usually one or two rounds)."""
    scores = np.where(scores >= threshold, scores, -1.0)
    pairs = []
    while scores.size and scores.max() >= 0:
        rows = np.arange(scores.shape[0])
        best_col = scores.argmax(axis=1)
        mutual = (scores.argmax(axis=0)[best_col] == rows) & (scores[rows, best_col] >= 0)
        for i, j in zip(rows[mutual], best_col[mutual]):
            pairs.append((old_ids[i], new_ids[j], float(scores[i, j])))
        scores[rows[mutual], :] = -1.0
        scores[:, best_col[mutual]] = -1.0
    return pairs


def _ratio(old_text: pl.Expr, new_text: pl.Expr) -> pl.Expr:
    return pl.struct(old_text.alias("a"), new_text.alias("b")).map_batches(
        lambda s: pl.Series(
            [1.0 if a == b else fuzz.ratio(a, b) / 100.0 for a, b in zip(s.struct.field("a"), s.struct.field("b"))],
            dtype=pl.Float64,
        ),
        return_dtype=pl.Float64,
    )


def _unmatched(old: pl.DataFrame, new: pl.DataFrame, matched: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    return (
        old.join(matched.select(chunk_id="old_chunk_id"), on="chunk_id", how="anti"),
        new.join(matched.select(chunk_id="new_chunk_id"), on="chunk_id", how="anti"),
    )


def diff_chunks(old: pl.DataFrame, new: pl.DataFrame, threshold: float = DEFAULT_THRESHOLD) -> pl.DataFrame:
    """Chunk-level changes between two sets of chunks (those of the changed documents)."""
    same_id = old.select(pl.col("chunk_id").alias("old_chunk_id")).join(
        new.select(pl.col("chunk_id").alias("new_chunk_id")), left_on="old_chunk_id", right_on="new_chunk_id", coalesce=False
    )
    stages = [
        _link(old, new, same_id).with_columns(
            pl.when(pl.col("old_text_hash") != pl.col("new_text_hash"))
            .then(pl.lit("modified"))
            .when(
                (pl.col("old_start_char") == pl.col("new_start_char"))
                & (pl.col("old_end_char") == pl.col("new_end_char"))
                & (pl.col("old_section_path") == pl.col("new_section_path"))
            )
            .then(pl.lit("unchanged"))
            .otherwise(pl.lit("moved"))
            .alias("change"),
            _ratio(pl.col("old_text"), pl.col("new_text")).alias("similarity"),
        )
    ]
    # Each later stage sees only what the earlier ones left unmatched.
    matchers = [
        (lambda o, n: _same_text_links(o, n, ["doc_id", "text_hash"]), "moved"),
        (lambda o, n: _same_text_links(o, n, ["text_hash"]), "relocated"),
        (lambda o, n: _similar_links(o, n, threshold), "modified"),
    ]
    for matcher, change in matchers:
        old, new = _unmatched(old, new, stages[-1])
        links = matcher(old, new)
        if "similarity" not in links.columns:
            links = links.with_columns(similarity=pl.lit(1.0))
        stages.append(_link(old, new, links).with_columns(change=pl.lit(change)))
    old, new = _unmatched(old, new, stages[-1])
    stages.append(_side(old, "old").with_columns(change=pl.lit("removed")))
    stages.append(_side(new, "new").with_columns(change=pl.lit("added")))
    return pl.concat(stages, how="diagonal_relaxed")


# ---------------------------------------------------------------- versions


def diff_frames(
    old_version: str,
    new_version: str,
    old_docs: Frame,
    new_docs: Frame,
    old_chunks: Frame,
    new_chunks: Frame,
    threshold: float = DEFAULT_THRESHOLD,
) -> VersionDiff:
    """Diff two versions given their document and chunk frames (DataFrames or LazyFrames)."""
    docs = diff_documents(old_docs, new_docs)
    changed = docs.filter(pl.col("change") != "unchanged")
    old_ids = changed["old_doc_id"].drop_nulls()
    new_ids = changed["new_doc_id"].drop_nulls()
    old = old_chunks.lazy().select(CHUNK_COLUMNS).filter(pl.col("doc_id").is_in(old_ids.implode())).collect()
    new = new_chunks.lazy().select(CHUNK_COLUMNS).filter(pl.col("doc_id").is_in(new_ids.implode())).collect()
    versions = [pl.lit(old_version).alias("old_version"), pl.lit(new_version).alias("new_version")]
    return VersionDiff(
        old_version,
        new_version,
        chunks=conform(diff_chunks(old, new, threshold).with_columns(versions), CHUNK_DIFF),
        docs=conform(docs.with_columns(versions), DOC_DIFF),
    )


def diff_dir(store_root: Path, old_version: str, new_version: str) -> Path:
    return Path(store_root) / "diffs" / f"{old_version}__{new_version}"


def diff_versions(store, old_version: str, new_version: str, threshold: float = DEFAULT_THRESHOLD) -> VersionDiff:
    """Diff two versions of a CorpusStore, cached under <store.root>/diffs/<old>__<new>/ (versions are immutable)."""
    out = diff_dir(store.root, old_version, new_version)
    chunk_path, doc_path = out / "chunk_diff.parquet", out / "doc_diff.parquet"
    if chunk_path.exists() and doc_path.exists():
        return VersionDiff(old_version, new_version, read_parquet(chunk_path, CHUNK_DIFF), read_parquet(doc_path, DOC_DIFF))
    for version in (old_version, new_version):
        store.manifest(version)  # raises UnknownVersion naming the known versions
    result = diff_frames(
        old_version,
        new_version,
        store.read_documents(old_version, columns=DOC_COLUMNS),
        store.read_documents(new_version, columns=DOC_COLUMNS),
        store.read_chunks(old_version, columns=CHUNK_COLUMNS),
        store.read_chunks(new_version, columns=CHUNK_COLUMNS),
        threshold,
    )
    write_parquet(result.chunks, CHUNK_DIFF, chunk_path)
    write_parquet(result.docs, DOC_DIFF, doc_path)
    return result
