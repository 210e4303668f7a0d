"""Writing a verification run: pairs/claims/answers/run Parquet under <out>/corpus_version=<v>/run_id=<r>/; a
shard of a sharded run writes its tables and its tally under <run>/shard=<i>-of-<n>/, and the merge the run row."""

from __future__ import annotations

from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import polars as pl

from citekeeper.layout import run_dir, shard_run_dir
from citekeeper.schema import NLI_PAIR_KEYS, NLI_SHARD_TALLY
from citekeeper.sharding import Shard
from citekeeper.tables import ParquetStream, read_parquet, write_parquet
from verifiers.engine import TABLES
from verifiers.run_tally import RunTally, run_table

BATCH_TABLES = ("pairs", "claims", "answers")  # written batch by batch; the run row once, at the end
MODEL_COLUMNS = ["model_id", "model_revision", "backend", "precision", "checker", "thresholds"]


class RunWriter:
    """The tables of one run (or one shard of it), written as its batches are verified: each file appears when
    the writer closes without an error, and the run row (finish) only after them, so a run with a run.parquet is
    complete; a shard ends with its tally instead (finish_shard)."""

    def __init__(self, out_dir: Path | str, corpus_version: str, run_id: str, shard: Shard | None = None):
        self.directory = (
            run_dir(out_dir, corpus_version, run_id)
            if shard is None
            else shard_run_dir(out_dir, corpus_version, run_id, shard.index, shard.count)
        )
        self._stack = ExitStack()
        self._streams = {
            name: self._stack.enter_context(ParquetStream(self.directory / f"{name}.parquet", TABLES[name]))
            for name in BATCH_TABLES
        }

    def write(self, frames: dict[str, pl.DataFrame]) -> None:
        _assert_no_nan(frames)
        for name in BATCH_TABLES:
            self._streams[name].write(frames[name])

    def finish(self, run: pl.DataFrame) -> dict[str, Path]:
        _assert_no_nan({"run": run})
        return {**self._paths(), "run": write_parquet(run, TABLES["run"], self.directory / "run.parquet")}

    def finish_shard(self, tally_row: pl.DataFrame, pair_keys: pl.DataFrame) -> dict[str, Path]:
        return {
            **self._paths(),
            "pair_keys": write_parquet(pair_keys, NLI_PAIR_KEYS, self.directory / "pair_keys.parquet"),
            "tally": write_parquet(
                tally_row, NLI_SHARD_TALLY, self.directory / "tally.parquet"
            ),  # last: the shard is done
        }

    def _paths(self) -> dict[str, Path]:
        self._stack.close()  # the tables are complete before the row that says so
        return {name: stream.path for name, stream in self._streams.items()}

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *error) -> None:
        self._stack.__exit__(*error)


class ShardsMissing(RuntimeError):
    """A merge of a sharded run found shards that have not finished."""


def merge_shards(out_dir: Path | str, corpus_version: str, run_id: str) -> pl.DataFrame:
    """The run row (NLI_RUNS) of a sharded run, from its shards' tallies, written as the run's run.parquet. Raises
    ShardsMissing, naming them, while any shard has not written its tally."""
    directory = run_dir(out_dir, corpus_version, run_id)
    tallies = sorted(directory.glob("shard=*/tally.parquet"))
    if not tallies:
        raise ShardsMissing(f"no finished shard in {directory}")
    rows = pl.concat([read_parquet(path, NLI_SHARD_TALLY) for path in tallies])
    count = cast(int, rows["shard_count"].max())  # rows is not empty (polars types the max of any column)
    missing = sorted(set(range(count)) - set(rows["shard_index"].to_list()))
    if missing or rows["shard_count"].n_unique() != 1:
        raise ShardsMissing(
            f"{directory}: shard(s) {missing} of {count} have not finished (found {len(tallies)} tallies)"
        )
    pair_keys = pl.concat([read_parquet(path.with_name("pair_keys.parquet"), NLI_PAIR_KEYS) for path in tallies])
    started_at = cast(datetime, rows["started_at"].min())
    run = run_table(
        RunTally.of_shards(rows, pair_keys),
        run_id,
        corpus_version,
        started_at,
        (datetime.now(UTC) - started_at).total_seconds(),
        rows.select(MODEL_COLUMNS).row(0, named=True),
    )
    write_parquet(run, TABLES["run"], directory / "run.parquet")
    return run


def _assert_no_nan(frames: dict[str, pl.DataFrame]) -> None:
    for name, frame in frames.items():
        floats = [c for c, dtype in frame.schema.items() if dtype.is_float()]
        if floats and frame.select(pl.any_horizontal(pl.col(floats).is_nan().any())).item():
            raise ValueError(f"verification table {name!r} contains NaN in {floats}")
