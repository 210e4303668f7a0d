"""Ingest: a source tree -> one immutable corpus version, re-parsing only the documents whose bytes changed. Two
steps, so that parsing can be spread over shards while one writer commits: `stage` (a shard's files, no lock)
and `commit` (under the writer lock); `ingest()` is both for one shard (docs/ingest.md, "Sharded ingest")."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from citekeeper import cycle_collector, schema
from citekeeper.files import atomic_write_text
from citekeeper.identity import sha256_hex
from citekeeper.scope import AGGREGATE_MARK, aggregate
from citekeeper.sharding import Shard
from citekeeper.store import (
    DEFAULT_LOCK_TIMEOUT,
    SORT_KEYS,
    STORED_SCHEMAS,
    CorpusStore,
    StoreError,
    VersionExists,
    VersionManifest,
    corpus_hash,
    validate_version_name,
)
from citekeeper.tables import to_arrow, to_frame, write_parquet
from parsers.discover import Discovery, discover, duplicate_doc_id_reason, read_unread
from parsers.parse_pool import PoolWarmup, Progress, iter_outcomes
from parsers.records import (
    RUN_SETTINGS,
    SOURCE_FIELD_NAMES,
    Chunk,
    IngestError,
    ParseConfig,
    ParsedDocument,
    SkippedDocument,
    SourceFile,
)
from parsers.sources import cache_key, describe, open_source
from parsers.sources.base import ListedSource
from parsers.sources.listing import ReadObjects

STAGE_DONE = "stage.json"  # written last: a shard without it is incomplete
STAGED_TABLES = ("chunks", "documents")  # parse results: written and read back in batches
# Documents parsed per staged row group, and staged rows read per batch at commit: what a stage holds of parse
# results, and a commit of staged rows, whatever the size of the tree.
STAGE_BATCH_DOCS = 500
# A batch is also written once its documents' text passes this (a few very large documents).
STAGE_BATCH_BYTES = 64 * 2**20
# What the tree's fingerprint covers of each document: its bytes and everything a sidecar, front matter or
# the settings say of it (scope, title, source fields). SourceFile attributes, and columns of a shard's
# sources.parquet.
TREE_FIELDS = ("doc_id", "source_path", "content_hash", "access_scope", "title", "source_fields_key")
STAGED_SOURCES = (
    schema.STAGED_SOURCES.append(pa.field("access_scope", pa.string(), nullable=False))
    .append(
        pa.field("title", pa.string())  # explicit (sidecar or front matter); null when the parser finds one
    )
    .append(pa.field("source_fields_key", pa.string()))
)  # SourceFields.fingerprint(): null when none is given
# A parent's document, as far as reuse is concerned.
REUSE_COLUMNS = [
    "doc_id",
    "doc_content_hash",
    "source_path",
    "access_scope",
    "title",
    "front_matter",
    *SOURCE_FIELD_NAMES,
]
CHUNK_FIELDS = [f.name for f in fields(Chunk)]  # a chunk's own columns of the chunks table


class StrictIngestFailed(StoreError):
    """--strict and some files were quarantined; no version was committed."""


@dataclass(frozen=True)
class StageResult:
    version: str
    parent: str | None
    shard: Shard
    n_parsed: int
    n_reused: int
    n_skipped: int
    errors: list[IngestError]
    path: Path


@dataclass
class IngestResult:
    manifest: VersionManifest  # the new version, or the existing one the tree equals
    created: bool
    equals: str | None = None  # set when no version was created: the version the tree equals
    n_parsed: int = 0
    n_reused: int = 0
    n_skipped: int = 0  # files include/exclude left out
    no_text: list[str] = field(default_factory=list)  # source_paths skipped with nothing to cite
    removed_doc_ids: list[str] = field(default_factory=list)
    errors: list[IngestError] = field(default_factory=list)
    durations_s: dict[str, float] = field(default_factory=dict)
    reparse_reason: str | None = None  # why the parent's documents were not reused, when they were not
    # no_text paths and removed doc_ids of aggregate_only documents: never named where the result is shown
    aggregate_names: frozenset[str] = frozenset()

    def shared(self) -> IngestResult:
        """The result as printed or recorded as metadata: aggregate_only documents counted, not named."""

        def named(names: list[str]) -> list[str]:
            return [AGGREGATE_MARK if name in self.aggregate_names else name for name in names]

        return replace(
            self,
            no_text=named(self.no_text),
            removed_doc_ids=named(self.removed_doc_ids),
            errors=[error.shared() for error in self.errors],
        )

    @property
    def n_removed(self) -> int:
        return len(self.removed_doc_ids)

    @property
    def n_quarantined(self) -> int:
        return len(self.errors)


def parse_settings(config: ParseConfig) -> dict:
    """The settings that shape what a document parses into (all but RUN_SETTINGS), as JSON values."""
    settings = json.loads(json.dumps(asdict(config)))  # tuples as JSON lists, as the manifest stores them
    return {key: value for key, value in settings.items() if key not in RUN_SETTINGS}


def config_hash(config: ParseConfig) -> str:
    return sha256_hex(json.dumps(parse_settings(config), sort_keys=True).encode())


def reparse_reason(parent: VersionManifest | None, config: ParseConfig) -> str | None:
    """Why no document of `parent` can be reused under `config` (None when they can): the parse settings
    that differ. Manifests written before the split recorded every setting; only parse settings count."""
    if parent is None:
        return None
    now, before = parse_settings(config), parent.parse_settings
    if not before:
        return (
            f"parse settings changed since {parent.name} (text rules now version {config.text_rules}): "
            "every document is parsed again"
        )
    changed = [key for key in sorted(now) if before.get(key) != now[key]]
    if not changed:
        return None
    listing = ", ".join(f"{key} {before.get(key)!r} -> {now[key]!r}" for key in changed)
    return f"parse settings changed since {parent.name} ({listing}): every document is parsed again"


def tree_hash(sources: list[SourceFile]) -> str:
    """The corpus_hash of a discovered tree, as commit computes it from the staged shards."""
    return corpus_hash(_tree_row(tuple(getattr(source, name) for name in TREE_FIELDS)) for source in sources)


def _tree_row(values: tuple) -> tuple:
    """A document's TREE_FIELDS values as corpus_hash takes them: a document no source field is given for
    hashes as it did before they existed, so an unchanged tree of such documents still equals its version."""
    return values[:-1] if values[-1] is None else values


def ingest(
    source: Path | str | ListedSource,
    store: CorpusStore,
    version: str | None = None,
    config: ParseConfig = ParseConfig(),
    strict: bool = False,
    progress: Progress | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    batch_size: int = STAGE_BATCH_DOCS,
) -> IngestResult:
    """Ingest a source (a folder, an object-store URL, git:PATH@REF: parsers.sources) as a new corpus version
    (named, or the next generated `vNNNN`)."""
    with store.lock(lock_timeout):
        name = version or store.next_version_name()
        started = time.perf_counter()
        try:
            stage(source, store, name, config=config, progress=progress, batch_size=batch_size)
            staged_s = time.perf_counter() - started
            result = commit(store, name, strict=strict, lock_timeout=lock_timeout, batch_size=batch_size)
        except BaseException:  # a full disk, an interrupt: what this ingest staged is of no use to the next one
            shutil.rmtree(store.layout.staging_dir / name, ignore_errors=True)
            raise
    result.durations_s = {"stage": staged_s, **result.durations_s}
    return result


def stage(
    source: Path | str | ListedSource,
    store: CorpusStore,
    version: str,
    *,
    shard: Shard = Shard(),
    config: ParseConfig = ParseConfig(),
    progress: Progress | None = None,
    batch_size: int = STAGE_BATCH_DOCS,
) -> StageResult:
    """Parse this shard's new and changed documents into the staging area of `version`, holding the parse
    results of at most `batch_size` documents at a time (fewer past STAGE_BATCH_BYTES of text); for the whole
    tree it holds a row of metadata per file."""
    validate_version_name(version)
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    opened = _opened(source, store)
    read_objects = ReadObjects(store.layout.read_objects_dir(cache_key(opened)))
    out = store.layout.staging_dir / version / shard.dirname
    shutil.rmtree(out, ignore_errors=True)  # leftovers of an interrupted stage of this shard
    spool_dir = (out / "objects").absolute()  # a listed source's bytes, for the parser
    parent = store.latest()
    warmup = PoolWarmup(config)  # the pool's start overlaps discovery, once what it reads needs the pool
    found = discover(opened, config, shard.owns, read_objects, spool_dir, on_read=warmup.read)
    sources = found.sources
    reused = _unchanged_doc_ids(store, parent, config, sources)
    settings = config_hash(config)
    no_text = {s.source_path for s in sources if _parsed_no_text(found, read_objects, s.source_path, settings)}
    to_parse = [s for s in sources if s.doc_id not in reused and s.source_path not in no_text]
    parse_errors = read_unread(found, to_parse, spool_dir, config.max_file_bytes)
    unreadable = {e.source_path for e in parse_errors}
    to_parse = [s for s in to_parse if s.source_path not in unreadable]

    ingested_at = datetime.now(UTC)
    with _StagedWriter(out, ingested_at, batch_size) as staged:
        for _, outcome in iter_outcomes(to_parse, config, progress):
            if isinstance(outcome, ParsedDocument):
                staged.add(outcome)
            elif isinstance(outcome, SkippedDocument):
                no_text.add(outcome.source_path)
            else:
                parse_errors.append(outcome)
    scopes = {source.source_path: source.access_scope for source in sources}
    parse_errors = sorted(
        (replace(e, access_scope=scopes.get(e.source_path)) for e in parse_errors), key=lambda e: e.source_path
    )
    errors = found.errors + parse_errors
    write_parquet(_error_rows(errors, version, ingested_at), schema.INGEST_ERRORS, out / "errors.parquet")
    failed = {e.source_path for e in parse_errors}
    write_parquet(_source_rows(sources, reused, failed, no_text), STAGED_SOURCES, out / "sources.parquet")
    parent_name = parent.name if parent else None
    done = {
        "version": version,
        "parent": parent_name,
        "config_hash": settings,
        "parse_settings": parse_settings(config),
        "reparse_reason": reparse_reason(parent, config),
        "source_dir": describe(opened),
        "source_revision": None if isinstance(opened, Path) else opened.revision,
        "n_stamp_reused": len(found.unread),
        "shard": asdict(shard),
        "n_skipped": found.n_skipped,
    }
    for source_path in no_text & found.listed.keys():
        read_objects.mark_no_text(*found.listed[source_path], settings)
    read_objects.save(shard.dirname)
    atomic_write_text(out / STAGE_DONE, json.dumps(done, indent=2))  # the shard's done marker: whole or absent
    return StageResult(version, parent_name, shard, staged.n_documents, len(reused), found.n_skipped, errors, out)


def commit(
    store: CorpusStore,
    version: str,
    *,
    n_shards: int = 1,
    strict: bool = False,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    batch_size: int = STAGE_BATCH_DOCS,
) -> IngestResult:
    """Merge the staged shards of `version` into a committed corpus version (or report the one it equals),
    reading their chunks and documents `batch_size` rows at a time."""
    started = time.perf_counter()
    with store.lock(lock_timeout):
        staged = _without_cross_shard_duplicates(_load_staged(store, version, n_shards), version)
        errors = _ingest_errors(staged["errors"])
        if strict and errors:
            shutil.rmtree(store.layout.staging_dir / version, ignore_errors=True)
            listing = "\n".join(f"  {e.source_path}: {e.stage}: {e.reason}" for e in map(IngestError.shared, errors))
            raise StrictIngestFailed(f"--strict: {len(errors)} file(s) quarantined, no version committed:\n{listing}")
        sources = staged["sources"]
        tree = corpus_hash(map(_tree_row, sources.select(TREE_FIELDS).iter_rows()))
        documents = set(sources.filter(pl.col("outcome").is_in(["parsed", "reused"]))["doc_id"])
        no_text = sources.filter(pl.col("outcome") == "no_text")["source_path"].sort().to_list()
        aggregate_names = _aggregate_names(sources)
        equal = _equal_version(store, version, tree, staged["config_hash"], documents)
        if equal is not None:
            shutil.rmtree(store.layout.staging_dir / version, ignore_errors=True)
            return IngestResult(
                equal,
                created=False,
                equals=equal.name,
                n_reused=len(documents),
                n_skipped=staged["n_skipped"],
                no_text=no_text,
                errors=errors,
                aggregate_names=aggregate_names,
            )
        if staged["parent"]:  # one read of the parent's documents: each read of a table costs ~5-10 ms
            parent_documents = store.read_documents(staged["parent"], columns=["doc_id", "source_path", "access_scope"])
            parent_ids = parent_documents["doc_id"].to_list()
            aggregate_names |= _aggregate_names(parent_documents)
        else:
            parent_ids = []
        reused_ids = sources.filter(pl.col("outcome") == "reused")["doc_id"]
        removed = sorted(set(parent_ids) - set(sources["doc_id"]))
        n_parsed = sources.filter(pl.col("outcome") == "parsed").height
        manifest = VersionManifest(
            name=version,
            parent=staged["parent"],
            created_at="",
            n_documents=0,
            n_chunks=0,
            n_errors=0,
            corpus_hash=tree,
            config_hash=staged["config_hash"],
            parse_settings=staged["parse_settings"],
            n_parsed=n_parsed,
            n_reused=reused_ids.len(),
            n_removed=len(removed),
            n_no_text=len(no_text),
            source_dir=staged["source_dir"],
            source_revision=staged["source_revision"],
            n_stamp_reused=staged["n_stamp_reused"],
            n_hashed=sources.height - staged["n_stamp_reused"],
        )
        committed = store.commit_version(
            manifest,
            replaced_doc_ids=set(parent_ids) - set(reused_ids),
            chunks=staged_rows(staged, "chunks", batch_size),
            documents=staged_rows(staged, "documents", batch_size),
            errors=staged["errors"],
        )
        shutil.rmtree(store.layout.staging_dir / version, ignore_errors=True)
    return IngestResult(
        committed,
        created=True,
        n_parsed=n_parsed,
        n_reused=reused_ids.len(),
        n_skipped=staged["n_skipped"],
        no_text=no_text,
        removed_doc_ids=removed,
        errors=errors,
        aggregate_names=aggregate_names,
        durations_s={"commit": time.perf_counter() - started},
        reparse_reason=staged["reparse_reason"],
    )


# ---------------------------------------------------------------------- staging


def _opened(source: Path | str | ListedSource, store: CorpusStore) -> Path | ListedSource:
    """The source opened with the store's storage options (one set of credentials for both); a folder resolved."""
    opened = open_source(source, store.storage_options)
    if isinstance(opened, ListedSource):
        return opened
    if not opened.is_dir():
        raise FileNotFoundError(f"source directory {source} does not exist or is not a directory")
    return opened.resolve()


def _unchanged_doc_ids(
    store: CorpusStore, parent: VersionManifest | None, config: ParseConfig, sources: list[SourceFile]
) -> set[str]:
    """The doc_ids of `sources` whose parent rows are what parsing them would give: the same bytes,
    source_path, access_scope and source fields, parsed under the same parse settings. Fails closed on the scope:
    rows are reused only under the very access_scope the source has now. A stored title may be the parser's (the
    first heading), so only an explicit title is compared: one taken out of a sidecar while the bytes stay is
    not seen here (the version's corpus_hash does see it). The front matter comes from the bytes, so it differs
    only where the parent was committed before the column existed: such a document is parsed once more. Source
    fields change with a sidecar or a setting while the bytes stay: such a document is parsed again, so its rows
    carry the new fields (its chunks, ids and text hashes come out as before). One join of two frames of
    metadata, no row per document as Python objects."""
    if parent is None or not sources or reparse_reason(parent, config) is not None:
        return set()
    previous = store.read_documents(parent.name, columns=REUSE_COLUMNS)
    with cycle_collector.paused():  # a few values per document, none in a cycle
        columns = {name: [getattr(s, name) for s in sources] for name in _REUSE_ATTRIBUTES}
        given = [s.source_fields.columns() for s in sources]
        columns |= {name: [fields[name] for fields in given] for name in SOURCE_FIELD_NAMES}
        current = to_frame(pa.table(columns, schema=_REUSE_SCHEMA))
    same = current.join(previous, on="doc_id", how="inner", suffix="_parent").filter(
        (pl.col("content_hash") == pl.col("doc_content_hash"))
        & (pl.col("source_path") == pl.col("source_path_parent"))
        & (pl.col("access_scope") == pl.col("access_scope_parent"))
        & (pl.col("title").is_null() | (pl.col("title") == pl.col("title_parent")).fill_null(False))
        & pl.col("front_matter").eq_missing(pl.col("front_matter_parent"))
        & pl.all_horizontal(pl.col(name).eq_missing(pl.col(f"{name}_parent")) for name in SOURCE_FIELD_NAMES)
    )
    return set(same["doc_id"])


def _parsed_no_text(found: Discovery, read_objects: ReadObjects, source_path: str, settings: str) -> bool:
    """A listed document that parsed into no text before, under these settings and with these bytes."""
    listed = found.listed.get(source_path)
    return listed is not None and read_objects.parsed_no_text(*listed, settings)


# What _unchanged_doc_ids compares of a source: these SourceFile attributes, and its source fields.
_REUSE_ATTRIBUTES = ("doc_id", "content_hash", "source_path", "access_scope", "title", "front_matter")
_REUSE_SCHEMA = pa.schema([pa.field(name, pa.string()) for name in _REUSE_ATTRIBUTES] + list(schema.SOURCE_FIELDS))


class _StagedWriter:
    """A shard's parsed documents, written to its chunks.parquet and documents.parquet as they come: a row
    group per `batch_size` documents (or fewer, past STAGE_BATCH_BYTES of text), so a stage holds one batch of
    parse results, never the shard's. The files are complete once the stage writes STAGE_DONE."""

    def __init__(self, out: Path, ingested_at: datetime, batch_size: int):
        out.mkdir(parents=True, exist_ok=True)
        self._ingested_at, self._batch_size = ingested_at, batch_size
        self._writers = {
            name: pq.ParquetWriter(out / f"{name}.parquet", STORED_SCHEMAS[name]) for name in STAGED_TABLES
        }
        self._batch: list[ParsedDocument] = []
        self._batch_bytes = 0
        self.n_documents = 0

    def __enter__(self) -> _StagedWriter:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        try:
            if exc_type is None:
                self._flush()
        finally:
            for writer in self._writers.values():
                writer.close()

    def add(self, doc: ParsedDocument) -> None:
        self._batch.append(doc)
        self.n_documents += 1
        self._batch_bytes += 2 * len(doc.text)  # the document's text, and its chunks' copy of it
        if len(self._batch) >= self._batch_size or self._batch_bytes >= STAGE_BATCH_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self._batch:
            self._writers["chunks"].write_table(chunk_table(self._batch, self._ingested_at))
            self._writers["documents"].write_table(document_table(self._batch, self._ingested_at))
        self._batch, self._batch_bytes = [], 0


def _document_fields(doc: ParsedDocument, ingested_at: datetime) -> dict:
    """The columns a document and each of its chunks share."""
    return {
        "doc_id": doc.source.doc_id,
        "doc_content_hash": doc.source.content_hash,
        "source_path": doc.source.source_path,
        "title": doc.title,
        "filetype": doc.source.filetype,
        "access_scope": doc.source.access_scope,
        "ingested_at": ingested_at,
        "email_subject": doc.email.subject if doc.email else None,
        "email_from": doc.email.sender if doc.email else None,
        "email_date": doc.email.sent_at if doc.email else None,
        **doc.source.source_fields.columns(),
    }


def chunk_table(docs: list[ParsedDocument], ingested_at: datetime) -> pa.Table:
    """A row per chunk: its own fields and its document's, built column by column (dataclasses.asdict copies
    every list of every chunk deeply, which made it most of a stage's own CPU time)."""
    columns: dict[str, list] = {name: [] for name in STORED_SCHEMAS["chunks"].names}
    own = [name for name in CHUNK_FIELDS if name in columns]
    for doc in docs:
        shared = [
            (columns[name], value) for name, value in _document_fields(doc, ingested_at).items() if name in columns
        ]
        for chunk in doc.chunks:
            for name in own:
                columns[name].append(getattr(chunk, name))
            for column, value in shared:
                column.append(value)
    return pa.table(columns, schema=STORED_SCHEMAS["chunks"])


def document_table(docs: list[ParsedDocument], ingested_at: datetime) -> pa.Table:
    columns: dict[str, list] = {name: [] for name in STORED_SCHEMAS["documents"].names}
    for doc in docs:
        row = {
            **_document_fields(doc, ingested_at),
            "size_bytes": doc.source.size_bytes,
            "n_chunks": len(doc.chunks),
            "text": doc.text,
            "encoding": doc.encoding,
            "front_matter": doc.source.front_matter,
        }
        for name, column in columns.items():
            column.append(row[name])
    return pa.table(columns, schema=STORED_SCHEMAS["documents"])


def _error_rows(errors: list[IngestError], version: str, occurred_at: datetime) -> pa.Table:
    rows = [{**asdict(e), "corpus_version": version, "occurred_at": occurred_at} for e in errors]
    return pa.Table.from_pylist(rows, schema=schema.INGEST_ERRORS)


def _source_rows(sources: list[SourceFile], reused: set[str], failed: set[str], no_text: set[str]) -> pa.Table:
    """A row per source with its outcome: reused (its parent rows stay), failed (quarantined), no_text (skipped:
    nothing to cite) or parsed."""
    columns = {name: [getattr(s, name) for s in sources] for name in TREE_FIELDS}
    columns["outcome"] = [
        "reused"
        if s.doc_id in reused
        else "failed"
        if s.source_path in failed
        else "no_text"
        if s.source_path in no_text
        else "parsed"
        for s in sources
    ]
    return pa.table(columns, schema=STAGED_SOURCES)


def _load_staged(store: CorpusStore, version: str, n_shards: int) -> dict:
    """All n shards of a staged version, checked complete and staged against the same parent and settings:
    their settings, sources and errors (a row per file), and where their chunks and documents are, which
    staged_rows reads in batches."""
    shards = [store.layout.staging_dir / version / Shard(i, n_shards).dirname for i in range(n_shards)]
    missing = [s.name for s in shards if not (s / STAGE_DONE).is_file()]
    if missing:
        raise StoreError(f"cannot commit {version!r}: shards not staged (or staging interrupted): {', '.join(missing)}")
    stages = [json.loads((s / STAGE_DONE).read_text()) for s in shards]
    if len({(s["parent"], s["config_hash"]) for s in stages}) > 1:
        raise StoreError(f"cannot commit {version!r}: its shards were staged against different parents or settings")
    latest = store.latest()
    if stages[0]["parent"] != (latest.name if latest else None):
        raise StoreError(
            f"cannot commit {version!r}: staged against parent {stages[0]['parent']!r}, but the latest version "
            f"is now {latest.name if latest else None!r}; stage it again"
        )

    def read(name: str, target: pa.Schema) -> pa.Table:
        return pa.concat_tables([to_arrow(pq.read_table(s / name), target) for s in shards])

    return {
        **{k: stages[0][k] for k in ("parent", "config_hash", "parse_settings", "reparse_reason", "source_dir")},
        "source_revision": stages[0].get("source_revision"),
        "n_skipped": sum(s["n_skipped"] for s in stages),
        "n_stamp_reused": sum(s.get("n_stamp_reused", 0) for s in stages),
        "sources": to_frame(read("sources.parquet", STAGED_SOURCES)),
        "errors": read("errors.parquet", schema.INGEST_ERRORS),
        "shards": shards,
        "dropped": [],  # source_paths whose staged rows are left out (_without_cross_shard_duplicates)
    }


def staged_rows(staged: dict, table: str, batch_size: int = STAGE_BATCH_DOCS) -> pa.RecordBatchReader:
    """A staged table (chunks or documents) of every shard, read `batch_size` rows at a time, without the
    rows of the files _without_cross_shard_duplicates dropped."""
    target = STORED_SCHEMAS[table]
    dropped = pa.array(staged["dropped"], pa.string())

    def batches() -> Iterator[pa.RecordBatch]:
        for shard in staged["shards"]:
            for batch in pq.ParquetFile(shard / f"{table}.parquet").iter_batches(batch_size=batch_size):
                rows = to_arrow(pa.Table.from_batches([batch]), target)
                if len(dropped):
                    rows = rows.filter(pc.invert(pc.is_in(rows["source_path"], dropped)))
                yield from rows.to_batches()

    return pa.RecordBatchReader.from_batches(target, batches())


def _without_cross_shard_duplicates(staged: dict, version: str) -> dict:
    """Files in two shards that claim one doc_id (by sidecar or front matter): as in a single walk, the first
    source_path keeps it and the others are quarantined, their staged rows and other errors dropped."""
    owner: dict[str, str] = {}  # doc_id -> the source_path keeping it
    losers: dict[str, IngestError] = {}
    for doc_id, source_path, scope in (
        staged["sources"].sort("source_path").select("doc_id", "source_path", "access_scope").iter_rows()
    ):
        if doc_id in owner:
            reason = duplicate_doc_id_reason(doc_id, owner[doc_id])
            losers[source_path] = IngestError(source_path, "discover", "DuplicateDocId", reason, scope)
        else:
            owner[doc_id] = source_path
    if not losers:
        return staged

    def kept(table: pa.Table) -> pa.Table:
        return table.filter(pc.invert(pc.is_in(table["source_path"], pa.array(list(losers)))))

    duplicates = _error_rows(list(losers.values()), version, datetime.now(UTC))
    return staged | {
        "sources": staged["sources"].filter(~pl.col("source_path").is_in(list(losers))),
        "errors": pa.concat_tables([kept(staged["errors"]), duplicates]),
        "dropped": sorted(losers),  # their chunks and documents: left out as staged_rows reads them
    }


# ---------------------------------------------------------------------- committing


def _equal_version(
    store: CorpusStore, version: str, tree_hash: str, settings: str, documents: set[str]
) -> VersionManifest | None:
    """The version an unchanged tree equals: `version` itself if it exists (else it is a name clash), or
    the latest version. Unchanged: the same tree (corpus_hash) under the same parse settings, and the same of
    its documents parsed: one that failed there and parses now (a longer parse_timeout_s, a file readable
    again) makes a new version."""
    if store.has_version(version):
        existing = store.manifest(version)
        same_tree = (existing.corpus_hash, existing.config_hash) == (tree_hash, settings)
        if same_tree and set(_parent_doc_ids(store, version)) == documents:
            return existing
        difference = (
            "documents that failed there parse now"
            if same_tree
            else f"corpus_hash {existing.corpus_hash}, this tree {tree_hash}"
        )
        raise VersionExists(
            f"corpus version {version!r} already exists with different content ({difference}); versions are "
            "immutable, pick a new name"
        )
    latest = latest_if_equal(store, tree_hash, settings)
    return latest if latest is not None and set(_parent_doc_ids(store, latest.name)) == documents else None


def unchanged_since(
    store: CorpusStore, source: Path | str | ListedSource, config: ParseConfig
) -> VersionManifest | None:
    """The latest version when its documents equal the source's (bytes, names, scopes, titles): reads and hashes
    the documents (of a listed source, only those whose stamps are new) but parses nothing."""
    if store.latest() is None:
        return None
    opened = _opened(source, store)
    read_objects = ReadObjects(store.layout.read_objects_dir(cache_key(opened)))
    sources = discover(opened, config, read_objects=read_objects).sources
    return latest_if_equal(store, tree_hash(sources), config_hash(config))


def latest_if_equal(store: CorpusStore, tree_hash: str, settings: str) -> VersionManifest | None:
    """The latest version when it holds exactly this tree (corpus_hash) under these parse settings."""
    latest = store.latest()
    if latest is not None and (latest.corpus_hash, latest.config_hash) == (tree_hash, settings):
        return latest
    return None


def _aggregate_names(documents: pl.DataFrame) -> frozenset[str]:
    """The doc_ids and source_paths of the aggregate_only rows of a frame with access_scope."""
    rows = documents.filter(aggregate("access_scope"))
    return frozenset(rows["doc_id"]) | frozenset(rows["source_path"])


def _parent_doc_ids(store: CorpusStore, parent: str | None) -> list[str]:
    return [] if parent is None else store.read_documents(parent, columns=["doc_id"])["doc_id"].to_list()


def _ingest_errors(errors: pa.Table) -> list[IngestError]:
    frame = to_frame(errors).sort(SORT_KEYS["errors"])
    return [
        IngestError(r["source_path"], r["stage"], r["error_type"], r["reason"], r["access_scope"])
        for r in frame.iter_rows(named=True)
    ]
