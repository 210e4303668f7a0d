"""Ingest: a source tree -> one immutable corpus version, re-parsing only documents whose bytes changed.

Two steps, so that parsing can be spread over processes or machines (shards) while one writer commits:

    stage(source_dir, store, version, shard=Shard(i, n))
        parses this shard's documents (stable hash of doc_id, i of n) that changed since the parent
        version into <store>/staging/<version>/shard-<i>-of-<n>/. No lock; many shards at once.
    commit(store, version, n_shards=n)
        merges the n staged shards into the version, under the store's writer lock.

`ingest()` is stage (one shard of one) + commit under the lock; n shard stages + one commit give the
same version.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from citekeeper import schema
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
from citekeeper.tables import to_arrow, write_parquet
from parsers.discover import discover_sources
from parsers.document import parse_document
from citekeeper.identity import sha256_hex
from parsers.model import DocumentError, IngestError, ParseConfig, ParsedDocument, SourceFile

Progress = Callable[[str, int, int], None]  # (source_path, documents parsed so far, documents to parse)

STAGE_DONE = "stage.json"  # written last: a shard without it is incomplete


class StrictIngestFailed(StoreError):
    """--strict and some files were quarantined; no version was committed."""


@dataclass(frozen=True)
class Shard:
    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"shard index must be in [0, {self.count}), got {self.index}")

    def owns(self, key: str) -> bool:
        """Stable across runs and machines (unlike hash()), so a document always lands in one shard."""
        return int(hashlib.sha256(key.encode()).hexdigest()[:16], 16) % self.count == self.index

    @property
    def dirname(self) -> str:
        return f"shard-{self.index:04d}-of-{self.count:04d}"


@dataclass(frozen=True)
class StageResult:
    version: str
    parent: str | None
    shard: Shard
    n_parsed: int
    n_reused: int
    errors: list[IngestError]
    path: Path


@dataclass
class IngestResult:
    manifest: VersionManifest  # the new version, or the existing one the tree equals
    created: bool
    equals: str | None = None  # set when no version was created: the version the tree equals
    n_parsed: int = 0
    n_reused: int = 0
    removed_doc_ids: list[str] = field(default_factory=list)
    errors: list[IngestError] = field(default_factory=list)
    durations_s: dict[str, float] = field(default_factory=dict)
    reparse_reason: str | None = None  # why the parent's documents were not reused, when they were not

    @property
    def n_removed(self) -> int:
        return len(self.removed_doc_ids)

    @property
    def n_quarantined(self) -> int:
        return len(self.errors)


def config_hash(config: ParseConfig) -> str:
    return sha256_hex(json.dumps(asdict(config), sort_keys=True).encode())


def reparse_reason(parent: VersionManifest | None, config: ParseConfig) -> str | None:
    """Why no document of `parent` can be reused under `config` (None when they can): the settings that differ."""
    if parent is None or parent.config_hash == config_hash(config):
        return None
    now = json.loads(json.dumps(asdict(config)))  # tuples as JSON lists, as the manifest stores them
    before = parent.parse_settings
    if not before:
        return f"parse settings changed since {parent.name} (text rules now version {config.text_rules}): every document is parsed again"
    changed = ", ".join(f"{key} {before.get(key)!r} -> {now[key]!r}" for key in sorted(now) if before.get(key) != now[key])
    return f"parse settings changed since {parent.name} ({changed}): every document is parsed again"


def ingest(
    source_dir: Path | str,
    store: CorpusStore,
    version: str | None = None,
    config: ParseConfig = ParseConfig(),
    strict: bool = False,
    progress: Progress | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> IngestResult:
    """Ingest a source tree as a new corpus version (named, or the next generated `vNNNN`)."""
    with store.lock(lock_timeout):
        name = version or store.next_version_name()
        started = time.perf_counter()
        stage(source_dir, store, name, config=config, progress=progress)
        staged_s = time.perf_counter() - started
        result = commit(store, name, strict=strict, lock_timeout=lock_timeout)
    result.durations_s = {"stage": staged_s, **result.durations_s}
    return result


def stage(
    source_dir: Path | str,
    store: CorpusStore,
    version: str,
    *,
    shard: Shard = Shard(),
    config: ParseConfig = ParseConfig(),
    progress: Progress | None = None,
) -> StageResult:
    """Parse this shard's new and changed documents into the staging area of `version`."""
    validate_version_name(version)
    root = Path(source_dir).resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"source directory {source_dir} does not exist or is not a directory")
    parent = store.latest()
    discovered, errors = discover_sources(root, config)
    sources = [s for s in discovered if shard.owns(s.doc_id)]
    errors = [e for e in errors if shard.owns(e.source_path)]
    reusable = _reusable_hashes(store, parent, config)
    to_parse = [s for s in sources if reusable.get(s.doc_id) != s.content_hash]
    reused = {s.doc_id for s in sources} - {s.doc_id for s in to_parse}
    parsed, parse_errors = _parse_all(to_parse, config, progress)
    errors += parse_errors

    out = store.layout.staging_dir / version / shard.dirname
    shutil.rmtree(out, ignore_errors=True)  # leftovers of an interrupted stage of this shard
    ingested_at = datetime.now(timezone.utc)
    write_parquet(chunk_table(parsed, ingested_at), STORED_SCHEMAS["chunks"], out / "chunks.parquet")
    write_parquet(document_table(parsed, ingested_at), STORED_SCHEMAS["documents"], out / "documents.parquet")
    write_parquet(_error_rows(errors, version, ingested_at), schema.INGEST_ERRORS, out / "errors.parquet")
    failed = {e.source_path for e in parse_errors}
    outcome = dict.fromkeys(reused, "reused")
    outcome |= {s.doc_id: "failed" if s.source_path in failed else "parsed" for s in to_parse}
    write_parquet(_source_rows(sources, outcome), schema.STAGED_SOURCES, out / "sources.parquet")
    done = {"version": version, "parent": parent.name if parent else None, "config_hash": config_hash(config),
            "parse_settings": asdict(config), "reparse_reason": reparse_reason(parent, config),
            "source_dir": str(root), "shard": asdict(shard)}
    (out / STAGE_DONE).write_text(json.dumps(done, indent=2))
    return StageResult(version, done["parent"], shard, len(parsed), len(reused), errors, out)


def commit(
    store: CorpusStore,
    version: str,
    *,
    n_shards: int = 1,
    strict: bool = False,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> IngestResult:
    """Merge the staged shards of `version` into a committed corpus version (or report the one it equals)."""
    started = time.perf_counter()
    with store.lock(lock_timeout):
        staged = _load_staged(store, version, n_shards)
        errors = _ingest_errors(staged["errors"])
        if strict and errors:
            shutil.rmtree(store.layout.staging_dir / version, ignore_errors=True)
            listing = "\n".join(f"  {e.source_path}: {e.stage}: {e.reason}" for e in errors)
            raise StrictIngestFailed(f"--strict: {len(errors)} file(s) quarantined, no version committed:\n{listing}")
        sources = staged["sources"]
        tree_hash = corpus_hash(zip(sources["doc_id"], sources["content_hash"]))
        equal = _equal_version(store, version, tree_hash, staged["config_hash"])
        if equal is not None:
            shutil.rmtree(store.layout.staging_dir / version, ignore_errors=True)
            return IngestResult(equal, created=False, equals=equal.name, n_reused=sources.height, errors=errors)
        parent_ids = _parent_doc_ids(store, staged["parent"])
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
            corpus_hash=tree_hash,
            config_hash=staged["config_hash"],
            parse_settings=staged["parse_settings"],
            n_parsed=n_parsed,
            n_reused=reused_ids.len(),
            n_removed=len(removed),
            source_dir=staged["source_dir"],
        )
        committed = store.commit_version(
            manifest,
            replaced_doc_ids=set(parent_ids) - set(reused_ids),
            chunks=staged["chunks"],
            documents=staged["documents"],
            errors=staged["errors"],
        )
        shutil.rmtree(store.layout.staging_dir / version, ignore_errors=True)
    return IngestResult(
        committed,
        created=True,
        n_parsed=n_parsed,
        n_reused=reused_ids.len(),
        removed_doc_ids=removed,
        errors=errors,
        durations_s={"commit": time.perf_counter() - started},
        reparse_reason=staged["reparse_reason"],
    )


# ---------------------------------------------------------------------- staging


def _reusable_hashes(store: CorpusStore, parent: VersionManifest | None, config: ParseConfig) -> dict[str, str]:
    """doc_id -> content hash of the parent's documents, when they were parsed with the same settings."""
    if parent is None or parent.config_hash != config_hash(config):
        return {}
    docs = store.read_documents(parent.name, columns=["doc_id", "doc_content_hash"])
    return dict(zip(docs["doc_id"], docs["doc_content_hash"]))


def _parse_all(
    sources: list[SourceFile], config: ParseConfig, progress: Progress | None
) -> tuple[list[ParsedDocument], list[IngestError]]:
    parsed, errors = [], []
    for done, source in enumerate(sources, start=1):
        try:
            parsed.append(parse_document(source, config))
        except DocumentError as exc:
            errors.append(exc.error)
        except Exception as exc:  # one bad document never sinks a run
            errors.append(IngestError(source.source_path, "parse", type(exc).__name__, str(exc) or repr(exc)))
        if progress is not None:
            progress(source.source_path, done, len(sources))
    return parsed, errors


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
    }


def chunk_table(docs: list[ParsedDocument], ingested_at: datetime) -> pa.Table:
    rows = [
        {**asdict(chunk), **_document_fields(doc, ingested_at)} for doc in docs for chunk in doc.chunks
    ]
    return pa.Table.from_pylist(rows, schema=STORED_SCHEMAS["chunks"])


def document_table(docs: list[ParsedDocument], ingested_at: datetime) -> pa.Table:
    rows = [
        {**_document_fields(doc, ingested_at), "size_bytes": doc.source.size_bytes, "n_chunks": len(doc.chunks),
         "text": doc.text, "encoding": doc.encoding}
        for doc in docs
    ]
    return pa.Table.from_pylist(rows, schema=STORED_SCHEMAS["documents"])


def _error_rows(errors: list[IngestError], version: str, occurred_at: datetime) -> pa.Table:
    rows = [{**asdict(e), "corpus_version": version, "occurred_at": occurred_at} for e in errors]
    return pa.Table.from_pylist(rows, schema=schema.INGEST_ERRORS)


def _source_rows(sources: list[SourceFile], outcome: dict[str, str]) -> pa.Table:
    rows = [
        {"doc_id": s.doc_id, "source_path": s.source_path, "content_hash": s.content_hash, "outcome": outcome[s.doc_id]}
        for s in sources
    ]
    return pa.Table.from_pylist(rows, schema=schema.STAGED_SOURCES)


def _load_staged(store: CorpusStore, version: str, n_shards: int) -> dict:
    """All n shards of a staged version, checked complete and staged against the same parent and settings."""
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
        "sources": pl.from_arrow(read("sources.parquet", schema.STAGED_SOURCES)),
        "chunks": read("chunks.parquet", STORED_SCHEMAS["chunks"]),
        "documents": read("documents.parquet", STORED_SCHEMAS["documents"]),
        "errors": read("errors.parquet", schema.INGEST_ERRORS),
    }


# ---------------------------------------------------------------------- committing


def _equal_version(store: CorpusStore, version: str, tree_hash: str, settings: str) -> VersionManifest | None:
    """The version an unchanged tree equals: `version` itself if it exists (else it is a name clash), or
    the latest version."""
    if store.has_version(version):
        existing = store.manifest(version)
        if (existing.corpus_hash, existing.config_hash) == (tree_hash, settings):
            return existing
        raise VersionExists(
            f"corpus version {version!r} already exists with different content "
            f"(corpus_hash {existing.corpus_hash}, this tree {tree_hash}); versions are immutable, pick a new name"
        )
    return latest_if_equal(store, tree_hash, settings)


def latest_if_equal(store: CorpusStore, tree_hash: str, settings: str) -> VersionManifest | None:
    """The latest version when it holds exactly this tree (corpus_hash) under these parse settings."""
    latest = store.latest()
    if latest is not None and (latest.corpus_hash, latest.config_hash) == (tree_hash, settings):
        return latest
    return None


def _parent_doc_ids(store: CorpusStore, parent: str | None) -> list[str]:
    return [] if parent is None else store.read_documents(parent, columns=["doc_id"])["doc_id"].to_list()


def _ingest_errors(errors: pa.Table) -> list[IngestError]:
    frame = pl.from_arrow(errors).sort(SORT_KEYS["errors"])
    return [IngestError(r["source_path"], r["stage"], r["error_type"], r["reason"]) for r in frame.iter_rows(named=True)]
