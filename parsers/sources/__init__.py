"""Where documents come from: a local folder (a path, or a file:// URL), walked by parsers.source_tree, or a
listed source (parsers.sources.base), one module per kind: each has `handles(spec)` and
`open_source(spec, storage_options)`, and adding a kind is its module plus a line in SOURCE_KINDS
(docs/ingest.md, "Sources")."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from parsers.records import ParseConfig
from parsers.source_tree import source_fingerprint
from parsers.sources.base import ListedSource
from parsers.sources.listing import listing_fingerprint

# Imported when a spec is opened: each pulls its client library (s3fs, pygit2) in.
SOURCE_KINDS = ("parsers.sources.git", "parsers.sources.object_store")


def open_source(
    spec: str | Path | ListedSource, storage_options: Mapping[str, str] | None = None
) -> Path | ListedSource:
    """The folder (a Path) or listed source `spec` names; storage options are the store's (credentials,
    endpoint), for sources that take them."""
    if isinstance(spec, Path | ListedSource):
        return spec
    for name in SOURCE_KINDS:
        kind = importlib.import_module(name)
        if kind.handles(spec):
            return kind.open_source(spec, storage_options or {})
    if urlparse(spec).scheme == "file":
        return Path(url2pathname(urlparse(spec).path))
    return Path(spec)


def cache_key(source: Path | ListedSource) -> str:
    """What discovery keeps what it read of the source's documents under (parsers.sources.listing.ReadObjects)."""
    return f"folder:{source}" if isinstance(source, Path) else source.cache_key


def describe(source: Path | ListedSource) -> str:
    """The source as a version records it (its source_dir)."""
    return str(source) if isinstance(source, Path) else source.uri


def fingerprint(source: Path | ListedSource, config: ParseConfig) -> str:
    """What the sensor compares between two looks at a source: a change of it means discovery would see a
    change (a folder by stat, a listing by its stamps, a git ref by its commit), read without reading a document."""
    if isinstance(source, Path):
        return source_fingerprint(source, config)
    return listing_fingerprint(source, config)


def missing(source: Path | ListedSource) -> str | None:
    """Why a source cannot be ingested now (a folder that is not there), or None; a listed source says so
    when it is listed."""
    if isinstance(source, Path) and not source.is_dir():
        return f"source root {source} is not a directory"
    return None
