"""Tier 1, anchoring: is a citation's quote verbatim in the text of the chunk it resolves to?

Exact search first (vectorised, polars); quotes it misses are retried after whitespace and Unicode
normalisation (NFKC, typographic quotes/dashes), with offsets mapped back to the original chunk text.
"""
from __future__ import annotations

import polars as pl

from citekeeper.text import normalize_with_offsets

# anchor values: how (or whether) the quote was found in the evidence chunk.
ANCHOR_EXACT = "exact"
ANCHOR_NORMALIZED = "normalized"
ANCHOR_NOT_FOUND = "quote_not_found"
ANCHOR_NO_QUOTE = "no_quote"  # the whole chunk is the evidence
ANCHOR_NO_CHUNK = "no_chunk"  # the citation resolves to no chunk of the target version


def locate_quote(haystack: str, quote: str) -> tuple[int, int, str] | None:
    """(start, end, anchor) of `quote` in `haystack`, exact first, then normalised; None when absent."""
    start = haystack.find(quote)
    if start >= 0:
        return start, start + len(quote), ANCHOR_EXACT
    norm_haystack, origin = normalize_with_offsets(haystack)
    norm_quote = normalize_with_offsets(quote)[0]
    if not norm_quote:
        return None
    norm_start = norm_haystack.find(norm_quote)
    if norm_start < 0:
        return None
    norm_end = norm_start + len(norm_quote) - 1
    return origin[norm_start], origin[norm_end] + 1, ANCHOR_NORMALIZED


def anchor_quotes(citations: pl.DataFrame) -> pl.DataFrame:
    """Add `anchor`, `quote_start` and `quote_end` (offsets into `chunk_text`) to each citation.

    Expects columns `quote` (null: whole chunk) and `chunk_text` (null: no chunk in the target version).
    """
    exact = citations.with_row_index("_anchor_row").with_columns(
        pl.col("chunk_text").str.find(pl.col("quote"), literal=True).cast(pl.Int64).alias("quote_start")
    ).with_columns(
        (pl.col("quote_start") + pl.col("quote").str.len_chars()).alias("quote_end"),
        pl.when(pl.col("chunk_text").is_null())
        .then(pl.lit(ANCHOR_NO_CHUNK))
        .when(pl.col("quote").is_null())
        .then(pl.lit(ANCHOR_NO_QUOTE))
        .when(pl.col("quote_start").is_not_null())
        .then(pl.lit(ANCHOR_EXACT))
        .otherwise(pl.lit(ANCHOR_NOT_FOUND))
        .alias("anchor"),
    )
    return _retry_normalized(exact).sort("_anchor_row").drop("_anchor_row")


def _retry_normalized(frame: pl.DataFrame) -> pl.DataFrame:
    """Normalised search for the (few) quotes exact search missed."""
    missed = frame.filter(pl.col("anchor") == ANCHOR_NOT_FOUND)
    if missed.is_empty():
        return frame
    found = [locate_quote(text, quote) for text, quote in missed.select("chunk_text", "quote").iter_rows()]
    retried = missed.with_columns(
        pl.Series("quote_start", [f[0] if f else None for f in found], dtype=pl.Int64),
        pl.Series("quote_end", [f[1] if f else None for f in found], dtype=pl.Int64),
        pl.Series("anchor", [f[2] if f else ANCHOR_NOT_FOUND for f in found], dtype=pl.String),
    )
    return pl.concat([frame.filter(pl.col("anchor") != ANCHOR_NOT_FOUND), retried])
