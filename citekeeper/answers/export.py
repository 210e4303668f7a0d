"""Registered answers read back: one row per citation, located in the corpus version each cites (`citekeeper
answers export`), a listing of the current answers, and one answer as a person reads it (`answers show`)."""

from __future__ import annotations

import polars as pl

from citekeeper.answers.anchoring import REVIEW_METHODS
from citekeeper.answers.store import AnswerSnapshot, AnswerStore, UnknownAnswer
from citekeeper.locate import locate_quotes
from citekeeper.native_locator import LOCATOR_COLUMNS, native_locator
from citekeeper.schema import ANSWER_EXPORT, SOURCE_ROW_FIELDS
from citekeeper.scope import redact_rows
from citekeeper.store import READ_SCHEMAS
from citekeeper.tables import conform, empty

# What a citation row shows of its chunk's document: where it is, its level, and its source fields.
SOURCE_COLUMNS = ["title", "summary", *(f.name for f in SOURCE_ROW_FIELDS)]
CHUNK_COLUMNS = [
    "chunk_id",
    "doc_id",
    "source_path",
    "text",
    "start_char",
    "access_scope",
    *LOCATOR_COLUMNS,
    *SOURCE_COLUMNS,
]


def answer_list(store) -> pl.DataFrame:
    """answer_id, revision, n_claims, n_citations of every current answer, by answer_id."""
    answers = AnswerStore(store.root).snapshot()
    claims = answers.claims().group_by("answer_id").agg(n_claims=pl.len(), n_citations=pl.col("n_citations").sum())
    listed = answers.answers().select("answer_id", "revision", "question").join(claims, on="answer_id", how="left")
    return listed.with_columns(pl.col("n_claims", "n_citations").fill_null(0)).sort(
        "answer_id"
    )  # no claims: 0, not null


def citation_rows(store, answer_id: str | None = None, include_internal_text: bool = False) -> pl.DataFrame:
    """ANSWER_EXPORT rows of the current answers (or of one): each citation with its document, locator and the
    span of its quote in the version it cites, and the document's source fields; what each row's visibility level
    withholds (citekeeper.scope.redact_rows) withheld unless `include_internal_text`."""
    return _citation_rows(store, AnswerStore(store.root).snapshot(), answer_id, include_internal_text)


def shown_answer(store, answer_id: str, include_internal_text: bool = False) -> tuple[int, pl.DataFrame]:
    """The current revision of `answer_id` and its citation_rows (none when it has no claims), of one snapshot."""
    answers = AnswerStore(store.root).snapshot()
    rows = _citation_rows(store, answers, answer_id, include_internal_text)
    return answers.answers().filter(pl.col("answer_id") == answer_id)["revision"].item(), rows


def _citation_rows(store, answers: AnswerSnapshot, answer_id: str | None, include_internal_text: bool) -> pl.DataFrame:
    claims, citations = answers.claims(), answers.citations()
    if answer_id is not None:
        if answers.answers().filter(pl.col("answer_id") == answer_id).is_empty():  # an answer may have no claims
            raise UnknownAnswer(f"no registered answer {answer_id!r}")
        claims, citations = (frame.filter(pl.col("answer_id") == answer_id) for frame in (claims, citations))
    located = (
        pl.concat(
            [
                _located(store, version, group)
                for (version,), group in citations.partition_by("corpus_version", as_dict=True).items()
            ],
            how="diagonal_relaxed",
        )
        if citations.height
        else empty(ANSWER_EXPORT).drop("claim_index", "claim_text", "claim_status")
    )
    rows = claims.select(
        "answer_id",
        "revision",
        "claim_id",
        "claim_index",
        pl.col("text").alias("claim_text"),
        pl.col("status").alias("claim_status"),
    ).join(located, on=["answer_id", "revision", "claim_id"], how="left")
    if not include_internal_text:
        rows = redact_rows(rows, "access_scope")
    return conform(rows, ANSWER_EXPORT).sort("answer_id", "claim_index", "citation_index", nulls_last=True)


def _located(store, version: str, citations: pl.DataFrame) -> pl.DataFrame:
    """Citations of one cited version with their chunk's document, locator and the quote's span."""
    chunks = (
        store.read_chunks(
            version, columns=CHUNK_COLUMNS, chunk_ids=citations["chunk_id"].drop_nulls().unique().to_list()
        )
        if store.has_version(version)
        else empty(READ_SCHEMAS["chunks"]).select(CHUNK_COLUMNS)  # an unknown version locates nothing
    )
    frame = citations.join(
        chunks.rename({"text": "_chunk_text", "start_char": "_chunk_start"}), on="chunk_id", how="left"
    )
    frame = locate_quotes(frame, "_chunk_text", "quote", prefix="_quote")
    found = pl.col("_quote_start").is_not_null()
    return frame.with_columns(
        access_scope=pl.coalesce("access_scope", "quote_access_scope"),  # an unanchored quote of internal text
        cited_version=pl.col("corpus_version"),
        locator=native_locator(),
        start_char=pl.when(found).then(pl.col("_chunk_start") + pl.col("_quote_start")).otherwise("_chunk_start"),
        end_char=pl.when(found)
        .then(pl.col("_chunk_start") + pl.col("_quote_end"))
        .otherwise(pl.col("_chunk_start") + pl.col("_chunk_text").str.len_chars()),
        needs_review=pl.col("anchored_by").is_in(REVIEW_METHODS),
        quote_match=pl.col("_quote_match"),
    )
