"""valid: the cited chunk is unchanged in the target (same id, text and locator)."""

import polars as pl

from changes.statuses.base import Status

STATUS = Status(
    name="valid",
    meaning="the cited chunk is unchanged: same id, text and locator",
    color="#1a7f37",
    holds=True,
    lost=False,
    repairable=False,
    successor=True,
    overrides=False,
    applies=lambda _: pl.col("change") == "unchanged",
    reason=lambda _: pl.lit("chunk unchanged"),
)
