"""relocated: the same text is at a new locator (moved in its document, or now in another one); also a stale
citation whose evidence re-anchoring found verbatim elsewhere in the target (changes.citation_status.Suggester)."""

import polars as pl

from changes.statuses import stale
from changes.statuses.base import Status, similarity
from citekeeper.locate import MATCH_EXACT, MATCH_NORMALIZED

STATUS = Status(
    name="relocated",
    meaning="the same text is at a new locator",
    color="#0969da",
    holds=True,
    lost=False,
    repairable=True,
    successor=True,
    overrides=False,
    applies=lambda _: pl.col("change").is_in(["moved", "relocated"]),
    reason=lambda _: (
        pl.when(pl.col("change") == "moved")
        .then(pl.format("same text at a new locator in {}", "new_source_path"))
        .otherwise(pl.format("same text now in {}", "new_source_path"))
    ),
)


def found_verbatim() -> pl.Expr:
    """A stale row whose evidence re-anchoring found verbatim (exact, or after normalisation) elsewhere in the target:
    the chunk was re-cut or the evidence moved, it is not gone."""
    method = pl.col("suggested_method").is_in([MATCH_EXACT, MATCH_NORMALIZED]).fill_null(False)
    return (pl.col("status") == stale.STATUS.name) & method


def found_verbatim_reason() -> pl.Expr:
    return pl.format(
        "chunk modified (similarity {}); evidence found verbatim ({}) at {} chars {}–{}",
        similarity(),
        "suggested_method",
        "new_source_path",
        "suggested_start_char",
        "suggested_end_char",
    )
