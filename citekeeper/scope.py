"""Access scopes (`user_visible`, `internal_only`), and the one place that withholds internal_only text from every
output meant to be shared (redact_status; which outputs: docs/ingest.md, "Access scope fails closed")."""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import polars as pl

from citekeeper.outputs import output_metadata
from citekeeper.schema import CITATION_STATUS
from citekeeper.tables import write_parquet

USER_VISIBLE = "user_visible"
INTERNAL = "internal_only"
ACCESS_SCOPES = (USER_VISIBLE, INTERNAL)  # from the most visible to the least
REDACTED = "[redacted: internal_only chunk; text withheld, locator kept]"
# The key an output's metadata (Parquet key-value, JSON field) carries when raw internal text was asked for.
RAW_TEXT_KEY = "citekeeper.internal_text"


def strictest(scopes: Iterable[str]) -> str:
    return max(scopes, key=ACCESS_SCOPES.index)


def visible_from(scope: str | None) -> tuple[str, ...]:
    """The scopes a citation of a document in `scope` may be re-anchored or repaired into (unknown: the public)."""
    return ACCESS_SCOPES if scope == INTERNAL else (USER_VISIBLE,)


def internal(*scope_columns: str) -> pl.Expr:
    """Rows where any of these scope columns is internal_only (a null scope is not)."""
    return pl.any_horizontal(pl.col(c) == INTERNAL for c in scope_columns).fill_null(False)


def crosses_into_internal(from_scope: str, to_scope: str) -> pl.Expr:
    """Rows whose `to_scope` column is internal_only while `from_scope` is not (fail closed: null is public)."""
    return internal(to_scope) & ~internal(from_scope)


def withheld(text: str, *scope_columns: str) -> pl.Expr:
    """Column `text`, REDACTED where any of the scope columns is internal_only."""
    return pl.when(internal(*scope_columns) & pl.col(text).is_not_null()).then(pl.lit(REDACTED)).otherwise(pl.col(text)).alias(text)


# CITATION_STATUS text columns -> the scope columns that withhold them. The quote and both chunk texts are
# withheld when the cited chunk is internal at either version: a document made internal since the cited version
# must not keep showing through its old text or the quote from it.
_STATUS_TEXT = {
    "quote": ("access_scope", "new_access_scope"),
    "old_text": ("access_scope", "new_access_scope"),
    "new_text": ("access_scope", "new_access_scope"),
    "suggested_text": ("suggested_access_scope",),
}


def redact_status(status: pl.DataFrame) -> pl.DataFrame:
    """CITATION_STATUS rows with the text of internal_only chunks replaced by REDACTED (locators kept)."""
    return status.with_columns(withheld(text, *scopes) for text, scopes in _STATUS_TEXT.items() if text in status.columns)


# CHUNKS and DOCUMENTS columns that hold a document's own words: its text, and its front matter (a description,
# an author, parameters), which is no locator.
_CORPUS_TEXT = ("text", "front_matter")


def redact_corpus(rows: pl.DataFrame) -> pl.DataFrame:
    """CHUNKS or DOCUMENTS rows with the text and front matter of internal_only ones replaced by REDACTED (other
    tables as given)."""
    if "access_scope" not in rows.columns:
        return rows
    return rows.with_columns(withheld(column, "access_scope") for column in _CORPUS_TEXT if column in rows.columns)


def write_shared_status(status: pl.DataFrame, path: Path, include_internal_text: bool = False) -> Path:
    """A shareable copy of CITATION_STATUS rows: internal_only text withheld unless asked for, which the file's
    metadata records."""
    rows = status if include_internal_text else redact_status(status)
    metadata = raw_text_metadata(include_internal_text) | output_metadata("citation_status")
    return write_parquet(rows, CITATION_STATUS.with_metadata(metadata), path)


def raw_text_metadata(include_internal_text: bool) -> dict[str, str]:
    """What a shared output's metadata says of internal_only text: RAW_TEXT_KEY -> included | withheld."""
    return {RAW_TEXT_KEY: "included" if include_internal_text else "withheld"}


def outside_audience(groups: str = "access_groups", audience: str = "audience") -> pl.Expr:
    """Rows whose document is closed to the answer's audience (status out_of_scope): the answer names an audience
    (a list of groups; null: none given, nothing checked), the document names access_groups (null or empty: open
    to every audience), and the two share no group. An empty audience is nobody's: every closed document is
    outside it."""
    closed = pl.col(groups).list.len().fill_null(0) > 0
    shared = pl.col(groups).list.set_intersection(pl.col(audience)).list.len().fill_null(0)
    return (pl.col(audience).is_not_null() & closed & (shared == 0)).fill_null(False)
