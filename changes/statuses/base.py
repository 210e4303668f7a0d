"""The contract of a citation status: what it says of a citation, how repair and the reports treat it, and the rule
that decides it.

A rule is a polars expression over the frame `changes.citation_status.judge` builds, one row per citation:
`change` (the cited chunk's change to the target: unchanged | moved | relocated | modified | removed),
`evidence_in_new` and `new_match` (whether and how the evidence is in the successor chunk), `similarity`,
`new_source_path`, the cited chunk as of the cited version (`chunk_id`, `old_text`, `old_text_hash`), the citation
(`quote`, `quote_match`, `cited_text_hash`, `anchor_note`) and `_outside_reason` (why its document is outside the
answer's audience; null when it is not)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl


@dataclass(frozen=True)
class Judging:
    """What a rule reads besides the row: the version the citations cite, and whether the store holds it."""

    cited_version: str
    version_known: bool


Rule = Callable[[Judging], pl.Expr]


@dataclass(frozen=True)
class Status:
    name: str
    meaning: str  # one line, for people (the report's tooltip); docs/answers.md says it in full
    color: str  # its badge in the HTML report and its bars in the plots
    holds: bool  # the evidence is still verbatim at a locator of the target version
    lost: bool  # the evidence is gone from where it was: re-anchoring searches the target for it
    repairable: bool  # repair may re-point it (a status that holds and is not repairable is kept as cited)
    successor: bool  # its row shows the cited chunk's successor in the target (the new_* columns)
    # Decided before the corpus change is looked at: whatever the change, the citation is this (worst first).
    overrides: bool
    applies: Rule  # true for the citations of this status, among those no status earlier in decision order took
    reason: Rule  # why, for those citations


def similarity() -> pl.Expr:
    """The cited chunk's similarity to its successor, as a reason shows it."""
    return pl.col("similarity").round(3).cast(pl.String)
