"""Visibility levels (access scopes), and the one place that withholds what a level hides from every output meant
to be shared (which outputs and what each level shows: docs/answers.md, "Visibility levels").

From the most visible to the least: `user_visible` (everything shown), `redacted` (text withheld; its title,
source_url and summary shown), `internal_only` (text withheld, locators kept), `aggregate_only` (counted, never
quoted: no text, no title, no path, doc_id, locator, section, URL, summary, front matter or e-mail header). A value
that is not one of them is taken as the strictest (fail closed); a null scope (a row with no document) as public.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import polars as pl

from citekeeper.outputs import output_metadata
from citekeeper.schema import CITATION_STATUS
from citekeeper.tables import write_parquet

USER_VISIBLE = "user_visible"
REDACTED_SCOPE = "redacted"
INTERNAL = "internal_only"
AGGREGATE_ONLY = "aggregate_only"
ACCESS_SCOPES = (USER_VISIBLE, REDACTED_SCOPE, INTERNAL, AGGREGATE_ONLY)  # from the most visible to the least
_RANK = {scope: rank for rank, scope in enumerate(ACCESS_SCOPES)}
_STRICTEST = len(ACCESS_SCOPES) - 1

# What stands in for withheld text, per level (the strictest level of a row's scope columns decides).
WITHHELD_TEXT = {
    REDACTED_SCOPE: "[redacted: text withheld; the source's title, link and summary are shown]",
    INTERNAL: "[redacted: internal_only chunk; text withheld, locator kept]",
    AGGREGATE_ONLY: "[redacted: aggregate_only source; counted, never quoted]",
}
REDACTED = WITHHELD_TEXT[INTERNAL]
# What stands in for an aggregate_only document's name (path, doc_id, title, locator) and for a line that may name it.
AGGREGATE_MARK = "[aggregate_only source]"
AGGREGATE_REASON = "an aggregate_only source: counted, never quoted"
WITHHELD_MARKS = frozenset([*WITHHELD_TEXT.values(), AGGREGATE_MARK, AGGREGATE_REASON])
# The key an output's metadata (Parquet key-value, JSON field) carries when raw withheld text was asked for.
RAW_TEXT_KEY = "citekeeper.internal_text"

# Columns of the shared tables by what they show of a document, by name (with or without a side's prefix).
# Text: its own words, withheld at every level but user_visible. Summary: shown at user_visible and redacted only.
# Identity: what names or locates it, withheld at aggregate_only. Described: free text (a reason) that may name it,
# replaced whole at aggregate_only.
TEXT_COLUMNS = frozenset(
    ["text", "front_matter", "quote", "old_text", "new_text", "suggested_text", "old_quote", "new_quote"]
)
SUMMARY_COLUMNS = frozenset(["summary"])
_IDENTITY = (
    "doc_id",
    "source_path",
    "title",
    "source_url",
    "section_path",
    "locator",
    "page_start",
    "page_end",
    "slide_number",
    "sheet_name",
    "row_start",
    "row_end",
    "email_part",
    "email_subject",
    "email_from",
    "email_date",
)
SIDES = ("", "old_", "new_", "suggested_", "cited_", "target_", "repair_")
IDENTITY_COLUMNS = frozenset(f"{side}{name}" for side in SIDES for name in _IDENTITY)
DESCRIBED_COLUMNS = frozenset(["reason", "anchor_note", "repair_reason"])


def strictest(scopes: Iterable[str]) -> str:
    """The strictest of `scopes`; user_visible when there are none (a row with no document is public)."""
    return max(scopes, key=lambda scope: _RANK.get(scope, _STRICTEST), default=USER_VISIBLE)


def is_withheld(value: object) -> bool:
    """Whether a shown value is what citekeeper.scope put in place of something withheld."""
    return value in WITHHELD_MARKS


def is_aggregate(scope: str | None) -> bool:
    """Whether a document at `scope` is counted only (aggregate_only, or a value that is no level; null: public)."""
    return scope is not None and _RANK.get(scope, _STRICTEST) >= _RANK[AGGREGATE_ONLY]


def shows_text(scope: str | None) -> bool:
    """Whether a document at `scope` may be quoted in a shared output (user_visible, or no scope)."""
    return scope is None or scope == USER_VISIBLE


def visible_from(scope: str | None) -> tuple[str, ...]:
    """The levels a citation of a document at `scope` may be re-anchored or repaired into: those no stricter than
    it (unknown or null: the public's)."""
    return ACCESS_SCOPES[: _RANK[scope] + 1] if scope in _RANK else (USER_VISIBLE,)


def level(*scope_columns: str) -> pl.Expr:
    """The rank in ACCESS_SCOPES of the strictest of these scope columns (null: 0; a value not a level: strictest)."""
    ranks = [
        pl.when(pl.col(c).is_null())
        .then(0)
        .otherwise(pl.col(c).replace_strict(_RANK, default=_STRICTEST, return_dtype=pl.Int8))
        for c in scope_columns
    ]
    return pl.max_horizontal(ranks).cast(pl.Int8)


def internal(*scope_columns: str) -> pl.Expr:
    """Rows where any of these scope columns withholds text: every level but user_visible (a null scope does not)."""
    return level(*scope_columns) > 0


def aggregate(*scope_columns: str) -> pl.Expr:
    """Rows where any of these scope columns is aggregate_only (or not a level at all)."""
    return level(*scope_columns) >= _RANK[AGGREGATE_ONLY]


def crosses_into_internal(from_scope: str, to_scope: str) -> pl.Expr:
    """Rows whose `to_scope` column is stricter than `from_scope` (fail closed: a null `from_scope` is public; a
    null `to_scope`, no target, crosses nothing)."""
    return (pl.col(to_scope).is_not_null() & (level(to_scope) > level(from_scope))).fill_null(False)


def withheld(text: str, *scope_columns: str) -> pl.Expr:
    """Column `text`, replaced by its level's WITHHELD_TEXT where any of the scope columns withholds text."""
    note = level(*scope_columns).replace_strict(
        {_RANK[s]: n for s, n in WITHHELD_TEXT.items()}, default=None, return_dtype=pl.String
    )
    return pl.when(internal(*scope_columns) & pl.col(text).is_not_null()).then(note).otherwise(pl.col(text)).alias(text)


def _hidden(column: str, dtype: pl.DataType, hide: pl.Expr, replacement: pl.Expr) -> pl.Expr:
    """Column `column` with `replacement` where `hide` holds (and the value is not null already)."""
    return (
        pl.when(hide & pl.col(column).is_not_null())
        .then(replacement)
        .otherwise(pl.col(column))
        .cast(dtype)
        .alias(column)
    )


def _identity_mark(dtype: pl.DataType) -> pl.Expr:
    return pl.lit(AGGREGATE_MARK) if dtype == pl.String else pl.lit(None, dtype)


def redact_rows(
    frame: pl.DataFrame, *scope_columns: str, rules: Mapping[str, tuple[str, ...]] | None = None
) -> pl.DataFrame:
    """`frame` as a shared output shows it: each column that shows a document (TEXT_, SUMMARY_, IDENTITY_ and
    DESCRIBED_COLUMNS) withheld as the strictest of its scope columns requires. Every such column of `frame` is
    governed by `scope_columns`, unless `rules` (column -> its scope columns) names its own. Columns that show no
    document (counts, chunk ids, hashes, statuses, dates) are kept."""
    rules = dict(rules or {})
    exprs = []
    for column, dtype in frame.schema.items():
        scopes = [c for c in rules.get(column, scope_columns) if c in frame.columns]
        if not scopes:
            continue
        if column in TEXT_COLUMNS:
            exprs.append(withheld(column, *scopes))
        elif column in SUMMARY_COLUMNS:
            exprs.append(_hidden(column, dtype, level(*scopes) >= _RANK[INTERNAL], pl.lit(None, dtype)))
        elif column in IDENTITY_COLUMNS:
            exprs.append(_hidden(column, dtype, aggregate(*scopes), _identity_mark(dtype)))
        elif column in DESCRIBED_COLUMNS:
            exprs.append(_hidden(column, dtype, aggregate(*scopes), pl.lit(AGGREGATE_REASON)))
    return frame.with_columns(exprs) if exprs else frame


# CITATION_STATUS columns -> the scope columns that withhold them. The quote and both chunk texts are withheld when
# the cited chunk is withheld at either version: a document made stricter since the cited version must not keep
# showing through its old text or the quote from it. A reason may name any of the three places.
_STATUS_RULES = {
    **dict.fromkeys(
        ["quote", "old_text", "new_text", "title", "summary", "source_url"], ("access_scope", "new_access_scope")
    ),
    **dict.fromkeys(["doc_id", "source_path", "old_locator"], ("access_scope",)),
    **dict.fromkeys(["new_doc_id", "new_source_path", "new_locator"], ("new_access_scope",)),
    **dict.fromkeys(["suggested_text", "suggested_source_path"], ("suggested_access_scope",)),
    # a report card's repair (changes.repair.card_repairs): where it re-points, and why
    **dict.fromkeys(
        ["reason", "repair_reason", "repair_locator"], ("access_scope", "new_access_scope", "suggested_access_scope")
    ),
}
OUT_OF_SCOPE_TEXT = "[redacted: outside the answer's audience]"


def redact_status(status: pl.DataFrame) -> pl.DataFrame:
    """CITATION_STATUS rows as shared: what each row's levels withhold (locators kept but for aggregate_only), and
    the texts of out_of_scope citations (a document outside the answer's audience)."""
    rows = redact_rows(status, rules=_STATUS_RULES)
    if "status" not in rows.columns:
        return rows
    outside = pl.col("status") == "out_of_scope"
    texts = [c for c in rows.columns if c in TEXT_COLUMNS]
    return rows.with_columns(_hidden(c, rows.schema[c], outside, pl.lit(OUT_OF_SCOPE_TEXT)) for c in texts)


def redact_corpus(rows: pl.DataFrame) -> pl.DataFrame:
    """CHUNKS or DOCUMENTS rows as shared: text and front matter withheld at every level but user_visible, the
    summary beyond redacted, and at aggregate_only all that names or locates the document (other tables as given)."""
    return redact_rows(rows, "access_scope") if "access_scope" in rows.columns else rows


# ---------------------------------------------------------------- frames that name documents but carry no scope


def aggregate_documents(store, versions: Iterable[str] | None = None) -> pl.DataFrame:
    """doc_id and source_path of every document that is aggregate_only in any of `versions` (default: every
    version of the store): what withhold_documents withholds wherever it appears."""
    names = (
        [m.name for m in store.versions()]
        if versions is None
        else [v for v in dict.fromkeys(versions) if store.has_version(v)]
    )
    frames = [store.read_documents(name, columns=["doc_id", "source_path", "access_scope"]) for name in names]
    found = (
        pl.concat(frames)
        if frames
        else pl.DataFrame(schema={"doc_id": pl.String, "source_path": pl.String, "access_scope": pl.String})
    )
    return found.filter(aggregate("access_scope")).select("doc_id", "source_path").unique()


def withhold_documents(
    frame: pl.DataFrame, documents: pl.DataFrame, names: Mapping[str, str] | None = None
) -> pl.DataFrame:
    """`frame` with every mention of `documents` (aggregate_documents) withheld: on each side (SIDES) whose doc_id
    or source_path is one of theirs, that side's identity columns; on such a row, its described columns and text.
    `names` maps a column of another name onto the one it is (e.g. {"doc_old_path": "old_source_path"})."""
    if documents.is_empty():
        return frame
    names = dict(names or {})
    ids, paths = documents["doc_id"].implode(), documents["source_path"].implode()

    def mentions(column: str) -> pl.Expr | None:
        kind = names.get(column, column)
        if kind.endswith("doc_id"):
            return pl.col(column).is_in(ids)
        if kind.endswith("source_path"):
            return pl.col(column).is_in(paths)
        return None

    hit = {c: m.fill_null(False) for c in frame.columns if (m := mentions(c)) is not None}
    if not hit:
        return frame
    anywhere = pl.any_horizontal(hit.values())

    def on_side(kind: str) -> pl.Expr:  # the side's own mentions; a side that names no document: any mention
        side = _side(kind)
        own = [e for c, e in hit.items() if _side(names.get(c, c)) == side]
        return pl.any_horizontal(own) if own else anywhere

    exprs = []
    for column, dtype in frame.schema.items():
        kind = names.get(column, column)
        if column in hit:
            exprs.append(_hidden(column, dtype, hit[column], _identity_mark(dtype)))
        elif kind in IDENTITY_COLUMNS:
            exprs.append(_hidden(column, dtype, on_side(kind), _identity_mark(dtype)))
        elif kind in DESCRIBED_COLUMNS:
            exprs.append(_hidden(column, dtype, anywhere, pl.lit(AGGREGATE_REASON)))
        elif kind in TEXT_COLUMNS:
            exprs.append(_hidden(column, dtype, anywhere, pl.lit(WITHHELD_TEXT[AGGREGATE_ONLY])))
        elif kind in SUMMARY_COLUMNS:
            exprs.append(_hidden(column, dtype, anywhere, pl.lit(None, dtype)))
    return frame.with_columns(exprs)


def _side(column: str) -> str:
    """The prefix in SIDES that `column` starts with ("" for none)."""
    return max((side for side in SIDES if column.startswith(side)), key=len)


def write_shared_status(status: pl.DataFrame, path: Path, include_internal_text: bool = False) -> Path:
    """A shareable copy of CITATION_STATUS rows: what their levels withhold, withheld unless asked for, which the
    file's metadata records."""
    rows = status if include_internal_text else redact_status(status)
    metadata = raw_text_metadata(include_internal_text) | output_metadata("citation_status")
    return write_parquet(rows, CITATION_STATUS.with_metadata(metadata), path)


def raw_text_metadata(include_internal_text: bool) -> dict[str, str]:
    """What a shared output's metadata says of withheld text: RAW_TEXT_KEY -> included | withheld."""
    return {RAW_TEXT_KEY: "included" if include_internal_text else "withheld"}


def outside_audience(groups: str = "access_groups", audience: str = "audience") -> pl.Expr:
    """Rows whose document is closed to the answer's audience (status out_of_scope): the answer names an audience
    (a list of groups; null: none given, nothing checked), the document names access_groups (null or empty: open
    to every audience), and the two share no group. An empty audience is nobody's: every closed document is
    outside it."""
    closed = pl.col(groups).list.len().fill_null(0) > 0
    shared = pl.col(groups).list.set_intersection(pl.col(audience)).list.len().fill_null(0)
    return (pl.col(audience).is_not_null() & closed & (shared == 0)).fill_null(False)
