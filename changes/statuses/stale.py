"""stale: the cited chunk was modified, and the evidence is gone from its successor (and, as far as re-anchoring
finds, from the target: changes.statuses.relocated.found_verbatim)."""

import polars as pl

from changes.statuses.base import Status, similarity

STATUS = Status(
    name="stale",
    meaning="the chunk was modified and the evidence is gone from its successor",
    color="#bc4c00",
    holds=False,
    lost=True,
    repairable=True,
    successor=True,
    overrides=False,
    applies=lambda _: pl.col("change") == "modified",
    reason=lambda _: pl.format("chunk modified (similarity {}); evidence no longer in successor", similarity()),
)
