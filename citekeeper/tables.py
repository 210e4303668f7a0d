"""Polars frames / Arrow tables <-> Parquet with the schemas of citekeeper.schema."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import cast

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from citekeeper.files import atomic_path


def to_arrow(frame: pl.DataFrame | pa.Table, schema: pa.Schema) -> pa.Table:
    """Select and cast to exactly `schema` (polars writes large_string and nullable fields); missing columns
    become nulls, which the cast rejects for a non-nullable field."""
    table = frame.to_arrow() if isinstance(frame, pl.DataFrame) else frame
    for name in schema.names:
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows))
    return table.select(schema.names).cast(schema)


def to_frame(arrow: pa.Table | pa.RecordBatch) -> pl.DataFrame:
    """pl.from_arrow of a table or record batch: a DataFrame (polars types the result DataFrame | Series, a
    Series being what an arrow array gives)."""
    return cast(pl.DataFrame, pl.from_arrow(arrow))


def conform(frame: pl.DataFrame | pa.Table, schema: pa.Schema) -> pl.DataFrame:
    return to_frame(to_arrow(frame, schema))


def empty(schema: pa.Schema) -> pl.DataFrame:
    return to_frame(schema.empty_table())


def from_rows(rows: list[dict], schema: pa.Schema) -> pl.DataFrame:
    return to_frame(pa.Table.from_pylist(rows, schema=schema))


def write_parquet(frame: pl.DataFrame | pa.Table, schema: pa.Schema, path: Path) -> Path:
    """Write atomically (temp file + rename) so readers never see half a file."""
    with ParquetStream(path, schema) as out:
        out.write(frame)
    return out.path


class ParquetStream:
    """A Parquet file of `schema` written frame by frame (memory bounded by one frame), atomically: it appears
    under its name only when the stream closes without an error; an error leaves no file behind."""

    def __init__(self, path: Path, schema: pa.Schema):
        self.path, self.schema = Path(path), schema
        with ExitStack() as opening:  # a writer that cannot start leaves no temp file
            self._writer = pq.ParquetWriter(opening.enter_context(atomic_path(self.path)), schema)
            self._written = opening.pop_all()

    def write(self, frame: pl.DataFrame | pa.Table) -> None:
        self._writer.write_table(to_arrow(frame, self.schema))

    def __enter__(self) -> ParquetStream:
        return self

    def __exit__(self, *error) -> None:
        self._writer.close()
        self._written.__exit__(*error)  # renamed into place, or removed on an error


def counts_of(frame: pl.DataFrame, column: str, values: tuple[str, ...] | None = None) -> dict[str, int]:
    """Rows per value of `column`: every one of `values` (0 when absent) in their order, else the values found,
    sorted."""
    found = dict(frame.group_by(column).len().iter_rows())
    return {value: found.get(value, 0) for value in values} if values is not None else dict(sorted(found.items()))


def read_parquet(path: Path, schema: pa.Schema) -> pl.DataFrame:
    path = Path(path)
    return conform(pl.read_parquet(path), schema) if path.exists() else empty(schema)
