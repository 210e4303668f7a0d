"""Discovery: every file the walk of a source root selects (parsers.source_tree) is read, hashed and named (its
doc_id), anything unusable is quarantined, and no file's bytes are kept (the parser reads each again and checks
its hash). The rules: docs/ingest.md ("Choosing files", "Data model")."""

from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urljoin

from citekeeper import cycle_collector
from citekeeper.identity import sha256_hex
from citekeeper.scope import strictest
from citekeeper.sources import render_source_url
from parsers.formats import BY_EXTENSION
from parsers.formats.base import Format
from parsers.formats.text import UndecodableText, decode_text
from parsers.metadata import (
    MAX_SIDECAR_BYTES,
    SIDECAR_SUFFIX,
    MetadataError,
    front_matter_fields,
    front_matter_head,
    given_source_fields,
    read_front_matter,
    read_sidecar,
    sidecar_values,
)
from parsers.records import IngestError, ParseConfig, SourceFields, SourceFile
from parsers.source_tree import (
    Quarantined,
    Rejected,
    Skipped,
    TreeFile,
    access_error,
    sidecar_path,
    walk_source_tree,
)
from parsers.sources.base import ListedSource
from parsers.sources.listing import ListedFile, ListedRejected, ReadObject, ReadObjects, walk_listing

# Timestamps as coarse as 2 s (FAT; most filesystems keep ns, some 1 s): a file modified less than this before it
# was read is read again next time.
RACY_WINDOW_NS = 2 * 10**9


@dataclass(frozen=True)
class Discovery:
    """What one discovery found."""

    sources: list[SourceFile]  # sorted by source_path
    errors: list[IngestError]  # sorted by source_path
    n_skipped: int  # files include/exclude left out
    source: ListedSource | None = None  # the listed source discovered, None for a folder
    # Of a listed source: each document's (key, stamp) by source_path, and those whose bytes were not read (their
    # stamps were known).
    listed: dict[str, tuple[str, str]] = field(default_factory=dict)
    unread: set[str] = field(default_factory=set)


def _owns_every_path(source_path: str) -> bool:
    return True


@dataclass
class _Found:
    root: Path | None  # resolved; None for a listed source
    config: ParseConfig
    read_objects: ReadObjects = field(default_factory=lambda: ReadObjects(None))
    unread: set[str] = field(default_factory=set)  # source_paths of documents whose bytes were not read
    sources: list[SourceFile] = field(default_factory=list)
    errors: list[IngestError] = field(default_factory=list)
    n_skipped: int = 0

    def add(self, source: SourceFile, on_read: Callable[[SourceFile], None], unread: set[str]) -> None:
        """A document found; `unread`: the source_paths of those whose bytes were not read (on_read hears of others)."""
        self.sources.append(source)
        if source.source_path not in unread:
            on_read(source)

    def quarantine(self, source_path: str, why: Quarantined, access_scope: str | None = None) -> None:
        """An IngestError for a file; its access_scope, unless given, as far as it can be known (_known_scope)."""
        scope = access_scope or _known_scope(self, source_path)
        self.errors.append(IngestError(source_path, why.stage, why.error_type, why.reason, scope))


def discover_sources(root: Path, config: ParseConfig) -> tuple[list[SourceFile], list[IngestError]]:
    """All documents under root, sorted by source_path, and an IngestError for each file that is unusable."""
    found = discover(root, config)
    return found.sources, found.errors


def discover(
    root: Path | ListedSource,
    config: ParseConfig,
    owns: Callable[[str], bool] = _owns_every_path,
    read_objects: ReadObjects | None = None,
    spool_dir: Path | None = None,
    on_read: Callable[[SourceFile], None] = lambda source: None,
) -> Discovery:
    """The documents under root (a folder, or a listed source) whose source_path `owns` accepts (a shard's share;
    all by default). Of a listed source, an object whose stamp `read_objects` knows is not read, and those read
    are kept under `spool_dir` for the parser (read_unread reads the others where they must be parsed).
    `on_read` is told of each document whose bytes were read (new or changed since read_objects knew it)."""
    with cycle_collector.paused():  # a few objects per file, none in a cycle
        if isinstance(root, ListedSource):
            return _discover_listed(root, config, owns, read_objects or ReadObjects(None), spool_dir, on_read)
        return _discover_folder(Path(root), config, owns, read_objects or ReadObjects(None), on_read)


def _discover_folder(
    root: Path,
    config: ParseConfig,
    owns: Callable[[str], bool],
    read_objects: ReadObjects,
    on_read: Callable[[SourceFile], None],
) -> Discovery:
    if not root.is_dir():
        raise NotADirectoryError(f"source root {root} is not a directory")
    root = root.resolve()
    found = _Found(root, config, read_objects)
    for entry in walk_source_tree(root, config, owns):
        match entry:
            case TreeFile():
                try:
                    found.add(_read_source(found, root, entry), on_read, found.unread)
                except Quarantined as q:
                    found.quarantine(entry.source_path, q)
                except OSError as exc:  # vanished or unreadable between listing and reading
                    found.quarantine(entry.source_path, access_error(exc))
            case Rejected(source_path=source_path, why=why):
                found.quarantine(source_path, why)
            case Skipped():
                found.n_skipped += 1
    return _discovery(found)


def _discovery(found: _Found, listing: _Listing | None = None) -> Discovery:
    """The sources sorted, a doc_id claimed twice quarantined, the errors sorted."""
    found.sources.sort(key=lambda source: source.source_path)
    _quarantine_duplicate_doc_ids(found)
    found.errors.sort(key=lambda error: error.source_path)
    if listing is None:
        return Discovery(found.sources, found.errors, found.n_skipped, unread=found.unread)
    return Discovery(found.sources, found.errors, found.n_skipped, listing.source, listing.listed, listing.unread)


# ---------------------------------------------------------------------- one document


def _read_source(found: _Found, root: Path, file: TreeFile) -> SourceFile:
    """The file named and hashed; its bytes are dropped here (the parser reads them again). A file whose stat
    is what it was when it was read last, and not racily so, is not read: what was read of it then serves."""
    config, path = found.config, file.path
    file_format = _format_of(file.source_path)
    _check_size(file.stat.st_size, config.max_file_bytes)
    stamp = _stat_stamp(file.stat)
    read = found.read_objects.get(file.source_path, stamp, config.rehash)
    if read is None or _racy(file.stat, read.read_at_ns):
        read_at = time.time_ns()
        raw = _read_bytes(path, config.max_file_bytes)
        head = _front_matter_bytes(raw) if file_format.front_matter else None
        read = ReadObject(sha256_hex(raw), len(raw), head, read_at_ns=read_at)
        found.read_objects.put(file.source_path, stamp, read)
    else:
        found.unread.add(file.source_path)
    with _metadata_errors:
        sidecars = _sidecars(file, root, config.authority_levels)
    places = [place for _, place in file.places]
    return _source_file(
        config,
        path.absolute(),
        file.source_path,
        file_format,
        read.content_hash,
        read.size_bytes,
        _head_text(read),
        sidecars,
        places,
    )


def _sidecars(file: TreeFile, root: Path, authority_levels: tuple[str, ...]) -> list[dict]:
    """read_sidecar at each place the file is reachable from. The walk's listing of the folder says whether the
    first has one, so most files cost no call for it."""
    first = read_sidecar(sidecar_path(file.path), root, authority_levels) if file.listed_sidecar else {}
    return [first] + [_sidecar_at(place, root, authority_levels) for place, _ in file.places[1:]]


def _sidecar_at(place: Path, root: Path, authority_levels: tuple[str, ...]) -> dict:
    """read_sidecar of the sidecar beside `place`. Most files have none: one lstat of its name says so, where
    resolving its path (read_sidecar) stats every folder above it."""
    try:
        os.lstat(f"{place}{SIDECAR_SUFFIX}")
    except FileNotFoundError:
        return {}
    except OSError:
        pass  # read_sidecar says what is wrong
    return read_sidecar(sidecar_path(place), root, authority_levels)


def _stat_stamp(status: os.stat_result) -> str:
    """What changes when a file's bytes do, as git's index keeps it: size, mtime, ctime (which no tool sets
    back, as `touch -d` and `rsync -t` set mtime), inode and device."""
    return f"{status.st_size}:{status.st_mtime_ns}:{status.st_ctime_ns}:{status.st_ino}:{status.st_dev}"


def _racy(status: os.stat_result, read_at_ns: int | None) -> bool:
    """A file changed within RACY_WINDOW_NS of when it was read could have been written again within the same
    timestamp tick, unseen by its stamp: it is read again (git's "racily clean" entries)."""
    return read_at_ns is None or max(status.st_mtime_ns, status.st_ctime_ns) >= read_at_ns - RACY_WINDOW_NS


def _head_text(read: ReadObject) -> str:
    return read.head.decode("utf-8", "surrogatepass") if read.head is not None else ""


def _source_file(
    config: ParseConfig,
    path: Path,
    source_path: str,
    file_format: Format,
    content_hash: str,
    size_bytes: int,
    front_matter_text: str,
    sidecars: list[dict],
    places: list[str],
) -> SourceFile:
    """A document named and scoped by what its bytes and sidecars say (one sidecar per place it is reachable
    from) under the settings. An invalid sidecar or front matter quarantines the document: guessing its
    access_scope could expose an internal document."""
    with _metadata_errors:
        front_matter = read_front_matter(front_matter_text)
        given = given_source_fields(
            front_matter_fields(front_matter, config.source_keys, config.authority_levels), sidecars
        )
    explicit = front_matter.explicit | sidecars[-1] | sidecars[0]  # the sidecar where the walk found it wins
    doc_id = explicit.get("doc_id", source_path)
    return SourceFile(
        path=path,
        source_path=source_path,
        doc_id=doc_id,
        filetype=file_format.filetype,
        content_hash=content_hash,
        size_bytes=size_bytes,
        access_scope=_access_scope(config, front_matter.explicit, sidecars, places),
        title=explicit.get("title"),
        front_matter=front_matter.as_json,
        source_fields=_source_fields(config, given, source_path, doc_id),
    )


class _MetadataErrors:
    """Metadata that cannot be trusted, or a text with front matter that cannot be decoded (decoded as parsing
    decodes it, so a Latin-1 or UTF-16 file's front matter is read), quarantines the document. A class, not a
    generator's context: it is entered twice a file."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: Any) -> None:
        if isinstance(exc, MetadataError):
            raise Quarantined("discover", "InvalidMetadata", str(exc)) from exc
        if isinstance(exc, UndecodableText):
            raise Quarantined("read", "EncodingError", str(exc)) from exc


_metadata_errors = _MetadataErrors()


def _format_of(source_path: str) -> Format:
    suffix = _suffix(source_path)
    file_format = BY_EXTENSION.get(suffix.lower())
    if file_format is None:
        supported = ", ".join(sorted(BY_EXTENSION))
        raise Quarantined(
            "discover",
            "UnsupportedFileType",
            f"unsupported file type {suffix or '(no extension)'!r}; supported: {supported}",
        )
    return file_format


def _suffix(source_path: str) -> str:
    """PurePosixPath(source_path).suffix, without building a path for every file."""
    name = source_path.rpartition("/")[2]
    dot = name.rfind(".")
    return name[dot:] if 0 < dot < len(name) - 1 else ""


def _check_size(size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise Quarantined(
            "discover", "FileTooLarge", f"file is {size} bytes, over the limit of {max_bytes} (max_file_bytes)"
        )


def _read_bytes(path: Path, max_bytes: int) -> bytes:
    try:
        with path.open("rb") as handle:
            raw = handle.read(max_bytes + 1)  # bounded even if the file grows while we read it
    except PermissionError as exc:
        raise Quarantined("read", "PermissionDenied", f"cannot read file: {exc.strerror}") from exc
    except OSError as exc:
        raise Quarantined("read", "ReadError", f"cannot read file: {exc.strerror or exc}") from exc
    return _checked_bytes(raw, max_bytes)


def _checked_bytes(raw: bytes, max_bytes: int) -> bytes:
    if len(raw) > max_bytes:
        raise Quarantined("read", "FileTooLarge", f"file grew past the limit of {max_bytes} bytes while being read")
    if not raw:
        raise Quarantined("discover", "EmptyFile", "file is empty (0 bytes)")
    return raw


# ---------------------------------------------------------------------- one listed object


@dataclass
class _Listing:
    source: ListedSource
    config: ParseConfig
    read_objects: ReadObjects
    spool_dir: Path | None
    listed: dict[str, tuple[str, str]] = field(default_factory=dict)  # source_path -> (key, stamp)
    unread: set[str] = field(default_factory=set)  # source_paths of documents not read this run


def _discover_listed(
    source: ListedSource,
    config: ParseConfig,
    owns: Callable[[str], bool],
    read_objects: ReadObjects,
    spool_dir: Path | None,
    on_read: Callable[[SourceFile], None],
) -> Discovery:
    listing = _Listing(source, config, read_objects, spool_dir)
    found = _Found(None, config)
    for entry in walk_listing(source, config, owns):
        match entry:
            case ListedFile():
                try:
                    found.add(_read_listed(listing, entry), on_read, listing.unread)
                except Quarantined as q:
                    found.quarantine(entry.source_path, q, _listed_scope(listing, entry))
            case ListedRejected():
                found.quarantine(entry.source_path, entry.why, _listed_scope(listing, entry))
            case Skipped():
                found.n_skipped += 1
    return _discovery(found, listing)


def _read_listed(listing: _Listing, entry: ListedFile) -> SourceFile:
    """As _read_source, of an object: its bytes are read only when its stamp is new, and then kept under
    spool_dir for the parser; else what was read of them before serves."""
    config = listing.config
    file_format = _format_of(entry.source_path)
    _check_size(entry.size, config.max_file_bytes)
    listing.listed[entry.source_path] = (entry.key, entry.stamp)
    read = listing.read_objects.get(entry.key, entry.stamp, config.rehash)
    if read is None:
        raw = _checked_bytes(listing.source.read(entry.key, config.max_file_bytes), config.max_file_bytes)
        head = _front_matter_bytes(raw) if file_format.front_matter else None
        read = ReadObject(sha256_hex(raw), len(raw), head, read_at_ns=time.time_ns())
        listing.read_objects.put(entry.key, entry.stamp, read)
        _spool(listing, entry.source_path, raw)
    else:
        listing.unread.add(entry.source_path)
    with _metadata_errors:
        sidecar = _listed_sidecar(listing, entry)
    path = _spool_path(listing.spool_dir, entry.source_path)
    return _source_file(
        config,
        path,
        entry.source_path,
        file_format,
        read.content_hash,
        read.size_bytes,
        _head_text(read),
        [sidecar],
        [entry.source_path],
    )


def _front_matter_bytes(raw: bytes) -> bytes:
    """The front matter block of a document's bytes, decoded as parsing decodes them, as UTF-8."""
    with _metadata_errors:
        return front_matter_head(decode_text(raw)[0]).encode("utf-8", "surrogatepass")


def _listed_sidecar(listing: _Listing, entry: ListedFile | ListedRejected) -> dict:
    """The document's sidecar ({} when none is listed), read unless its stamp was read before."""
    sidecar = entry.sidecar
    if sidecar is None:
        return {}
    read = listing.read_objects.get(sidecar.key, sidecar.stamp, listing.config.rehash)
    if read is None:
        raw = listing.source.read(sidecar.key, MAX_SIDECAR_BYTES)
        read = ReadObject(sha256_hex(raw), len(raw), raw)
        listing.read_objects.put(sidecar.key, sidecar.stamp, read)
    return sidecar_values(read.head or b"", PurePosixPath(sidecar.key).name, listing.config.authority_levels)


def _listed_scope(listing: _Listing, entry: ListedFile | ListedRejected) -> str | None:
    """The level of a key quarantined before its metadata was read, as _known_scope of a file."""
    try:
        sidecar_scope = _listed_sidecar(listing, entry).get("access_scope")
    except (MetadataError, Quarantined):
        sidecar_scope = None
    said = [scope for scope in (sidecar_scope, _override_scope(listing.config, entry.source_path)) if scope]
    return strictest(said) if said else None


def _spool_path(spool_dir: Path | None, source_path: str) -> Path:
    """Where the parser reads a listed document's bytes (relative, and never written, without a spool_dir)."""
    return (spool_dir or Path()) / source_path


def _spool(listing: _Listing, source_path: str, raw: bytes) -> None:
    if listing.spool_dir is not None:
        path = _spool_path(listing.spool_dir, source_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)


def read_unread(discovery: Discovery, sources: list[SourceFile], spool_dir: Path, max_bytes: int) -> list[IngestError]:
    """Read into spool_dir the bytes of those `sources` discovery did not read (their stamps were known, but
    they must be parsed all the same); an object that fails now is an IngestError, as it would have been in
    discovery. The parser checks the bytes against the hash discovery took."""
    errors = []
    for source in sources:
        if source.source_path not in discovery.unread or discovery.source is None:
            continue
        key, _ = discovery.listed[source.source_path]
        try:
            raw = _checked_bytes(discovery.source.read(key, max_bytes), max_bytes)
        except Quarantined as q:
            errors.append(IngestError(source.source_path, q.stage, q.error_type, q.reason, source.access_scope))
            continue
        path = _spool_path(spool_dir, source.source_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
    return errors


def _source_fields(config: ParseConfig, given: dict, source_path: str, doc_id: str) -> SourceFields:
    """What the document's own metadata gives (`given`), then the settings: the URL template's URL (a relative
    URL given, such as Hugo's `url: /about/`, resolved against it) and the first source_defaults glob matching
    per field."""
    fields = dict(given)
    if config.source_url_template:
        templated = render_source_url(config.source_url_template, source_path, doc_id)
        fields["source_url"] = urljoin(templated, given["source_url"]) if "source_url" in given else templated
    for pattern, name, value in config.source_defaults:
        if name not in fields and fnmatch.fnmatchcase(source_path, pattern):
            fields[name] = value
    values: dict[str, Any] = {
        name: tuple(value) if isinstance(value, list) else value for name, value in fields.items()
    }
    return SourceFields(**values)


def _access_scope(
    config: ParseConfig,
    front_matter: dict[str, str],
    sidecars: list[dict[str, str]],
    places: list[str],
) -> str:
    """The strictest scope any source gives the file: its front matter, and at each place it is reachable from
    (TreeFile.places) the sidecar there and the first override matching there. Sources that disagree never make a
    file more visible than one of them says; default_access_scope holds only where none says anything."""
    given = [front_matter.get("access_scope")]
    for sidecar, place in zip(sidecars, places):
        given += [sidecar.get("access_scope"), _override_scope(config, place)]
    said = [scope for scope in given if scope]
    return strictest(said) if said else config.default_access_scope


def _known_scope(found: _Found, source_path: str) -> str | None:
    """The level of a file quarantined before its metadata was read: the strictest of the override for its path and
    its sidecar's access_scope, when the sidecar can be read (None: nothing says, which is public)."""
    if found.root is None:  # a listed source's quarantines give their scope
        return _override_scope(found.config, source_path)
    try:
        sidecar_scope = _sidecar_at(found.root / source_path, found.root, found.config.authority_levels).get(
            "access_scope"
        )
    except MetadataError:
        sidecar_scope = None
    said = [scope for scope in (sidecar_scope, _override_scope(found.config, source_path)) if scope]
    return strictest(said) if said else None


def _override_scope(config: ParseConfig, source_path: str) -> str | None:
    for pattern, scope in config.access_scope_overrides:
        if fnmatch.fnmatchcase(source_path, pattern):
            return scope
    return None


def _quarantine_duplicate_doc_ids(found: _Found) -> None:
    """Two files claiming one doc_id: the first (sources are sorted by path) keeps it, the others are quarantined."""
    owner: dict[str, str] = {}
    kept = []
    for source in found.sources:
        if source.doc_id in owner:
            why = Quarantined(
                "discover", "DuplicateDocId", duplicate_doc_id_reason(source.doc_id, owner[source.doc_id])
            )
            found.quarantine(source.source_path, why, source.access_scope)
        else:
            owner[source.doc_id] = source.source_path
            kept.append(source)
    found.sources = kept


def duplicate_doc_id_reason(doc_id: str, owner: str) -> str:
    return f"doc_id {doc_id!r} is already used by {owner}"
