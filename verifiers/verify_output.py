"""Writing a verification run: pairs/claims/answers/run Parquet under <out>/corpus_version=<v>/run_id=<r>/."""
from __future__ import annotations

from pathlib import Path

import polars as pl

from citekeeper.layout import run_dir
from citekeeper.tables import write_parquet
from verifiers.engine import TABLES, VerifyResult


def write_outputs(result: VerifyResult, out_dir: Path | str) -> dict[str, Path]:
    """Write pairs/claims/answers/run Parquet under <out>/corpus_version=<v>/run_id=<r>/."""
    run = result.run.row(0, named=True)
    directory = run_dir(out_dir, run["corpus_version"], run["run_id"])
    frames = {"pairs": result.pairs, "claims": result.claims, "answers": result.answers, "run": result.run}
    _assert_no_nan(frames)
    return {name: write_parquet(frame, TABLES[name], directory / f"{name}.parquet") for name, frame in frames.items()}


def _assert_no_nan(frames: dict[str, pl.DataFrame]) -> None:
    for name, frame in frames.items():
        floats = [c for c, dtype in frame.schema.items() if dtype.is_float()]
        if floats and frame.select(pl.any_horizontal(pl.col(floats).is_nan().any())).item():
            raise ValueError(f"verification table {name!r} contains NaN in {floats}")
