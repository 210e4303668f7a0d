"""Walk a source root: every selected file is read, hashed and named (its doc_id), anything unusable is
quarantined, and no file's bytes are kept (the parser reads each again and checks its hash). The rules:
docs/ingest.md ("Choosing files", "Data model")."""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin

from wcmatch import glob

from citekeeper.identity import sha256_hex
from citekeeper.scope import strictest
from citekeeper.sources import render_source_url
from citekeeper.text import lone_surrogate
from parsers.formats import BY_EXTENSION
from parsers.formats.text import UndecodableText, decode_text
from parsers.metadata import (
    SIDECAR_SUFFIX,
    FrontMatter,
    MetadataError,
    front_matter_fields,
    given_source_fields,
    read_front_matter,
    read_sidecar,
)
from parsers.records import IngestError, ParseConfig, SourceFields, SourceFile

# Case-sensitive, posix paths on every OS, dotfiles matched like any name; no braces, extglob or negation.
GLOB_FLAGS = glob.GLOBSTAR | glob.DOTGLOB | glob.CASE | glob.FORCEUNIX


class Quarantined(Exception):
    def __init__(self, stage: str, error_type: str, reason: str):
        super().__init__(reason)
        self.stage, self.error_type, self.reason = stage, error_type, reason


@dataclass(frozen=True)
class Discovery:
    """What one walk found."""

    sources: list[SourceFile]  # sorted by source_path
    errors: list[IngestError]  # sorted by source_path
    n_skipped: int  # files include/exclude left out


def _owns_every_path(source_path: str) -> bool:
    return True


@dataclass
class _Walk:
    root: Path  # resolved
    config: ParseConfig
    selected: Callable[[str], bool]  # include/exclude
    owns: Callable[[str], bool]  # the shard's share of the files
    sources: list[SourceFile] = field(default_factory=list)
    errors: list[IngestError] = field(default_factory=list)
    n_skipped: int = 0

    def quarantine(
        self, source_path: str, stage: str, error_type: str, reason: str, access_scope: str | None = None
    ) -> None:
        """An IngestError for a file; its access_scope, unless given, as far as it can be known (_known_scope)."""
        if self.owns(source_path):  # every shard walks every directory; one of them reports its errors
            scope = access_scope or _known_scope(self, source_path)
            self.errors.append(IngestError(source_path, stage, error_type, reason, scope))

    def reject(self, source_path: str, stage: str, error_type: str, reason: str) -> None:
        """A path that cannot be a document: quarantined when selected, else only counted as skipped."""
        if self.selected(source_path):
            self.quarantine(source_path, stage, error_type, reason)
        elif self.owns(source_path):
            self.n_skipped += 1


def discover_sources(root: Path, config: ParseConfig) -> tuple[list[SourceFile], list[IngestError]]:
    """All documents under root, sorted by source_path, and an IngestError for each file that is unusable."""
    found = discover(root, config)
    return found.sources, found.errors


def discover(root: Path, config: ParseConfig, owns: Callable[[str], bool] = _owns_every_path) -> Discovery:
    """The documents under root whose source_path `owns` accepts (a shard's share; all by default)."""
    root = Path(root)
    if not root.is_dir():
        raise NotADirectoryError(f"source root {root} is not a directory")
    walk = _Walk(root.resolve(), config, selector(config.include, config.exclude), owns)
    _walk_dir(walk, walk.root, "", frozenset({walk.root}))
    walk.sources.sort(key=lambda source: source.source_path)
    _quarantine_duplicate_doc_ids(walk)
    walk.errors.sort(key=lambda error: error.source_path)
    return Discovery(walk.sources, walk.errors, walk.n_skipped)


# ---------------------------------------------------------------------- include / exclude


def selector(include: Iterable[str], exclude: Iterable[str]) -> Callable[[str], bool]:
    """Whether a source_path is selected: it matches an include glob (when there are any) and no exclude glob.

    wcmatch globs (GLOB_FLAGS) on the whole posix path: `*`, `?` and character classes (`[abc]`, `[!abc]`,
    `[^abc]`, `[[:alpha:]]`) stay within one folder, a backslash escapes the next character, and a `**` segment
    spans any number of folders, none included.
    """
    included, excluded = ([unicodedata.normalize("NFC", p) for p in patterns] for patterns in (include, exclude))
    if not included and not excluded:
        return lambda source_path: True  # the default: every path, without matching each
    return glob.compile(included or "**", flags=GLOB_FLAGS, exclude=excluded).match


# ---------------------------------------------------------------------- the walk


def _walk_dir(walk: _Walk, directory: Path, prefix: str, ancestors: frozenset[Path]) -> None:
    """Walk one directory; `ancestors` are the real paths of the directories being walked above it."""
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError as exc:
        walk.quarantine(
            prefix.rstrip("/") or ".",
            "discover",
            "UnreadableDirectory",
            f"cannot list directory: {exc.strerror or exc}",
        )
        return
    names = {entry.name for entry in entries}
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if lone_surrogate(entry.name) is not None:  # no source_path can name it: every table stores UTF-8
            shown = os.fsencode(prefix + entry.name).decode("utf-8", "backslashreplace")
            walk.quarantine(shown, "discover", "InvalidFileName", f"file name is not valid UTF-8: {shown}")
            continue
        source_path = unicodedata.normalize("NFC", prefix + entry.name)
        if not (_is_directory(entry) or walk.owns(source_path)):
            continue  # another shard's file: not even looked at
        try:
            _visit(walk, Path(entry.path), source_path, names, ancestors)
        except Quarantined as q:
            walk.reject(source_path, q.stage, q.error_type, q.reason)
        except OSError as exc:  # vanished or unreadable between listing and reading
            walk.reject(source_path, "read", "ReadError", f"cannot access file: {exc.strerror or exc}")


def _is_directory(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()  # follows links: a link to a directory is walked (or reported) like one
    except OSError:  # a link loop
        return False


def _visit(walk: _Walk, path: Path, source_path: str, sibling_names: set[str], ancestors: frozenset[Path]) -> None:
    if path.is_symlink():
        target = _symlink_target(walk, path)
        if target.is_dir():
            # A link to a directory inside the root is followed (an alias, like a file link), unless it leads
            # back into a directory the walk is inside of: that would never end.
            if target in ancestors:
                raise Quarantined(
                    "discover", "SymlinkLoop", f"symlink loop: directory link points back to its own ancestor {target}"
                )
            _walk_dir(walk, target, source_path + "/", ancestors | {target})
            return
    mode = path.stat().st_mode
    is_sidecar = path.name.endswith(SIDECAR_SUFFIX)
    if stat.S_ISDIR(mode):
        _walk_dir(walk, path, source_path + "/", ancestors | {path.resolve()})
    elif is_sidecar and path.name[: -len(SIDECAR_SUFFIX)] in sibling_names:
        return  # metadata, read with its document
    elif not walk.selected(source_path):
        walk.n_skipped += 1
    elif not stat.S_ISREG(mode):
        raise Quarantined("discover", "NotARegularFile", "not a regular file (device, socket or FIFO)")
    elif is_sidecar:
        raise Quarantined(
            "discover", "OrphanSidecar", f"sidecar without a document named {path.name[: -len(SIDECAR_SUFFIX)]!r}"
        )
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
    """The file named and hashed; its bytes are dropped here (the parser reads them again)."""
    config = walk.config
    file_format = BY_EXTENSION.get(path.suffix.lower())
    if file_format is None:
        supported = ", ".join(sorted(BY_EXTENSION))
        raise Quarantined(
            "discover",
            "UnsupportedFileType",
            f"unsupported file type {path.suffix or '(no extension)'!r}; supported: {supported}",
        )
    raw = _read_bytes(path, config.max_file_bytes)
    places = _places(walk, path, source_path)
    front_matter, sidecars, given = _explicit_metadata(walk.root, places, file_format.front_matter, raw, config)
    explicit = front_matter.explicit | sidecars[-1] | sidecars[0]  # the sidecar where the walk found it wins
    doc_id = explicit.get("doc_id", source_path)
    return SourceFile(
        path=path.absolute(),
        source_path=source_path,
        doc_id=doc_id,
        filetype=file_format.filetype,
        content_hash=sha256_hex(raw),
        size_bytes=len(raw),
        access_scope=_access_scope(config, front_matter.explicit, sidecars, places),
        title=explicit.get("title"),
        front_matter=front_matter.as_json,
        source_fields=_source_fields(config, given, source_path, doc_id),
    )


def _places(walk: _Walk, path: Path, source_path: str) -> list[tuple[Path, str]]:
    """Where a file is reachable: as the walk found it (a link's name, or a path through a linked directory)
    and, when that differs, where it really is. Its scope is the strictest of these places' scopes, so a link
    never makes an internal_only file visible."""
    real = path.resolve()
    real_path = unicodedata.normalize("NFC", real.relative_to(walk.root).as_posix())
    return [(path, source_path)] + ([(real, real_path)] if real_path != source_path or real != path else [])


def _read_bytes(path: Path, max_bytes: int) -> bytes:
    size = path.stat().st_size
    if size > max_bytes:
        raise Quarantined(
            "discover", "FileTooLarge", f"file is {size} bytes, over the limit of {max_bytes} (max_file_bytes)"
        )
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


def _explicit_metadata(
    root: Path, places: list[tuple[Path, str]], has_front_matter: bool, raw: bytes, config: ParseConfig
) -> tuple[FrontMatter, list[dict], dict]:
    """(front matter, the sidecar at each of _places, whose keys override the front matter's, and the source
    fields they give). An invalid sidecar quarantines the document: guessing its access_scope could expose an
    internal document. A format with front matter (Markdown, MDX) is decoded as parsing decodes it
    (decode_text), so a Latin-1 or UTF-16 file's front matter is read, and one that cannot be decoded is
    quarantined here."""
    try:
        front_matter = read_front_matter(decode_text(raw)[0] if has_front_matter else "")
        levels = config.authority_levels
        sidecars = [read_sidecar(place.with_name(place.name + SIDECAR_SUFFIX), root, levels) for place, _ in places]
        given = given_source_fields(front_matter_fields(front_matter, config.source_keys(), levels), sidecars)
        return front_matter, sidecars, given
    except MetadataError as exc:
        raise Quarantined("discover", "InvalidMetadata", str(exc)) from exc
    except UndecodableText as exc:
        raise Quarantined("read", "EncodingError", str(exc)) from exc


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
    return SourceFields(**{name: tuple(value) if isinstance(value, list) else value for name, value in fields.items()})


def _access_scope(
    config: ParseConfig, front_matter: dict[str, str], sidecars: list[dict[str, str]], places: list[tuple[Path, str]]
) -> str:
    """The strictest scope any source gives the file: its front matter, and at each place it is reachable from
    (_places) the sidecar there and the first override matching there. Sources that disagree never make a file
    more visible than one of them says; default_access_scope holds only where none says anything."""
    given = [front_matter.get("access_scope")]
    for sidecar, (_, place) in zip(sidecars, places):
        given += [sidecar.get("access_scope"), _override_scope(config, place)]
    said = [scope for scope in given if scope]
    return strictest(said) if said else config.default_access_scope


def _known_scope(walk: _Walk, source_path: str) -> str | None:
    """The level of a file quarantined before its metadata was read: the strictest of the override for its path and
    its sidecar's access_scope, when the sidecar can be read (None: nothing says, which is public)."""
    path = walk.root / source_path
    try:
        sidecar = read_sidecar(path.with_name(path.name + SIDECAR_SUFFIX), walk.root, walk.config.authority_levels).get(
            "access_scope"
        )
    except MetadataError:
        sidecar = None
    said = [scope for scope in (sidecar, _override_scope(walk.config, source_path)) if scope]
    return strictest(said) if said else None


def _override_scope(config: ParseConfig, source_path: str) -> str | None:
    for pattern, scope in config.access_scope_overrides:
        if fnmatch.fnmatchcase(source_path, pattern):
            return scope
    return None


def _quarantine_duplicate_doc_ids(walk: _Walk) -> None:
    """Two files claiming one doc_id: the first (sources are sorted by path) keeps it, the others are quarantined."""
    owner: dict[str, str] = {}
    kept = []
    for source in walk.sources:
        if source.doc_id in owner:
            reason = duplicate_doc_id_reason(source.doc_id, owner[source.doc_id])
            walk.quarantine(source.source_path, "discover", "DuplicateDocId", reason, source.access_scope)
        else:
            owner[source.doc_id] = source.source_path
            kept.append(source)
    walk.sources = kept


def duplicate_doc_id_reason(doc_id: str, owner: str) -> str:
    return f"doc_id {doc_id!r} is already used by {owner}"
