"""Polars frames <-> Parquet with the schemas of citekeeper.schema."""
from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq


def conform(frame: pl.DataFrame, schema: pa.Schema) -> pl.DataFrame:
    """Select and cast `frame` to exactly `schema` (missing nullable columns become nulls)."""
    missing = [f.name for f in schema if f.name not in frame.columns]
    frame = frame.with_columns(pl.lit(None).alias(name) for name in missing)
    table = frame.select(schema.names).to_arrow()
    return pl.from_arrow(table.cast(schema))


def empty(schema: pa.Schema) -> pl.DataFrame:
    return pl.from_arrow(schema.empty_table())


def from_rows(rows: list[dict], schema: pa.Schema) -> pl.DataFrame:
    return pl.from_arrow(pa.Table.from_pylist(rows, schema=schema))


def write_parquet(frame: pl.DataFrame, schema: pa.Schema, path: Path) -> Path:
    """Write atomically (temp file + rename) so readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(conform(frame, schema).to_arrow().cast(schema), tmp)
    os.replace(tmp, path)
    return path


def read_parquet(path: Path, schema: pa.Schema) -> pl.DataFrame:
    path = Path(path)
    return conform(pl.read_parquet(path), schema) if path.exists() else empty(schema)
