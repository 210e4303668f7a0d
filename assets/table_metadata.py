"""Polars frames as Dagster table metadata: the UI shows them as tables with typed columns."""

import dagster as dg
import polars as pl

_RECORD_TYPES = (str, int, float, bool)  # what a TableRecord field may hold, besides None


def table_metadata(frame: pl.DataFrame) -> dg.TableMetadataValue:
    """One record per row; an empty frame is an empty table, so a key's metadata type never changes."""
    columns = [dg.TableColumn(name, _column_type(dtype)) for name, dtype in frame.schema.items()]
    records = [
        dg.TableRecord({name: _field(value) for name, value in row.items()}) for row in frame.iter_rows(named=True)
    ]
    return dg.MetadataValue.table(records=records, schema=dg.TableSchema(columns=columns))


def _column_type(dtype: pl.DataType) -> str:
    if dtype == pl.Boolean:
        return "bool"
    if dtype.is_integer():
        return "int"
    if dtype.is_float():
        return "float"
    return "string" if dtype == pl.String else str(dtype)


def _field(value: object) -> str | int | float | bool | None:
    """Dates, lists and the like go in as their text: a TableRecord takes scalars only."""
    return value if value is None or isinstance(value, _RECORD_TYPES) else str(value)
