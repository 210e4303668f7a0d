"""Row-level helpers over one of the store's LanceDB tables, a Lance dataset (CorpusStore.lance_head, lance_at),
shared by the store's commit and retention's rewrite. Each writes a new table version and moves the dataset to it."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from citekeeper.tables import to_arrow, to_frame

if TYPE_CHECKING:
    from lance import LanceDataset

DOC_ID_INDEX = "doc_id_idx"
MAX_INDEX_SEGMENTS = 16  # doc_id index delta segments before a commit merges them
SORTED_BATCH = 100_000  # rows taken at a time by sorted_batches


def sorted_batches(dataset: LanceDataset, keys: list[str]) -> Iterator[pa.Table]:
    """The rows of a Lance dataset (a table version) in `keys` order, SORTED_BATCH rows at a time: memory holds
    the keys and one batch, not the version. Rows are taken by offset in sorted order."""
    order = to_frame(dataset.to_table(columns=keys)).with_row_index("offset").sort(keys)["offset"].to_numpy()
    for start in range(0, len(order), SORTED_BATCH):
        yield dataset.take(order[start : start + SORTED_BATCH])


def add_rows(dataset: LanceDataset, rows: pa.Table | pa.RecordBatchReader, schema: pa.Schema) -> None:
    """Append `rows` (cast to `schema`) batch by batch; nothing at all when there are none (no empty fragment)."""
    reader = rows.to_reader() if isinstance(rows, pa.Table) else rows
    batches = (
        cast
        for batch in reader
        for cast in to_arrow(pa.Table.from_batches([batch]), schema).to_batches()
        if cast.num_rows
    )
    first = next(batches, None)
    if first is not None:
        dataset.insert(pa.RecordBatchReader.from_batches(schema, itertools.chain([first], batches)))


def delete_docs(dataset: LanceDataset, doc_ids: list[str]) -> None:
    """A pyarrow expression, not SQL: ids go in as values, nothing to quote."""
    if doc_ids:
        dataset.delete(pc.field("doc_id").isin(doc_ids))


def restored(dataset: LanceDataset, version: int) -> LanceDataset:
    """The table with table version `version` restored as its new head (a new table version of the same rows)."""
    at = dataset.checkout_version(version)
    at.restore()
    return at


def index_doc_ids(dataset: LanceDataset) -> None:
    """Keep a BTree index on doc_id covering every row, so reading a few documents' rows (the diff reads
    only changed documents) costs what those rows cost, not a scan of the version. The index is part of
    the table version, so each tagged version carries the index as of its commit."""
    if not dataset.count_rows():
        return
    index = next((i for i in dataset.describe_indices() if i.name == DOC_ID_INDEX), None)
    if index is None:
        dataset.create_scalar_index("doc_id", "BTREE", name=DOC_ID_INDEX)
    else:
        # A delta segment per commit keeps index writes growing with the change; past MAX_INDEX_SEGMENTS
        # new rows merge into the newest segment instead, which bounds what a read consults.
        merge = None if len(index.segments) >= MAX_INDEX_SEGMENTS else 0
        dataset.optimize.optimize_indices(index_names=[DOC_ID_INDEX], num_indices_to_merge=merge)
