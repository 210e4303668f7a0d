"""removed: the cited chunk has no successor in the target. Last in decision order, it takes every citation the
other rules left."""

import polars as pl

from changes.statuses.base import Status

STATUS = Status(
    name="removed",
    meaning="the chunk has no successor",
    color="#cf222e",
    holds=False,
    lost=True,
    repairable=True,
    successor=False,
    overrides=False,
    applies=lambda _: pl.lit(True),
    reason=lambda _: pl.lit("chunk removed; no successor above the similarity threshold"),
)
