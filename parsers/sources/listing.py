"""A listed source as discovery sees it: its listing walked under the rules a folder's walk applies
(parsers.source_tree: hidden names, sidecars, include/exclude, shards), and what was read of its objects, kept
by stamp so that an object listed unchanged is never read again."""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from citekeeper import cycle_collector, schema
from citekeeper.tables import write_parquet
from parsers.metadata import SIDECAR_SUFFIX
from parsers.records import ParseConfig
from parsers.source_tree import Quarantined, Rejected, Skipped, entries_digest, selector
from parsers.sources.base import ListedObject, ListedSource, UnlistableKey


@dataclass(frozen=True)
class ListedFile:
    """A selected object that is not a sidecar: a document to be, unless reading it fails."""

    key: str
    source_path: str  # the key, NFC
    size: int
    stamp: str
    sidecar: ListedObject | None  # `<key>.citekeeper.json`, when listed


@dataclass(frozen=True)
class ListedRejected(Rejected):
    """A selected key that cannot be a document, with its sidecar when listed: the error takes the sidecar's
    scope, as a folder's rejected path does."""

    sidecar: ListedObject | None = None


ListedEntry = ListedFile | ListedRejected | Skipped


def _every_path(source_path: str) -> bool:
    return True


def walk_listing(
    source: ListedSource, config: ParseConfig, owns: Callable[[str], bool] = _every_path
) -> Iterator[ListedEntry]:
    """Every listed key whose source_path `owns` accepts, in source_path order. As in a folder: a name starting
    with "." anywhere on the path is passed over, a sidecar goes with its document, include/exclude select."""
    objects: dict[str, ListedObject] = {}
    unlistable: dict[str, UnlistableKey] = {}
    for item in source.list_objects():
        if any(_is_hidden(part) for part in item.key.split("/")):
            continue
        if isinstance(item, ListedObject):
            objects[item.key] = item
        else:
            unlistable[item.key] = item
    selected = selector(config.include, config.exclude)
    named: dict[str, str] = {}  # source_path -> the key that named it first
    # Keys equal once normalised are ordered by the key itself: the first keeps the document on every run.
    for key in sorted(objects.keys() | unlistable.keys(), key=lambda key: (_nfc(key), key)):
        source_path = _nfc(key)
        if not owns(source_path) or _is_sidecar_of_listed(key, objects, unlistable):
            continue
        why = _unusable(key, source_path, named, objects, unlistable)
        named.setdefault(source_path, key)
        if not selected(source_path):
            yield Skipped(source_path)
        elif why is not None:
            yield ListedRejected(source_path, why, objects.get(key + SIDECAR_SUFFIX))
        else:
            listed = objects[key]
            yield ListedFile(key, source_path, listed.size, listed.stamp, objects.get(key + SIDECAR_SUFFIX))


def _is_hidden(part: str) -> bool:
    """A hidden name; "." and ".." are no names but a key that is no path (_unusable)."""
    return part.startswith(".") and part not in (".", "..")


def _nfc(key: str) -> str:
    return unicodedata.normalize("NFC", key)


def _is_sidecar_of_listed(key: str, objects: dict[str, ListedObject], unlistable: dict[str, UnlistableKey]) -> bool:
    """A sidecar goes with the key it names, a document or not (a git symlink), as in a folder."""
    named = key[: -len(SIDECAR_SUFFIX)]
    return key.endswith(SIDECAR_SUFFIX) and (named in objects or named in unlistable)


def _unusable(
    key: str,
    source_path: str,
    named: dict[str, str],
    objects: dict[str, ListedObject],
    unlistable: dict[str, UnlistableKey],
) -> Quarantined | None:
    """Why a listed key cannot be a document, or None."""
    if key in unlistable:
        return unlistable[key].why
    if any(part in ("", ".", "..") for part in key.split("/")):
        return Quarantined("discover", "InvalidFileName", f"key {key!r} is not a relative path")
    if source_path in named:
        reason = f"key {key!r} names the same document as {named[source_path]!r} once Unicode-normalised (NFC)"
        return Quarantined("discover", "DuplicateSourcePath", reason)
    if key.endswith(SIDECAR_SUFFIX):
        return Quarantined(
            "discover", "OrphanSidecar", f"sidecar without a document named {key[: -len(SIDECAR_SUFFIX)]!r}"
        )
    return None


# ---------------------------------------------------------------------- what was read, by stamp


@dataclass(frozen=True)
class ReadObject:
    """What discovery takes from an object's bytes: their hash and size, and the head it interprets (a
    document's front matter block, a sidecar's bytes)."""

    content_hash: str
    size_bytes: int
    head: bytes | None
    no_text_under: str | None = None  # the config_hash under which it parsed into no text, if it did
    read_at_ns: int | None = None  # when the bytes were read


READ_OBJECT_FIELDS = [field.name for field in fields(ReadObject)]  # its columns in READ_OBJECTS, after key and stamp


class ReadObjects:
    """What was read of one source's objects (citekeeper.schema.READ_OBJECTS), by (key, stamp): those kept in
    `directory` by earlier runs, and this run's. save() keeps what this run listed, read or not, so the kept set
    follows the source and stops growing with each run."""

    def __init__(self, directory: Path | None):
        self._directory = directory
        self._known: dict[tuple[str, str], ReadObject] = {}
        self._listed: dict[tuple[str, str], ReadObject] = {}
        self._loaded: dict[str, int] = {}  # rows of each file loaded, by name
        self._changed = False  # whether anything was put since
        with cycle_collector.paused():  # a row per document of the source, none in a cycle
            for path in sorted(directory.glob("*.parquet")) if directory and directory.is_dir() else ():
                self._load(path)

    def _load(self, path: Path) -> None:
        """Column by column: a row per document of the source (50,000 rows took ~1 s as a list of dicts)."""
        try:
            columns = pq.read_table(path, schema=schema.READ_OBJECTS).to_pydict()
        except (OSError, pa.ArrowInvalid):  # a cache: one that cannot be read costs reads, never a run
            return
        listed = zip(columns["key"], columns["stamp"], strict=True)
        reads = map(ReadObject, *(columns[name] for name in READ_OBJECT_FIELDS))
        self._known.update(zip(listed, reads, strict=True))
        self._loaded[path.stem] = len(columns["key"])

    def get(self, key: str, stamp: str, rehash: bool = False) -> ReadObject | None:
        """What was read of the object when it had this stamp; None when never, or when `rehash` says to trust
        no stamp."""
        found = self._known.get((key, stamp)) if stamp and not rehash else None
        if found is not None:
            self._listed[(key, stamp)] = found
        return found

    def put(self, key: str, stamp: str, read: ReadObject) -> None:
        if stamp:
            self._known[(key, stamp)] = self._listed[(key, stamp)] = read
            self._changed = True

    def parsed_no_text(self, key: str, stamp: str, settings: str) -> bool:
        """Whether the object parsed into no text under these parse settings (a config_hash)."""
        found = self._known.get((key, stamp))
        return found is not None and found.no_text_under == settings

    def mark_no_text(self, key: str, stamp: str, settings: str) -> None:
        if (key, stamp) in self._listed:
            self.put(key, stamp, replace(self._listed[(key, stamp)], no_text_under=settings))

    def save(self, name: str) -> None:
        """Write this run's objects as `<name>.parquet` (a shard's name: shards write their own). Nothing to write
        when that file was the only one loaded, nothing was put and every row of it was listed again: it holds them
        (a run with nothing changed at 50,000 documents spent ~0.15 s rewriting it)."""
        if self._directory is None or self._unchanged(name):
            return
        listed = sorted(self._listed.items())
        columns = {
            "key": [key for (key, _), _ in listed],
            "stamp": [stamp for (_, stamp), _ in listed],
            **{name: [getattr(read, name) for _, read in listed] for name in READ_OBJECT_FIELDS},
        }
        self._directory.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pydict(columns, schema=schema.READ_OBJECTS)
        write_parquet(table, schema.READ_OBJECTS, self._directory / f"{name}.parquet")

    def _unchanged(self, name: str) -> bool:
        """Whether `<name>.parquet` already holds exactly what this run listed: the listed are all from it, none
        was put, and they are as many as its rows."""
        return not self._changed and list(self._loaded) == [name] and self._loaded[name] == len(self._listed)


def listing_fingerprint(source: ListedSource, config: ParseConfig) -> str:
    """sha256 over what discovery would see of a listed source, without reading an object: the source's own
    fingerprint where it has one (a ref's commit), else each listed document's key, size and stamp and its
    sidecar's stamp, each rejected key and why; and the settings, as source_tree.source_fingerprint."""
    own = source.listing_fingerprint()
    if own is not None:
        return hashlib.sha256(repr(config).encode() + own.encode()).hexdigest()

    def file_fields(file: ListedFile) -> list:
        return [file.key, file.size, file.stamp, file.sidecar.stamp if file.sidecar else "-"]

    return entries_digest(config, walk_listing(source, config), file_fields)
