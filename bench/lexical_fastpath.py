"""What the lexical fast path decides on its own: shared by the WiCE and the Chinese precision benches."""

from __future__ import annotations

import polars as pl

from citekeeper.identity import text_hash
from tests.verify_helpers import verify


def lexically_supported(cases: pl.DataFrame, corpus: str) -> pl.Series:
    """claim_ids the engine, run without a model, calls `supported` at tier `lexical`.

    `cases`: one row per claim with `claim_id`, `claim` and `evidence`; each claim cites one chunk holding
    its evidence text.
    """
    claims = cases.select(
        pl.col("claim_id").alias("answer_id"),
        pl.lit(1, pl.Int32).alias("revision"),
        "claim_id",
        pl.lit(0, pl.Int32).alias("claim_index"),
        pl.col("claim").alias("text"),
        pl.col("claim").map_elements(text_hash, return_dtype=pl.String).alias("text_hash"),
        pl.lit(1, pl.Int32).alias("n_citations"),
    )
    citations = cases.select(
        pl.col("claim_id").alias("answer_id"),
        pl.lit(1, pl.Int32).alias("revision"),
        "claim_id",
        pl.format("{}-evidence", "claim_id").alias("citation_id"),
        pl.lit(0, pl.Int32).alias("citation_index"),
        pl.format("{}-chunk", "claim_id").alias("chunk_id"),
        pl.format("{}-chunk", "claim_id").alias("evidence_chunk_id"),
        pl.lit(corpus).alias("doc_id"),
        pl.col("evidence").alias("chunk_text"),
        pl.lit(0, pl.Int64).alias("chunk_start_char"),
    )
    result = verify(claims, citations, corpus, scorer=None)
    return result.claims.filter((pl.col("status") == "supported") & (pl.col("tier") == "lexical"))["claim_id"]
