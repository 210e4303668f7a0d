"""Writing a verification run: pairs/claims/answers/run Parquet under <out>/corpus_version=<v>/run_id=<r>/."""
from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import polars as pl

from citekeeper.layout import run_dir
from citekeeper.tables import ParquetStream, write_parquet
from verifiers.engine import TABLES, VerifyResult

BATCH_TABLES = ("pairs", "claims", "answers")  # written batch by batch; the run row once, at the end


def write_outputs(result: VerifyResult, out_dir: Path | str) -> dict[str, Path]:
    """Write pairs/claims/answers/run Parquet under <out>/corpus_version=<v>/run_id=<r>/."""
    run = result.run.row(0, named=True)
    with RunWriter(out_dir, run["corpus_version"], run["run_id"]) as out:
        out.write({"pairs": result.pairs, "claims": result.claims, "answers": result.answers})
    return out.finish(result.run)


class RunWriter:
    """The tables of one run, written as its batches are verified: each file appears when the writer closes
    without an error, and the run row (finish) only after them, so a run with a run.parquet is complete."""

    def __init__(self, out_dir: Path | str, corpus_version: str, run_id: str):
        self.directory = run_dir(out_dir, corpus_version, run_id)
        self._stack = ExitStack()
        self._streams = {
            name: self._stack.enter_context(ParquetStream(self.directory / f"{name}.parquet", TABLES[name])) for name in BATCH_TABLES
        }

    def write(self, frames: dict[str, pl.DataFrame]) -> None:
        _assert_no_nan(frames)
        for name in BATCH_TABLES:
            self._streams[name].write(frames[name])

    def finish(self, run: pl.DataFrame) -> dict[str, Path]:
        _assert_no_nan({"run": run})
        paths = {name: stream.path for name, stream in self._streams.items()}
        return {**paths, "run": write_parquet(run, TABLES["run"], self.directory / "run.parquet")}

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *error) -> None:
        self._stack.__exit__(*error)


def _assert_no_nan(frames: dict[str, pl.DataFrame]) -> None:
    for name, frame in frames.items():
        floats = [c for c, dtype in frame.schema.items() if dtype.is_float()]
        if floats and frame.select(pl.any_horizontal(pl.col(floats).is_nan().any())).item():
            raise ValueError(f"verification table {name!r} contains NaN in {floats}")
