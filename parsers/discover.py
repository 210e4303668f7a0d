"""Walk a source root: every supported file is read once, hashed and named; anything unusable is quarantined.

doc_id: the file's path relative to the source root, as posix, Unicode NFC, case and extension kept
(so `a.md` and `a.html` are two documents), unless a sidecar or front matter gives one explicitly.
Hidden files and folders (leading '.') are skipped silently; files of other types are recorded as
UnsupportedFileType errors so nothing disappears unnoticed.
"""
from __future__ import annotations

import errno
import fnmatch
import os
import stat
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from citekeeper.identity import sha256_hex
from parsers.formats import BY_EXTENSION
from parsers.metadata import SIDECAR_SUFFIX, MetadataError, read_sidecar, split_front_matter
from parsers.model import IngestError, ParseConfig, SourceFile

UTF8_BOM = b"\xef\xbb\xbf"


class Quarantined(Exception):
    def __init__(self, stage: str, error_type: str, reason: str):
        super().__init__(reason)
        self.stage, self.error_type, self.reason = stage, error_type, reason


@dataclass
class _Walk:
    root: Path  # resolved
    config: ParseConfig
    sources: list[SourceFile] = field(default_factory=list)
    errors: list[IngestError] = field(default_factory=list)

    def quarantine(self, source_path: str, stage: str, error_type: str, reason: str) -> None:
        self.errors.append(IngestError(source_path, stage, error_type, reason))


def discover_sources(root: Path, config: ParseConfig) -> tuple[list[SourceFile], list[IngestError]]:
    """All documents under root, sorted by source_path, and an IngestError for each file that is unusable."""
    root = Path(root)
    if not root.is_dir():
        raise NotADirectoryError(f"source root {root} is not a directory")
    walk = _Walk(root.resolve(), config)
    _walk_dir(walk, walk.root, "", frozenset({walk.root}))
    walk.sources.sort(key=lambda source: source.source_path)
    _quarantine_duplicate_doc_ids(walk)
    walk.errors.sort(key=lambda error: error.source_path)
    return walk.sources, walk.errors


def _walk_dir(walk: _Walk, directory: Path, prefix: str, ancestors: frozenset[Path]) -> None:
    """Walk one directory; `ancestors` are the real paths of the directories being walked above it."""
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError as exc:
        walk.quarantine(prefix.rstrip("/") or ".", "discover", "UnreadableDirectory", f"cannot list directory: {exc.strerror or exc}")
        return
    names = {entry.name for entry in entries}
    for entry in entries:
        if entry.name.startswith("."):
            continue
        source_path = unicodedata.normalize("NFC", prefix + entry.name)
        try:
            _visit(walk, Path(entry.path), source_path, names, ancestors)
        except Quarantined as q:
            walk.quarantine(source_path, q.stage, q.error_type, q.reason)
        except OSError as exc:  # vanished or unreadable between listing and reading
            walk.quarantine(source_path, "read", "ReadError", f"cannot access file: {exc.strerror or exc}")


def _visit(walk: _Walk, path: Path, source_path: str, sibling_names: set[str], ancestors: frozenset[Path]) -> None:
    if path.is_symlink():
        target = _symlink_target(walk, path)
        if target.is_dir():
            # A link to a directory inside the root is followed (an alias, like a file link), unless it leads
            # back into a directory the walk is inside of: that would never end.
            if target in ancestors:
                raise Quarantined("discover", "SymlinkLoop", f"symlink loop: directory link points back to its own ancestor {target}")
            _walk_dir(walk, target, source_path + "/", ancestors | {target})
            return
    mode = path.stat().st_mode
    if stat.S_ISDIR(mode):
        _walk_dir(walk, path, source_path + "/", ancestors | {path.resolve()})
    elif not stat.S_ISREG(mode):
        raise Quarantined("discover", "NotARegularFile", "not a regular file (device, socket or FIFO)")
    elif path.name.endswith(SIDECAR_SUFFIX):
        if path.name[: -len(SIDECAR_SUFFIX)] not in sibling_names:
            raise Quarantined("discover", "OrphanSidecar", f"sidecar without a document named {path.name[: -len(SIDECAR_SUFFIX)]!r}")
    else:
        walk.sources.append(_read_source(walk, path, source_path))


def _symlink_target(walk: _Walk, path: Path) -> Path:
    try:
        target = path.resolve(strict=True)
    except RuntimeError as exc:  # Python 3.11 reports a loop this way
        raise Quarantined("discover", "SymlinkLoop", f"symlink loop: {exc}") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Quarantined("discover", "SymlinkLoop", "symlink loop (too many levels of symbolic links)") from exc
        raise Quarantined("discover", "BrokenSymlink", f"symlink target does not exist: {os.readlink(path)}") from exc
    if not target.is_relative_to(walk.root):
        raise Quarantined("discover", "SymlinkOutsideRoot", f"symlink points outside the source root, to {target}")
    return target


def _read_source(walk: _Walk, path: Path, source_path: str) -> SourceFile:
    config = walk.config
    file_format = BY_EXTENSION.get(path.suffix.lower())
    if file_format is None:
        supported = ", ".join(sorted(BY_EXTENSION))
        raise Quarantined("discover", "UnsupportedFileType", f"unsupported file type {path.suffix or '(no extension)'!r}; supported: {supported}")
    raw = _read_bytes(path, config.max_file_bytes)
    filetype = file_format.filetype
    explicit = _explicit_metadata(path, filetype, raw)
    return SourceFile(
        path=path.absolute(),
        source_path=source_path,
        doc_id=explicit.get("doc_id", source_path),
        filetype=filetype,
        content_hash=sha256_hex(raw),
        size_bytes=len(raw),
        access_scope=explicit.get("access_scope") or _configured_scope(config, source_path),
        title=explicit.get("title"),
        raw=raw,
    )


def _read_bytes(path: Path, max_bytes: int) -> bytes:
    size = path.stat().st_size
    if size > max_bytes:
        raise Quarantined("discover", "FileTooLarge", f"file is {size} bytes, over the limit of {max_bytes} (max_file_bytes)")
    try:
        with path.open("rb") as handle:
            raw = handle.read(max_bytes + 1)  # bounded even if the file grows while we read it
    except PermissionError as exc:
        raise Quarantined("read", "PermissionDenied", f"cannot read file: {exc.strerror}") from exc
    except OSError as exc:
        raise Quarantined("read", "ReadError", f"cannot read file: {exc.strerror or exc}") from exc
    if len(raw) > max_bytes:
        raise Quarantined("read", "FileTooLarge", f"file grew past the limit of {max_bytes} bytes while being read")
    if not raw:
        raise Quarantined("discover", "EmptyFile", "file is empty (0 bytes)")
    return raw


def _explicit_metadata(path: Path, filetype: str, raw: bytes) -> dict[str, str]:
    """Sidecar keys override front matter keys. An invalid sidecar quarantines the document: guessing its
    access_scope could expose an internal document."""
    try:
        front_matter = {}
        if filetype == "md" and raw.removeprefix(UTF8_BOM).startswith(b"---"):
            front_matter, _ = split_front_matter(raw.decode("utf-8-sig", "replace"))
        return front_matter | read_sidecar(path.with_name(path.name + SIDECAR_SUFFIX))
    except MetadataError as exc:
        raise Quarantined("discover", "InvalidMetadata", str(exc)) from exc


def _configured_scope(config: ParseConfig, source_path: str) -> str:
    for pattern, scope in config.access_scope_overrides:
        if fnmatch.fnmatchcase(source_path, pattern):
            return scope
    return config.default_access_scope


def _quarantine_duplicate_doc_ids(walk: _Walk) -> None:
    """Two files claiming one doc_id: the first (sources are sorted by path) keeps it, the others are quarantined."""
    owner: dict[str, str] = {}
    kept = []
    for source in walk.sources:
        if source.doc_id in owner:
            walk.quarantine(source.source_path, "discover", "DuplicateDocId", f"doc_id {source.doc_id!r} is already used by {owner[source.doc_id]}")
        else:
            owner[source.doc_id] = source.source_path
            kept.append(source)
    walk.sources = kept
