"""Tier 1: each citation's evidence span (its quote anchored in the chunk), and each claim's sentences."""

from __future__ import annotations

import polars as pl
from polars.datatypes import DataTypeClass

from changes.statuses import HOLDING
from citekeeper.scope import outside_audience
from citekeeper.text import sentence_spans
from verifiers.anchoring import (
    ANCHOR_EXACT,
    ANCHOR_NO_QUOTE,
    ANCHOR_NORMALIZED,
    ANCHOR_NOT_FOUND,
    ANCHOR_OUT_OF_SCOPE,
    anchor_quotes,
)
from verifiers.claim_metrics import CLAIM_KEY

# The columns a resolved citation frame must have (changes.evidence builds it from the store).
CITATION_COLUMNS = [
    "answer_id",
    "revision",
    "claim_id",
    "citation_id",
    "citation_index",
    "chunk_id",
    "quote",
    "citation_status",
    "evidence_chunk_id",
    "doc_id",
    "chunk_text",
    "chunk_start_char",
    "stored_start_char",
    "stored_end_char",
]
_TIME = pl.Datetime("us", "UTC")
_LABELS = pl.List(pl.String)
# What the conflict ranking and the audience check read (verifiers.conflicts; null where unknown): the evidence
# document's source fields and names, the answer's audience, version, scope labels and time, when the citation
# retrieved its evidence.
SOURCE_COLUMNS: dict[str, pl.DataType | DataTypeClass] = {
    "source_type": pl.String,
    "source_url": pl.String,
    "published_at": _TIME,
    "updated_at": _TIME,
    "authority": pl.String,
    "source_version": pl.String,
    "title": pl.String,
    "source_path": pl.String,
    "access_scope": pl.String,
    "access_groups": _LABELS,
    "scope_labels": _LABELS,
    "audience": _LABELS,
    "about_version": pl.String,
    "answer_scope_labels": _LABELS,
    "answer_created_at": _TIME,
    "retrieved_at": _TIME,
}
_TYPES: dict[str, pl.DataType | DataTypeClass] = {
    "revision": pl.Int32,
    "citation_index": pl.Int32,
    "chunk_start_char": pl.Int64,
    "stored_start_char": pl.Int64,
    "stored_end_char": pl.Int64,
    **SOURCE_COLUMNS,
}


def with_citation_columns(citations: pl.DataFrame) -> pl.DataFrame:
    """`citations` with every CITATION_COLUMNS and SOURCE_COLUMNS column, absent optional ones as nulls."""
    columns = [*CITATION_COLUMNS, *SOURCE_COLUMNS]
    missing = [c for c in columns if c not in citations.columns]
    return citations.with_columns(pl.lit(None, _TYPES.get(c, pl.String)).alias(c) for c in missing).select(
        pl.col(c).cast(_TYPES.get(c, pl.String)) for c in columns
    )


def out_of_audience(citations: pl.DataFrame) -> pl.DataFrame:
    """Citations of a document outside the answer's audience (their status says so, or citekeeper.scope's
    test on the joined frame does) anchored `out_of_scope`: no evidence, not anchored, not locatable."""
    outside = (pl.col("citation_status") == "out_of_scope").fill_null(False) | outside_audience(
        "access_groups", "audience"
    )
    return citations.with_columns(
        pl.when(outside).then(pl.lit(ANCHOR_OUT_OF_SCOPE)).otherwise(pl.col("anchor")).alias("anchor"),
        *(pl.when(~outside).then(pl.col(c)).alias(c) for c in ("quote_start", "quote_end", "chunk_text")),
    )


def resolve_spans(citations: pl.DataFrame) -> pl.DataFrame:
    """Anchor each citation's quote and fix the evidence span it is judged on (offsets into the document).

    The span is the anchored quote; the whole chunk when there is no quote; the stored span (e.g. a
    successor span of a relocated or drifted citation) when the quote is not in the chunk; else no evidence.
    `locatable`: the stored offsets (or, without any, the anchored ones) reproduce the quote exactly.
    `anchored` / `locatable` are false for a citation whose status says it no longer holds, and for one whose
    document is outside the answer's audience (out_of_audience).
    """
    frame = out_of_audience(anchor_quotes(citations))
    chunk_len = pl.col("chunk_text").str.len_chars()
    stored_start = pl.col("stored_start_char") - pl.col("chunk_start_char")
    stored_end = pl.col("stored_end_char") - pl.col("chunk_start_char")
    stored_in_chunk = (stored_start >= 0) & (stored_end <= chunk_len) & (stored_start <= stored_end)
    anchored = pl.col("anchor").is_in([ANCHOR_EXACT, ANCHOR_NORMALIZED])
    span_start = (
        pl.when(anchored)
        .then(pl.col("quote_start"))
        .when(pl.col("anchor") == ANCHOR_NO_QUOTE)
        .then(0)
        .when((pl.col("anchor") == ANCHOR_NOT_FOUND) & stored_in_chunk)
        .then(stored_start)
    )
    span_end = (
        pl.when(anchored)
        .then(pl.col("quote_end"))
        .when(pl.col("anchor") == ANCHOR_NO_QUOTE)
        .then(chunk_len)
        .when((pl.col("anchor") == ANCHOR_NOT_FOUND) & stored_in_chunk)
        .then(stored_end)
    )
    no_quote = pl.col("anchor") == ANCHOR_NO_QUOTE
    exact = pl.col("anchor") == ANCHOR_EXACT
    frame = frame.with_columns(
        span_start.cast(pl.Int64).alias("_span_start"),
        span_end.cast(pl.Int64).alias("_span_end"),
        pl.when(no_quote)
        .then(0)
        .otherwise(pl.coalesce(stored_start, pl.when(exact).then(pl.col("quote_start"))))
        .cast(pl.Int64)
        .alias("_loc_start"),
        pl.when(no_quote)
        .then(chunk_len)
        .otherwise(pl.coalesce(stored_end, pl.when(exact).then(pl.col("quote_end"))))
        .cast(pl.Int64)
        .alias("_loc_end"),
    )
    # A stale / removed / invalid citation does not hold (nor has it evidence: changes.evidence).
    holding = (pl.col("citation_status").is_null() | pl.col("citation_status").is_in(HOLDING)) & (
        pl.col("anchor") != ANCHOR_OUT_OF_SCOPE
    )
    reproduced = pl.col("chunk_text").str.slice(pl.col("_loc_start"), pl.col("_loc_end") - pl.col("_loc_start"))
    evidence = pl.col("chunk_text").str.slice(pl.col("_span_start"), pl.col("_span_end") - pl.col("_span_start"))
    return frame.with_columns(
        # empty or blank evidence is no evidence: it must never support a claim
        pl.when(evidence.str.strip_chars().str.len_chars() > 0).then(evidence).alias("evidence_text"),
        (pl.col("chunk_start_char") + pl.col("_span_start")).alias("evidence_start_char"),
        (pl.col("chunk_start_char") + pl.col("_span_end")).alias("evidence_end_char"),
        (pl.col("anchor").is_in([ANCHOR_EXACT, ANCHOR_NORMALIZED, ANCHOR_NO_QUOTE]) & holding).alias("anchored"),
        (
            (pl.col("_loc_start") >= 0)
            & (pl.col("_loc_end") <= chunk_len)
            & (reproduced == pl.coalesce(pl.col("quote"), pl.col("chunk_text")))
            & holding
        )
        .fill_null(False)
        .alias("locatable"),
    ).drop("_span_start", "_span_end", "_loc_start", "_loc_end", "quote_start", "quote_end")


def claim_sentences(claims: pl.DataFrame) -> pl.DataFrame:
    """One row per claim sentence (a claim without sentence boundaries is one sentence)."""
    texts = claims["text"].to_list()
    spans = [sentence_spans(text) or [(0, len(text))] for text in texts]
    return (
        claims.select(CLAIM_KEY)
        .with_columns(
            pl.Series(
                "sentence", [[text[s:e] for s, e in sp] for text, sp in zip(texts, spans)], dtype=pl.List(pl.String)
            )
        )
        .explode("sentence")
        .with_columns(pl.int_range(pl.len()).over(CLAIM_KEY).cast(pl.Int32).alias("sentence_index"))
    )
