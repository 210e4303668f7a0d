"""What a verification run adds up to across its batches and shards, and its one NLI_RUNS row."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import polars as pl

from citekeeper.schema import NLI_RUNS, NLI_SHARD_TALLY
from citekeeper.sharding import Shard
from citekeeper.tables import conform
from verifiers.claim_metrics import run_summary, run_totals_columns


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")


@dataclass(frozen=True)
class RunTally:
    """What a run's batches add up to: the answer totals (claim_metrics.run_totals), the distinct (sentence,
    evidence) pairs judged as 8-byte hashes with whether the lexical tier decided them, the work counters."""

    totals: pl.DataFrame
    pair_keys: pl.DataFrame
    counters: dict[str, int]

    def __add__(self, other: RunTally) -> RunTally:
        counters = {
            name: self.counters.get(name, 0) + other.counters.get(name, 0)
            for name in self.counters.keys() | other.counters.keys()
        }
        return RunTally(pl.concat([self.totals, other.totals]), pl.concat([self.pair_keys, other.pair_keys]), counters)

    def shard_row(
        self, run_id: str, corpus_version: str, shard: Shard, started_at: datetime, model: dict
    ) -> pl.DataFrame:
        """The NLI_SHARD_TALLY row of one shard of a run (its pair keys are stored beside it)."""
        row = self.totals.sum().with_columns(
            **{name: pl.lit(value, pl.Int64) for name, value in self.counters.items()},
            **{name: pl.lit(value, pl.String) for name, value in model.items()},
            run_id=pl.lit(run_id),
            corpus_version=pl.lit(corpus_version),
            started_at=pl.lit(started_at),
            shard_index=pl.lit(shard.index),
            shard_count=pl.lit(shard.count),
        )
        return conform(row, NLI_SHARD_TALLY)

    @classmethod
    def of_shards(cls, rows: pl.DataFrame, pair_keys: pl.DataFrame) -> RunTally:
        counters = {name: int(rows[name].sum()) for name in _COUNTERS}  # Int64 columns: polars types the sum wider
        return cls(rows.select(run_totals_columns()), pair_keys, counters)


_COUNTERS = ("n_pairs", "cache_hits", "model_calls")


def run_table(
    tally: RunTally,
    run_id: str,
    corpus_version: str,
    started_at: datetime,
    duration_s: float,
    model: dict[str, str | None],
) -> pl.DataFrame:
    """The run's one row (NLI_RUNS) from the tally of all its batches: totals and metrics over the answers,
    distinct pairs and lexical decisions over the pair keys, the counters summed."""
    distinct = tally.pair_keys.select(
        pl.col("pair").n_unique().alias("n_unique_pairs"),
        pl.col("pair").filter("lexical").n_unique().alias("lexical_decisions"),
    )
    run = run_summary(tally.totals, {**tally.counters, **distinct.row(0, named=True)}, started_at, duration_s)
    keys = {"run_id": pl.lit(run_id), "corpus_version": pl.lit(corpus_version)}
    return conform(
        run.with_columns(**keys, **{name: pl.lit(value, pl.String) for name, value in model.items()}), NLI_RUNS
    )


def run_stats(run: pl.DataFrame) -> dict[str, int]:
    return {
        name: run[name].item()
        for name in ("n_pairs", "n_unique_pairs", "lexical_decisions", "cache_hits", "model_calls")
    }
