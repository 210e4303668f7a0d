"""Resolve each citation to the evidence it has in a target corpus version, through that version's citation
status when there is one (the rules: docs/verification.md, "Evidence")."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from changes.statuses import HOLDING
from citekeeper.answers.anchoring import DocumentTexts, anchor_answers
from citekeeper.answers.files import read_answer_records
from citekeeper.answers.records import answer_rows
from citekeeper.layout import StoreLayout
from citekeeper.schema import ANSWERS, CITATIONS, CLAIMS, SOURCE_ROW_FIELDS
from citekeeper.tables import from_rows

CITATION_KEY = ["answer_id", "revision", "claim_id", "citation_id"]


class AnswersFileError(ValueError):
    """An --answers file with lines that cannot be read; the message names each bad line."""


# The citation-status columns that say where a citation's evidence is (no texts: a million rows stay small).
STATUS_COLUMNS = [*CITATION_KEY, "status", "new_chunk_id", "new_start_char", "new_end_char"]
EVIDENCE_CHUNK_COLUMNS = ["chunk_id", "doc_id", "text", "start_char"]
# What verification reads of an evidence's document (the conflict ranking, the audience check, the reasons' names)
# and of the answer that cites it; the answer's scope labels and created_at are renamed apart from the document's.
EVIDENCE_DOCUMENT_COLUMNS = [
    "doc_id",
    *(f.name for f in SOURCE_ROW_FIELDS),
    "title",
    "source_path",
    "access_scope",
    "access_groups",
    "scope_labels",
]
ANSWER_SOURCE_COLUMNS = {
    "audience": "audience",
    "about_version": "about_version",
    "scope_labels": "answer_scope_labels",
    "created_at": "answer_created_at",
}


def read_citation_status(store_root: Path | str, target_version: str) -> pl.DataFrame | None:
    """The STATUS_COLUMNS of the stored citation status of `target_version`, or None when there is none."""
    path = StoreLayout(store_root).citation_status_file(target_version)
    return pl.read_parquet(path, columns=STATUS_COLUMNS) if path.exists() else None


def answers_from_file(path: Path | str, corpus) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(answers, claims, citations) of the answers in a JSONL/Parquet answers file, without registering them;
    citations by document are anchored into `corpus` (a CorpusStore) as registration anchors them, those it cannot
    anchor kept unanchored."""
    parsed, errors = read_answer_records(Path(path))
    if errors:
        raise AnswersFileError(f"{path}: " + "; ".join(str(e) for e in errors))
    parsed, _ = anchor_answers(parsed, DocumentTexts(corpus))  # what cannot be anchored is judged so, not refused
    registered_at = datetime.now(UTC)
    rows = [answer_rows(answer, 1, str(path), registered_at) for answer in parsed]
    return (
        from_rows([row for answer in rows for row in answer["answers"]], ANSWERS),
        from_rows([row for answer in rows for row in answer["claims"]], CLAIMS),
        from_rows([row for answer in rows for row in answer["citations"]], CITATIONS),
    )


def citation_evidence(
    citations: pl.DataFrame,
    citation_status: pl.DataFrame | None,
    read_chunks: Callable[[list[str]], pl.DataFrame],
    read_documents: Callable[[list[str]], pl.DataFrame] | None = None,
    answers: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Citations with the target-version chunk and stored span their evidence comes from, and what the conflict
    ranking and the audience check read: the evidence document's EVIDENCE_DOCUMENT_COLUMNS and the citing answer's
    ANSWER_SOURCE_COLUMNS (renamed), when `read_documents` and `answers` are given.

    read_chunks(chunk_ids) returns those chunks of the target version (EVIDENCE_CHUNK_COLUMNS), read_documents(doc_ids)
    those documents (EVIDENCE_DOCUMENT_COLUMNS): only what these citations resolve to is read.
    """
    if citation_status is None:
        resolved = citations.with_columns(
            pl.lit(None, pl.String).alias("citation_status"),
            pl.col("chunk_id").alias("evidence_chunk_id"),
            pl.lit(None, pl.Int64).alias("stored_start_char"),
            pl.lit(None, pl.Int64).alias("stored_end_char"),
        )
    else:
        resolved = _from_status(citations, citation_status)
    chunks = read_chunks(resolved["evidence_chunk_id"].drop_nulls().unique().to_list()).select(
        pl.col("chunk_id").alias("evidence_chunk_id"),
        "doc_id",
        pl.col("text").alias("chunk_text"),
        pl.col("start_char").alias("chunk_start_char"),
    )
    evidence = resolved.join(chunks, on="evidence_chunk_id", how="left")
    if read_documents is not None:
        documents = read_documents(evidence["doc_id"].drop_nulls().unique().to_list()).select(EVIDENCE_DOCUMENT_COLUMNS)
        evidence = evidence.join(documents, on="doc_id", how="left")
    if answers is not None:
        asked = answers.select("answer_id", "revision", *ANSWER_SOURCE_COLUMNS).rename(ANSWER_SOURCE_COLUMNS)
        evidence = evidence.join(asked, on=["answer_id", "revision"], how="left")
    return evidence


def _from_status(citations: pl.DataFrame, citation_status: pl.DataFrame) -> pl.DataFrame:
    status = citation_status.select(STATUS_COLUMNS).rename({"status": "citation_status"})
    successor = pl.col("citation_status").is_in(HOLDING)
    unjudged = pl.col("citation_status").is_null()  # registered after the status table was written
    return (
        citations.join(status, on=CITATION_KEY, how="left")
        .with_columns(
            pl.when(successor)
            .then(pl.coalesce("new_chunk_id", "chunk_id"))
            .when(unjudged)
            .then(pl.col("chunk_id"))
            .alias("evidence_chunk_id"),
            pl.when(successor).then(pl.col("new_start_char")).alias("stored_start_char"),
            pl.when(successor).then(pl.col("new_end_char")).alias("stored_end_char"),
        )
        .drop("new_chunk_id", "new_start_char", "new_end_char")
    )
