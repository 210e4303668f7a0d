"""The versioned corpus store (CorpusStore): immutable, named corpus versions, each a tagged LanceDB table version,
plus Parquet exports; a new version stores only the change (docs/ingest.md, "Corpus versions and time travel"
and "Incremental"; other locations for the data: citekeeper.locations)."""

from __future__ import annotations

import functools
import hashlib
import json
import operator
import re
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlparse

import filelock
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from citekeeper import schema
from citekeeper.exports import DOCS_PER_PART, ExportFolder, PartLayout, write_parts
from citekeeper.files import atomic_write_text
from citekeeper.lance_tables import add_rows, delete_docs, index_doc_ids, restored, sorted_batches
from citekeeper.layout import StoreLayout, UnsafeName, is_safe_name, safe_name
from citekeeper.locations import is_remote
from citekeeper.tables import to_arrow, to_frame

if TYPE_CHECKING:
    from lance import LanceDataset

TABLES = ("chunks", "documents")  # the LanceDB tables; their exports exist for the latest version only
EXPORTS = (*TABLES, "errors")  # errors has no LanceDB table: its per-version export is its only copy
READ_SCHEMAS = {"chunks": schema.CHUNKS, "documents": schema.DOCUMENTS, "errors": schema.INGEST_ERRORS}
# What LanceDB holds: the read schema without corpus_version (a carried-over row belongs to many versions).
STORED_SCHEMAS = {
    name: READ_SCHEMAS[name].remove(READ_SCHEMAS[name].get_field_index("corpus_version")) for name in TABLES
}
SORT_KEYS = {"chunks": ["doc_id", "ordinal"], "documents": ["doc_id"], "errors": ["source_path", "stage"]}
GENERATED_NAME = re.compile(r"^v(\d{4,})$")
DEFAULT_LOCK_TIMEOUT = 30.0
PARTS_PER_READ = 256  # export parts rewritten from one LanceDB read (bounds a commit's memory)
READ_LEASE_TIMEOUT = 600.0  # how long a reader waits for a running gc (its rewrite of a large store takes minutes)


class StoreError(Exception):
    """A corpus store operation cannot proceed; the message says why."""


class UnknownVersion(StoreError):
    pass


class VersionExists(StoreError):
    pass


class StoreLocked(StoreError):
    pass


@dataclass(frozen=True)
class VersionManifest:
    name: str
    parent: str | None
    created_at: str  # ISO 8601, UTC
    n_documents: int
    n_chunks: int
    n_errors: int
    corpus_hash: str  # sha256 over each document's identity: doc_id, source_path, bytes, access_scope, title
    config_hash: str = ""  # parse settings; documents are reused only under the same settings
    parse_settings: dict = field(default_factory=dict)  # the settings behind config_hash (empty before 2026-12)
    n_parsed: int = 0  # documents parsed for this version
    n_reused: int = 0  # documents carried over unchanged from the parent
    n_removed: int = 0  # parent documents deleted from the source tree
    n_no_text: int = 0  # files skipped with nothing to cite (front matter only)
    source_dir: str = ""  # the folder, bucket URL or git:PATH@REF ingested
    source_revision: str | None = None  # the commit ingested, for a git source
    # Documents whose bytes discovery read and hashed, and those whose stat (a folder) or stamp (a listing) was
    # what it was when they were read last, so their hash was reused unread (0 and 0 before 2026-12).
    n_hashed: int = 0
    n_stamp_reused: int = 0
    lance_versions: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_file(cls, path: Path) -> VersionManifest:
        return cls(**json.loads(path.read_text()))


def corpus_hash(documents: Iterable[tuple[str | None, ...]]) -> str:
    """sha256 over the sorted rows that describe a tree's documents, one row each (ingest's: doc_id,
    source_path, content hash, access_scope, explicit title): equal iff the trees hold the same documents,
    alike in every value. Each row is JSON, so no value can run into the next and None is not ""."""
    digest = hashlib.sha256()
    for row in sorted(json.dumps(list(document)) for document in documents):
        digest.update(f"{row}\n".encode())
    return "sha256:" + digest.hexdigest()


@contextmanager
def _lance_errors(table: str, version: str) -> Iterator[None]:
    """A version's files gone under a read (a `gc` pruning it meanwhile, or a damaged store) is a StoreError that
    says so, not a raw lance traceback."""
    try:
        yield
    except (OSError, ValueError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StoreError(
            f"cannot read the {table} of corpus version {version!r}: {first[:300]} (if `citekeeper gc` is pruning "
            "it, run again once gc is done; it never prunes the latest version)"
        ) from exc


T = TypeVar("T")


def reading_store(function: Callable[..., T]) -> Callable[..., T]:
    """`function(store, ...)` under the store's reader lease (CorpusStore.reading)."""

    @functools.wraps(function)
    def under_lease(store: CorpusStore, *args, **kwargs) -> T:
        with store.reading():
            return function(store, *args, **kwargs)

    return under_lease


def _each_table(work: Callable[[str], T]) -> dict[str, T]:
    """`work(table)` for chunks and documents at once, in two threads: Lance's reads and writes and Parquet's
    release the GIL (a commit's export is many small files: 1,000 parts written took 0.96 s serially, 0.61 s)."""
    with ThreadPoolExecutor(len(TABLES)) as pool:
        return dict(zip(TABLES, pool.map(work, TABLES), strict=True))


def _recording_doc_ids(rows: pa.Table | pa.RecordBatchReader, seen: list[pa.Array]) -> pa.RecordBatchReader:
    """`rows` as a reader that notes each batch's doc_ids in `seen` as it is read."""
    reader = rows.to_reader() if isinstance(rows, pa.Table) else rows

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            seen.append(batch.column("doc_id").cast(pa.string()))
            yield batch

    return pa.RecordBatchReader.from_batches(reader.schema, batches())


def validate_version_name(name: str) -> str:
    try:
        return safe_name(name, "corpus version name")
    except UnsafeName as exc:
        raise StoreError(str(exc)) from None


class CorpusStore:
    def __init__(
        self,
        root: Path | str,
        lance_uri: str | None = None,
        parquet_uri: str | None = None,
        storage_options: dict[str, str] | None = None,
        docs_per_part: int = DOCS_PER_PART,
    ):
        self.root = Path(root)
        self.docs_per_part = docs_per_part  # the chunk and document exports' part size (citekeeper.exports)
        self.layout = StoreLayout(self.root)
        self.lance_uri = lance_uri or str(self.layout.lance_dir)
        self.parquet_uri = parquet_uri.rstrip("/") if parquet_uri else None
        self.storage_options = dict(storage_options or {})
        self._lock = filelock.FileLock(str(self.layout.lock))
        self._offsets: dict[tuple[str, int], pl.DataFrame] = {}  # chunk_id -> offset per version (_chunk_offsets)

    def local_locations(self) -> list[Path]:
        """Every local directory the store owns: its root (the answer store too), and its LanceDB and Parquet
        locations when they are elsewhere on this machine (no output may be written into any)."""
        uris = [uri for uri in (self.lance_uri, self.parquet_uri) if uri is not None and not is_remote(uri)]
        return [self.root, *(Path(urlparse(uri).path if uri.startswith("file:") else uri) for uri in uris)]

    # ------------------------------------------------------------------ paths

    def export_folder(self, table: str, version: str) -> ExportFolder:
        """Where a version's export of `table` lives: a local folder, or one at parquet_uri when that is remote."""
        relative, parts = f"{table}/corpus_version={version}", self.layout.export_parts(table, version)
        if self.parquet_uri is None:
            return ExportFolder(table, self.layout.parquet_dir / relative, self.storage_options, parts)
        location = f"{self.parquet_uri}/{relative}"
        local = location if is_remote(location) else Path(location.removeprefix("file://"))
        return ExportFolder(table, local, self.storage_options, parts)

    def parquet_path(self, table: str, version: str) -> Path | str:
        """What a Parquet reader opens for a version's export: the errors file, or the glob of the chunk or
        document parts (in doc_id order by name; corpus_version is the folder's, as Hive partitioning reads it)."""
        name = "errors.parquet" if table == "errors" else "part-*.parquet"
        return self.export_folder(table, version).file(name)

    def read_export(self, table: str, version: str) -> pl.DataFrame:
        """The one reader of Parquet exports. Chunks and documents are exported for the latest version only:
        for any other version they are read from LanceDB time travel (the same rows)."""
        name = self.manifest(version).name  # UnknownVersion lists the known ones
        if table in TABLES and not self.has_export(table, name):
            return self._read_lance(table, name, None)
        folder = self.export_folder(table, name)
        if table == "errors":
            return to_frame(to_arrow(folder.read("errors.parquet"), READ_SCHEMAS[table]))
        rows = to_frame(folder.read_all(STORED_SCHEMAS[table]))
        return rows.with_columns(corpus_version=pl.lit(name)).select(READ_SCHEMAS[table].names).sort(SORT_KEYS[table])

    def has_export(self, table: str, version: str) -> bool:
        folder = self.export_folder(table, version)
        return folder.exists("errors.parquet") if table == "errors" else folder.complete()

    def remove_export(self, table: str, version: str) -> None:
        """Delete one export, its corpus_version=<v> folder and all; nothing to do when there is none."""
        self.export_folder(table, version).remove()

    def exported_versions(self, table: str) -> set[str]:
        """Names of the versions with a `table` export folder (whether or not the version still exists)."""
        return {
            name.removeprefix("corpus_version=")
            for name in self.export_folder(table, "x").siblings()
            if name.startswith("corpus_version=")
        }

    # ------------------------------------------------------------------ versions

    def versions(self) -> list[VersionManifest]:
        """Committed versions, oldest first."""
        if not self.layout.versions_dir.is_dir():
            return []
        manifests = [VersionManifest.from_file(p) for p in self.layout.versions_dir.glob("[!.]*.json")]
        return sorted(manifests, key=lambda m: (m.created_at, m.name))

    def manifest(self, name: str) -> VersionManifest:
        if not self.has_version(name):
            known = ", ".join(m.name for m in self.versions()) or "none yet"
            raise UnknownVersion(f"unknown corpus version {name!r:.80} in store {self.root} (known: {known})")
        return VersionManifest.from_file(self.layout.manifest(name))

    def has_version(self, name: str) -> bool:
        return is_safe_name(name) and self.layout.manifest(name).is_file()

    def latest(self) -> VersionManifest | None:
        versions = self.versions()
        return versions[-1] if versions else None

    def version_or_latest(self, version: str | None) -> str:
        """`version` checked to exist (UnknownVersion lists the known ones), or the latest version's name;
        ValueError when the store has none."""
        if version is not None:
            return self.manifest(version).name
        latest = self.latest()
        if latest is None:
            raise ValueError(f"store {self.root} has no corpus versions yet; run `citekeeper ingest` first")
        return latest.name

    def next_version_name(self) -> str:
        """v0001, v0002, ...: one past the highest generated name so far."""
        numbers = [int(m.group(1)) for v in self.versions() if (m := GENERATED_NAME.match(v.name))]
        return f"v{max(numbers, default=0) + 1:04d}"

    # ------------------------------------------------------------------ reading

    def read_chunks(
        self,
        version: str,
        columns: list[str] | None = None,
        doc_ids: Iterable[str] | None = None,
        chunk_ids: Iterable[str] | None = None,
    ) -> pl.DataFrame:
        """A version's chunks; with `doc_ids`, only those documents' chunks, found through the doc_id index;
        with `chunk_ids`, only those chunks."""
        return self._read_lance("chunks", self.manifest(version).name, columns, doc_ids, chunk_ids)

    def read_documents(
        self, version: str, columns: list[str] | None = None, doc_ids: Iterable[str] | None = None
    ) -> pl.DataFrame:
        return self._read_lance("documents", self.manifest(version).name, columns, doc_ids)

    def read_errors(self, version: str) -> pl.DataFrame:
        return self.read_export("errors", version)

    def _read_lance(
        self,
        table: str,
        version: str,
        columns: list[str] | None,
        doc_ids: Iterable[str] | None = None,
        chunk_ids: Iterable[str] | None = None,
    ) -> pl.DataFrame:
        """Time travel: check the table out at the tag named after the version."""
        wanted = list(columns or READ_SCHEMAS[table].names)
        stored = STORED_SCHEMAS[table].names
        unknown = [c for c in wanted if c not in READ_SCHEMAS[table].names]
        if unknown:
            raise StoreError(f"unknown {table} columns {unknown}; known: {READ_SCHEMAS[table].names}")
        read = [c for c in dict.fromkeys(SORT_KEYS[table] + wanted) if c in stored]
        wanted_ids = {"doc_id": doc_ids, "chunk_id": chunk_ids}
        # a null id names no row (a citation registration could not anchor has no chunk)
        id_lists = {column: list(set(ids) - {None}) for column, ids in wanted_ids.items() if ids is not None}
        if [] in id_lists.values():  # no ids asked for: nothing to open
            arrow = STORED_SCHEMAS[table].empty_table().select(read)
        else:
            with _lance_errors(table, version):
                arrow = self._read_tagged(table, version, read, id_lists)
        frame = to_frame(arrow).sort(SORT_KEYS[table])
        return frame.with_columns(corpus_version=pl.lit(version)).select(wanted)

    def _read_tagged(self, table: str, version: str, read: list[str], id_lists: dict[str, list[str]]) -> pa.Table:
        """The `read` columns of a version's rows (those of `id_lists` when given), from the table at its tag."""
        dataset = self.lance_at(table, version)
        had = set(dataset.schema.names)  # a version committed before a column existed lacks it
        if list(id_lists) == ["chunk_id"]:
            offsets = self._chunk_offsets(version, dataset).join(
                pl.DataFrame({"chunk_id": id_lists["chunk_id"]}), on="chunk_id", how="semi"
            )
            arrow = dataset.take(offsets["offset"].sort().to_numpy(), columns=[c for c in read if c in had])
        else:
            # Pyarrow expressions, not SQL: ids go in as values, nothing to quote; lance uses the doc_id index.
            in_ids = [pc.field(column).isin(ids) for column, ids in id_lists.items()]
            where = functools.reduce(operator.and_, in_ids) if in_ids else None
            arrow = dataset.to_table(columns=[c for c in read if c in had], filter=where)
        return to_arrow(arrow, pa.schema([STORED_SCHEMAS[table].field(c) for c in read]))

    def chunk_offsets(self, version: str) -> pl.DataFrame:
        """chunk_id, offset: where each chunk of `version` is in its table. Reading chunks in offset order reads
        each page of the table once."""
        name = self.manifest(version).name
        with _lance_errors("chunks", name):
            return self._chunk_offsets(name, self.lance_at("chunks", name))

    def _chunk_offsets(self, version: str, dataset) -> pl.DataFrame:
        """chunk_id -> row offset in the chunks of `version`: taking rows by offset costs about half an IN filter
        on chunk_id, whose cost grows with the ids asked for. Read once per version and kept for the two versions
        read last (a stale check reads its target and the cited version); keyed by the table version the tag points
        at too, since gc rewrites the rows of the versions it keeps."""
        key = (version, dataset.version)
        if key not in self._offsets:
            ids = to_frame(dataset.to_table(columns=["chunk_id"])).with_row_index("offset")
            self._offsets = {**dict(list(self._offsets.items())[-1:]), key: ids}
        return self._offsets[key]

    # ------------------------------------------------------------------ writing

    @contextmanager
    def reading(self, timeout: float = READ_LEASE_TIMEOUT) -> Iterator[None]:
        """A reader's shared lease on the store (re-entrant within a process): `gc`, which prunes versions, compacts
        the ones it keeps and removes the outputs of the pruned ones, waits until no reader holds one, and a reader
        waits while gc runs. Taken by the commands that read versions and write outputs beside them: stale, verify,
        repair."""
        if not self.root.is_dir():  # no store yet: nothing gc could take away, and no folder for a mistyped --store
            yield
            return
        with self._readers_lock("read", timeout, "`citekeeper gc` is pruning or compacting it"):
            yield

    @contextmanager
    def excluding_readers(self, timeout: float = DEFAULT_LOCK_TIMEOUT) -> Iterator[None]:
        """gc's side of `reading`: no reader holds a lease, and new ones wait, until the block ends."""
        with self._readers_lock("write", timeout, "readers are using it (a stale, verify or repair is running)"):
            yield

    @contextmanager
    def _readers_lock(self, mode: str, timeout: float, busy: str) -> Iterator[None]:
        """filelock's ReadWriteLock (SQLite's shared and exclusive locks: fcntl(2) locks, dropped by the kernel when
        their holder dies). A writer waiting holds new readers off, so readers cannot starve gc."""
        lock = filelock.ReadWriteLock(self.layout.readers_lock)
        try:
            (lock.acquire_read if mode == "read" else lock.acquire_write)(timeout)
        except filelock.Timeout:
            raise StoreLocked(
                f"corpus store {self.root}: {busy}; waited {timeout:g}s for {lock.lock_file}. Retry "
                "when it has finished."
            ) from None
        try:
            yield
        finally:
            lock.release()

    @contextmanager
    def lock(self, timeout: float = DEFAULT_LOCK_TIMEOUT) -> Iterator[None]:
        """Exclusive writer lock (re-entrant within one CorpusStore object)."""
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire(timeout=timeout)
        except filelock.Timeout:
            raise StoreLocked(
                f"corpus store {self.root} is locked by another writer (an ingest is running); waited "
                f"{timeout:g}s for {self._lock.lock_file}. Retry when it has finished."
            ) from None
        try:
            yield
        finally:
            self._lock.release()

    def commit_version(
        self,
        manifest: VersionManifest,
        *,
        replaced_doc_ids: Iterable[str],
        chunks: pa.Table | pa.RecordBatchReader,
        documents: pa.Table | pa.RecordBatchReader,
        errors: pa.Table,
    ) -> VersionManifest:
        """Write a new version on top of its parent and publish it; call under `lock()`.

        replaced_doc_ids: parent documents whose rows go (changed or removed); chunks/documents: the rows
        to add (STORED_SCHEMAS), a table or a reader that LanceDB consumes a batch at a time (a commit then
        holds one batch of them, not all); errors: INGEST_ERRORS rows. Every step before the manifest is redone
        from the parent's table version by a re-run, so a crash anywhere leaves no trace in any version.
        """
        name = validate_version_name(manifest.name)
        if self.has_version(name):
            raise VersionExists(f"corpus version {name!r} already exists in {self.root}; versions are immutable")
        parent = self.manifest(manifest.parent) if manifest.parent else None
        previous = self.latest()
        replaced = sorted(set(replaced_doc_ids))
        added: list[pa.Array] = []  # the doc_ids of the documents' rows, as LanceDB takes them
        rows = {"chunks": chunks, "documents": _recording_doc_ids(documents, added)}
        written = self._write_tables(name, parent, replaced, rows)
        lance_versions = {table: dataset.version for table, dataset in written.items()}
        counts = {table: dataset.count_rows() for table, dataset in written.items()}
        self._export_parquet(name, parent, {*replaced, *pa.chunked_array(added, pa.string()).to_pylist()}, errors)
        committed = VersionManifest(
            **{
                **asdict(manifest),
                "created_at": datetime.now(UTC).isoformat(),
                "n_documents": counts["documents"],
                "n_chunks": counts["chunks"],
                "n_errors": errors.num_rows,
                "lance_versions": lance_versions,
            }
        )
        self.write_manifest(committed)
        # Only the latest version keeps chunk and document exports; the one it replaces goes once this version
        # exists (a crash in between leaves an extra export, which the next commit or `gc` removes).
        for old in {v.name for v in (previous, parent) if v is not None} - {name}:
            for table in TABLES:
                self.remove_export(table, old)
        return committed

    def _write_tables(
        self,
        name: str,
        parent: VersionManifest | None,
        replaced: list[str],
        rows: dict[str, pa.Table | pa.RecordBatchReader],
    ) -> dict[str, LanceDataset]:
        """Each table's version `name`: the parent's rows but those of `replaced`, and `rows`, indexed and tagged;
        the two tables at once."""

        def write_table(table: str) -> LanceDataset:
            dataset = self._lance_at_parent(table, parent)
            delete_docs(dataset, replaced)
            add_rows(dataset, rows[table], STORED_SCHEMAS[table])
            index_doc_ids(dataset)
            if name in dataset.tags.list():  # left by a run that died before its manifest
                dataset.tags.delete(name)
            dataset.tags.create(name, dataset.version)
            return dataset

        return _each_table(write_table)

    def lance_at(self, table: str, version: str | int | None) -> LanceDataset:
        """One of the store's LanceDB tables (chunks, documents) as a Lance dataset, at a corpus version's tag, at
        a table version number, or (None) at its head. Opened by pylance itself, not by lancedb, whose import costs
        ~1 s of every run (its namespace client's pydantic models)."""
        import lance  # here, not at module level: the CLI and the Dagster code location import this module

        return lance.dataset(self._lance_location(table), version=version, storage_options=self.storage_options or None)

    def lance_head(self, table: str) -> LanceDataset | None:
        """The table's latest table version; None while the table does not exist."""
        try:
            return self.lance_at(table, None)
        except ValueError as exc:  # lance's "Dataset at path ... was not found"
            if "not found" in str(exc):
                return None
            raise

    def _lance_location(self, table: str) -> str:
        return f"{self.lance_uri.rstrip('/')}/{table}.lance"

    def _lance_at_parent(self, table: str, parent: VersionManifest | None) -> LanceDataset:
        """The table's head as of the parent version, undoing whatever a crashed run appended after it."""
        import lance

        dataset = self.lance_head(table)  # as it is: its schema may predate columns added since
        if dataset is None:
            empty, options = STORED_SCHEMAS[table].empty_table(), self.storage_options or None
            dataset = lance.write_dataset(empty, self._lance_location(table), mode="create", storage_options=options)
        if parent is None:
            if dataset.count_rows():
                dataset.delete("true")
        elif dataset.version != parent.lance_versions[table]:
            dataset = restored(dataset, parent.lance_versions[table])
        missing = [field for field in STORED_SCHEMAS[table] if field.name not in dataset.schema.names]
        if missing:  # a store from before a column existed: null in its older rows, as its readers take it
            dataset.add_columns(pa.schema(missing))
        return dataset

    def _export_parquet(
        self, version: str, parent: VersionManifest | None, changed_doc_ids: set[str], errors: pa.Table
    ) -> None:
        """The new version's exports: chunks and documents (what the latest version offers as files) and its
        ingest errors (kept for every version: no other copy exists). The parts that hold no changed document are
        the parent's, when its export is there in balanced parts."""
        for table in TABLES:  # a crashed run's leftovers: this version does not exist yet
            self.export_folder(table, version).remove()
        layout = self._reusable_layout(parent)
        if parent is None or layout is None:
            self.export_tables(version)
        else:
            self._export_change(version, parent.name, layout, changed_doc_ids)
        errors_folder = self.export_folder("errors", version)
        errors_folder.write_file("errors.parquet", READ_SCHEMAS["errors"], to_frame(errors).sort(SORT_KEYS["errors"]))

    def _reusable_layout(self, parent: VersionManifest | None) -> PartLayout | None:
        if parent is None:
            return None
        layouts = {self.export_folder(table, parent.name).layout() for table in TABLES}
        layout = layouts.pop() if len(layouts) == 1 else None
        return layout if layout is not None and layout.balanced(self.docs_per_part) else None

    def export_tables(self, version: str) -> None:
        """Export a version's chunks and documents whole, laid out afresh in parts."""
        documents = self.lance_at("documents", version)
        doc_ids = to_frame(documents.to_table(columns=["doc_id"]))["doc_id"].sort()
        layout = PartLayout.of(doc_ids, self.docs_per_part)
        parts = range(len(layout.lows))
        for table in TABLES:
            dataset = self.lance_at(table, version)
            rows = (to_arrow(batch, STORED_SCHEMAS[table]) for batch in sorted_batches(dataset, SORT_KEYS[table]))
            write_parts(self.export_folder(table, version), layout, STORED_SCHEMAS[table], parts, rows)
        for table in TABLES:
            self.export_folder(table, version).write_layout(layout)

    def _export_change(self, version: str, parent: str, layout: PartLayout, changed_doc_ids: set[str]) -> None:
        """Rewrite the parts that hold a changed document, their rows read through the doc_id index by the ids the
        parent's parts and the change name; link the others."""
        changed = pl.DataFrame({"doc_id": sorted(changed_doc_ids)}, schema={"doc_id": pl.String})
        changed = changed.with_columns(part=layout.part_of(changed["doc_id"]))
        touched = sorted(set(changed["part"]))
        parent_documents = self.export_folder("documents", parent)
        counts: dict[int, int] = {}
        for start in range(0, len(touched), PARTS_PER_READ):
            group = touched[start : start + PARTS_PER_READ]
            doc_ids = set(changed.filter(pl.col("part").is_in(group))["doc_id"])
            named = parent_documents.read_files([PartLayout.file_name(part) for part in group], ["doc_id"])
            doc_ids.update(named["doc_id"].to_pylist())
            rewrite = functools.partial(self._rewrite_parts, version=version, layout=layout, parts=group)
            written = _each_table(functools.partial(rewrite, doc_ids=sorted(doc_ids)))
            counts |= written["documents"]
        untouched = [PartLayout.file_name(part) for part in sorted(set(range(len(layout.lows))) - set(touched))]
        _each_table(lambda table: self.export_folder(table, version).link(self.export_folder(table, parent), untouched))
        for table in TABLES:
            self.export_folder(table, version).write_layout(layout.with_counts(counts))

    def _rewrite_parts(
        self, table: str, version: str, layout: PartLayout, parts: list[int], doc_ids: list[str]
    ) -> dict[int, int]:
        """The export `parts` of `table`, from the version's rows of `doc_ids` (every document those parts hold)."""
        dataset = self.lance_at(table, version)
        had = [name for name in STORED_SCHEMAS[table].names if name in dataset.schema.names]
        rows = dataset.to_table(columns=had, filter=pc.field("doc_id").isin(doc_ids))
        ordered = to_arrow(rows, STORED_SCHEMAS[table]).sort_by([(key, "ascending") for key in SORT_KEYS[table]])
        return write_parts(self.export_folder(table, version), layout, STORED_SCHEMAS[table], parts, [ordered])

    def write_manifest(self, manifest: VersionManifest) -> None:
        """Last step of a commit, atomic: the version exists from this rename on."""
        atomic_write_text(self.layout.manifest(manifest.name), manifest.to_json())
