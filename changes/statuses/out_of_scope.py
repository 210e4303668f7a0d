"""out_of_scope: the cited document is closed to the answer's audience (at the cited version, at the target, or the
document its successor is in; changes.citation_status._with_sources). It comes before every other status: nothing
of such a document is used, it is never re-anchored, repaired or repaired into."""

import polars as pl

from changes.statuses.base import Status

STATUS = Status(
    name="out_of_scope",
    meaning="the cited document is closed to the answer's audience",
    color="#953800",
    holds=False,
    lost=False,
    repairable=False,
    successor=False,
    overrides=True,
    applies=lambda _: pl.col("_outside_reason").is_not_null(),
    reason=lambda _: pl.col("_outside_reason"),
)
