"""Polars frames / Arrow tables <-> Parquet with the schemas of citekeeper.schema."""
from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq


def to_arrow(frame: pl.DataFrame | pa.Table, schema: pa.Schema) -> pa.Table:
    """Select and cast to exactly `schema` (polars writes large_string and nullable fields); missing columns
    become nulls, which the cast rejects for a non-nullable field."""
    table = frame.to_arrow() if isinstance(frame, pl.DataFrame) else frame
    for name in schema.names:
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows))
    return table.select(schema.names).cast(schema)


def conform(frame: pl.DataFrame | pa.Table, schema: pa.Schema) -> pl.DataFrame:
    return pl.from_arrow(to_arrow(frame, schema))


def empty(schema: pa.Schema) -> pl.DataFrame:
    return pl.from_arrow(schema.empty_table())


def from_rows(rows: list[dict], schema: pa.Schema) -> pl.DataFrame:
    return pl.from_arrow(pa.Table.from_pylist(rows, schema=schema))


def write_parquet(frame: pl.DataFrame | pa.Table, schema: pa.Schema, path: Path) -> Path:
    """Write atomically (temp file + rename) so readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(to_arrow(frame, schema), tmp)
    os.replace(tmp, path)
    return path


def read_parquet(path: Path, schema: pa.Schema) -> pl.DataFrame:
    path = Path(path)
    return conform(pl.read_parquet(path), schema) if path.exists() else empty(schema)
