"""The Parquet exports' files (docs/ingest.md, "Parquet exports of chunks and documents"): one folder per table
and version, local or at parquet_uri. A version's ingest errors are one file; the latest version's chunks and
documents are parts by doc_id range, so a commit rewrites the parts that hold a changed document and links the
others from the previous export (a hard link here, a server-side copy in an object store)."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from citekeeper.files import atomic_write_text
from citekeeper.locations import parquet_filesystem
from citekeeper.tables import to_arrow, write_parquet

# Documents a part holds when an export is laid out (CorpusStore's docs_per_part): rewriting a part costs its
# rows plus a file's fixed cost (bench/bench_export.py; bench/README.md, issue #34's second session).
DOCS_PER_PART = 32
# A part grown past this many times DOCS_PER_PART, or parts this sparse on average, make the next commit lay the
# export out afresh.
REBALANCE_FACTOR = 4


@dataclass(frozen=True)
class PartLayout:
    """Part i holds the documents with lows[i] <= doc_id < lows[i + 1] (code point order, as Arrow and polars
    compare strings) and their chunks; lows[0] is "". n_documents: each part's count, to tell when to re-lay;
    docs_per_part: what it was laid out with."""

    lows: tuple[str, ...]
    n_documents: tuple[int, ...]
    docs_per_part: int

    @classmethod
    def of(cls, sorted_doc_ids: pl.Series, docs_per_part: int) -> PartLayout:
        starts = list(range(0, len(sorted_doc_ids), docs_per_part)) or [0]
        ends = [*starts[1:], len(sorted_doc_ids)]
        lows = ["", *sorted_doc_ids.gather(starts[1:]).to_list()]
        return cls(tuple(lows), tuple(end - start for start, end in zip(starts, ends, strict=True)), docs_per_part)

    @classmethod
    def from_json(cls, text: str) -> PartLayout:
        data = json.loads(text)
        return cls(tuple(data["lows"]), tuple(data["n_documents"]), data["docs_per_part"])

    def to_json(self) -> str:
        fields = {"lows": list(self.lows), "n_documents": list(self.n_documents), "docs_per_part": self.docs_per_part}
        return json.dumps(fields, ensure_ascii=False)

    def part_of(self, doc_ids: pl.Series | pa.Array | pa.ChunkedArray) -> np.ndarray:
        """The index of the part each doc_id falls in."""
        lows = pl.Series(self.lows, dtype=pl.String)
        return lows.search_sorted(pl.Series(doc_ids, dtype=pl.String), side="right").to_numpy().astype(np.int64) - 1

    def balanced(self, docs_per_part: int) -> bool:
        """Whether a commit may keep this layout under the store's docs_per_part."""
        full = REBALANCE_FACTOR * docs_per_part
        too_sparse = len(self.lows) > 1 and sum(self.n_documents) * REBALANCE_FACTOR < len(self.lows) * docs_per_part
        return self.docs_per_part == docs_per_part and max(self.n_documents) <= full and not too_sparse

    def with_counts(self, counts: dict[int, int]) -> PartLayout:
        n_documents = tuple(counts.get(i, n) for i, n in enumerate(self.n_documents))
        return PartLayout(self.lows, n_documents, self.docs_per_part)

    @staticmethod
    def file_name(part: int) -> str:
        return f"part-{part:05d}.parquet"


@dataclass(frozen=True)
class ExportFolder:
    """A version's export folder of one table: a local Path, or a location in a remote filesystem."""

    table: str
    location: Path | str
    storage_options: dict[str, str]
    layout_path: Path  # the PartLayout of the parts, in the store's root (StoreLayout.export_parts)

    def _remote(self, name: str = "") -> tuple[pafs.FileSystem, str]:
        assert isinstance(self.location, str)
        filesystem, path = parquet_filesystem(self.location, self.storage_options)
        return filesystem, f"{path}/{name}" if name else path

    def file(self, name: str) -> Path | str:
        return self.location / name if isinstance(self.location, Path) else f"{self.location}/{name}"

    def exists(self, name: str) -> bool:
        if isinstance(self.location, Path):
            return (self.location / name).is_file()
        filesystem, path = self._remote(name)
        return filesystem.get_file_info(path).type == pafs.FileType.File

    def complete(self) -> bool:
        """Whether the folder holds a whole export of chunks or documents: the parts' layout, written last, or the
        one file of an export from before the parts."""
        return self.layout_path.is_file() or self.exists(self._single)

    @property
    def _single(self) -> str:
        return f"{self.table}.parquet"

    def siblings(self) -> list[str]:
        """The names of the folders beside this one: the table's exports of other versions."""
        if isinstance(self.location, Path):
            parent = self.location.parent
            return sorted(p.name for p in parent.iterdir() if p.is_dir()) if parent.is_dir() else []
        filesystem, path = self._remote()
        selector = pafs.FileSelector(path.rsplit("/", 1)[0], allow_not_found=True)
        return sorted(i.base_name for i in filesystem.get_file_info(selector) if i.type == pafs.FileType.Directory)

    def size_bytes(self) -> int:
        if isinstance(self.location, Path):
            return sum(p.stat().st_size for p in self.location.iterdir()) if self.location.is_dir() else 0
        filesystem, path = self._remote()
        return sum(i.size or 0 for i in filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True)))

    def write_file(self, name: str, schema: pa.Schema, rows: pl.DataFrame | pa.Table) -> None:
        """A whole Parquet file of `schema`: a local one appears atomically and durably, an upload once complete."""
        if isinstance(self.location, Path):
            write_parquet(rows, schema, self.location / name)
            return
        with self.part_writer(name, schema) as out:
            out.write(rows)

    @contextmanager
    def part_writer(self, name: str, schema: pa.Schema) -> Iterator[_PartWriter]:
        """A part, written table by table straight to its name, unsynced: the folder is the committing version's
        alone until write_layout, which makes every part durable at once."""
        if isinstance(self.location, Path):
            self.location.mkdir(parents=True, exist_ok=True)
            filesystem, sink = None, str(self.location / name)
        else:
            filesystem, sink = self._remote(name)
        with pq.ParquetWriter(sink, schema, filesystem=filesystem) as parquet:
            yield _PartWriter(parquet, schema)

    def read(self, name: str, columns: list[str] | None = None) -> pa.Table:
        return self.read_files([name], columns)

    def read_files(self, names: list[str], columns: list[str] | None = None) -> pa.Table:
        """Files read together, as one table, in parallel: each must hold `columns` (the first file's schema is
        the table's)."""
        if isinstance(self.location, Path):
            filesystem, paths = None, [str(self.location / name) for name in names]
        else:
            filesystem, folder = self._remote()
            paths = [f"{folder}/{name}" for name in names]
        # no partitioning: a list of paths would otherwise add their folder's corpus_version=
        return pq.read_table(paths, columns=columns, filesystem=filesystem, partitioning=None)

    def read_all(self, schema: pa.Schema) -> pa.Table:
        """Every row of a complete export of chunks or documents, as `schema`'s columns (a column an older file
        lacks comes back null)."""
        layout = self.layout()
        names = [PartLayout.file_name(i) for i in range(len(layout.lows))] if layout else [self._single]
        return pa.concat_tables([to_arrow(self.read(name), schema) for name in names])

    def layout(self) -> PartLayout | None:
        """The parts' layout, when the folder holds a complete export in parts."""
        return PartLayout.from_json(self.layout_path.read_text()) if self.layout_path.is_file() else None

    def write_layout(self, layout: PartLayout) -> None:
        """The last write of an export, once its parts are in place: they are made durable first, here with one
        sync of the filesystems (an fsync a part measured 3 ms each, under load)."""
        if isinstance(self.location, Path):
            os.sync()
        atomic_write_text(self.layout_path, layout.to_json())

    def link(self, source: ExportFolder, names: list[str]) -> None:
        """`source`'s files `names` here too, not copied through this process: hard links, or the object store's
        own copies."""
        if isinstance(self.location, Path):
            assert isinstance(source.location, Path)
            self.location.mkdir(parents=True, exist_ok=True)
            for name in names:
                os.link(source.location / name, self.location / name)  # the folder is new: nothing to replace
            return
        (filesystem, folder), source_folder = self._remote(), source._remote()[1]  # one filesystem for every copy
        for name in names:
            filesystem.copy_file(f"{source_folder}/{name}", f"{folder}/{name}")

    def remove(self) -> None:
        """The folder and everything in it, and its layout; nothing to do when it is gone."""
        self.layout_path.unlink(missing_ok=True)
        if isinstance(self.location, Path):
            if self.location.is_dir():
                for file in self.location.iterdir():
                    file.unlink()
                self.location.rmdir()
            return
        filesystem, path = self._remote()
        if filesystem.get_file_info(path).type == pafs.FileType.Directory:
            filesystem.delete_dir(path)


@dataclass
class _PartWriter:
    parquet: pq.ParquetWriter
    schema: pa.Schema

    def write(self, rows: pl.DataFrame | pa.Table) -> None:
        cast = isinstance(rows, pa.Table) and rows.schema.equals(self.schema)  # write_parts' rows are cast already
        self.parquet.write_table(rows if cast else to_arrow(rows, self.schema))


def write_parts(
    folder: ExportFolder, layout: PartLayout, schema: pa.Schema, parts: Iterable[int], rows: Iterable[pa.Table]
) -> dict[int, int]:
    """Write the files of `parts` from `rows`: every row of those parts, sorted by doc_id (each batch cast to
    `schema`). A part with no rows gets an empty file. Returns each part's number of rows."""
    written: dict[int, int] = {}
    for part, pieces in itertools.groupby(_pieces_by_part(layout, rows), key=lambda piece: piece[0]):
        with folder.part_writer(PartLayout.file_name(part), schema) as out:
            written[part] = 0
            for _, piece in pieces:
                out.write(piece)
                written[part] += piece.num_rows
    for part in set(parts) - set(written):
        with folder.part_writer(PartLayout.file_name(part), schema):
            written[part] = 0
    return written


def _pieces_by_part(layout: PartLayout, rows: Iterable[pa.Table]) -> Iterator[tuple[int, pa.Table]]:
    """(part, rows) for each run of rows in one part; rows in doc_id order give each part one run."""
    for batch in rows:
        if not batch.num_rows:
            continue
        owner = layout.part_of(batch.column("doc_id"))
        cuts = [0, *(np.flatnonzero(np.diff(owner)) + 1).tolist(), batch.num_rows]
        for start, end in itertools.pairwise(cuts):
            yield int(owner[start]), batch.slice(start, end - start)
