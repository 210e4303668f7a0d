"""drifted: the cited chunk was modified, and the evidence is still verbatim in its successor."""

import polars as pl

from changes.statuses.base import Status, similarity

STATUS = Status(
    name="drifted",
    meaning="the chunk was modified; the evidence is still verbatim in its successor",
    color="#8250df",
    holds=True,
    lost=False,
    repairable=True,
    successor=True,
    overrides=False,
    applies=lambda _: (pl.col("change") == "modified") & pl.col("evidence_in_new"),
    reason=lambda _: pl.format(
        "chunk modified (similarity {}); evidence still in successor ({} match)", similarity(), "new_match"
    ),
)
