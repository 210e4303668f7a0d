"""Tier 1, anchoring: is a citation's quote verbatim in the text of the chunk it resolves to?

Quotes are located by citekeeper.locate (exact, then normalised, offsets in code points of the chunk text).
"""

from __future__ import annotations

import polars as pl

from citekeeper.locate import MATCH_EXACT, MATCH_NORMALIZED, locate_quotes

# anchor values: how (or whether) the quote was found in the evidence chunk.
ANCHOR_EXACT = MATCH_EXACT
ANCHOR_NORMALIZED = MATCH_NORMALIZED
ANCHOR_NOT_FOUND = "quote_not_found"
ANCHOR_NO_QUOTE = "no_quote"  # the whole chunk is the evidence
ANCHOR_NO_CHUNK = "no_chunk"  # the citation resolves to no chunk of the target version
ANCHOR_OUT_OF_SCOPE = "out_of_scope"  # its document is outside the answer's audience: never evidence


def anchor_quotes(citations: pl.DataFrame) -> pl.DataFrame:
    """Add `anchor`, `quote_start` and `quote_end` (code-point offsets into `chunk_text`) to each citation.

    Expects columns `quote` (null: whole chunk) and `chunk_text` (null: no chunk in the target version).
    """
    located = locate_quotes(citations, "chunk_text", "quote", prefix="quote")
    return located.with_columns(
        pl.when(pl.col("chunk_text").is_null())
        .then(pl.lit(ANCHOR_NO_CHUNK))
        .when(pl.col("quote").is_null())
        .then(pl.lit(ANCHOR_NO_QUOTE))
        .otherwise(pl.coalesce("quote_match", pl.lit(ANCHOR_NOT_FOUND)))
        .alias("anchor")
    ).drop("quote_match")
