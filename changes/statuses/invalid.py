"""invalid: the citation never matched the version it cites (an invented citation, not a stale one): the version
or the chunk is not there, the text_hash or the quote does not match, or registration could not anchor it."""

import polars as pl

from changes.statuses.base import Judging, Status


def why(judging: Judging) -> pl.Expr:
    """Why the citation is invalid; null when it is not."""
    cited = pl.lit(judging.cited_version)
    return (
        pl.when(pl.lit(not judging.version_known))
        .then(pl.lit(f"cited version {judging.cited_version!r} is not in the store"))
        .when(pl.col("chunk_id").is_null())  # cited by document, and registration could not anchor it
        .then(pl.format("not anchored at registration: {}", "anchor_note"))
        .when(pl.col("old_text").is_null())
        .then(pl.format("chunk {} does not exist in cited version {}", "chunk_id", cited))
        .when(pl.col("cited_text_hash").is_not_null() & (pl.col("cited_text_hash") != pl.col("old_text_hash")))
        .then(
            pl.format(
                "cited text_hash {} does not match the chunk's {} in {}", "cited_text_hash", "old_text_hash", cited
            )
        )
        .when(pl.col("quote").is_not_null() & pl.col("quote_match").is_null())
        .then(pl.format("quote is not in chunk {} at cited version {}", "chunk_id", cited))
    )


STATUS = Status(
    name="invalid",
    meaning="the citation does not match the version it cites: an invented citation, not a stale one",
    color="#6e7781",
    holds=False,
    lost=False,
    repairable=False,
    successor=False,
    overrides=True,
    applies=lambda judging: why(judging).is_not_null(),
    reason=why,
)
