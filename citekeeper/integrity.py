"""Integrity checks of a committed version, shared by the Dagster asset checks and the tests: each returns the
offending rows (empty when sound)."""

from __future__ import annotations

import polars as pl

from citekeeper.identity import text_hash


def duplicate_chunk_ids(chunks: pl.DataFrame) -> pl.DataFrame:
    return chunks.group_by("chunk_id").len().filter(pl.col("len") > 1)


def mismatched_text_hashes(chunks: pl.DataFrame) -> pl.DataFrame:
    expected = pl.Series([text_hash(t) for t in chunks["text"]], dtype=pl.String)
    return chunks.select("chunk_id", "text_hash").filter(pl.col("text_hash") != expected)


def misplaced_offsets(chunks: pl.DataFrame, documents: pl.DataFrame) -> pl.DataFrame:
    """Chunks whose text is not documents.text[start_char:end_char] (or whose document is missing)."""
    joined = chunks.select("chunk_id", "doc_id", "start_char", "end_char", "text").join(
        documents.select("doc_id", pl.col("text").alias("doc_text")), on="doc_id", how="left"
    )
    located = pl.col("doc_text").str.slice(pl.col("start_char"), pl.col("end_char") - pl.col("start_char"))
    return joined.filter((located != pl.col("text")).fill_null(True)).select(
        "chunk_id", "doc_id", "start_char", "end_char"
    )
