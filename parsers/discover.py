"""Discovery: every file the walk of a source root selects (parsers.source_tree) is read, hashed and named (its
doc_id), anything unusable is quarantined, and no file's bytes are kept (the parser reads each again and checks
its hash). The rules: docs/ingest.md ("Choosing files", "Data model")."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from citekeeper.identity import sha256_hex
from citekeeper.scope import strictest
from citekeeper.sources import render_source_url
from parsers.formats import BY_EXTENSION
from parsers.formats.text import UndecodableText, decode_text
from parsers.metadata import (
    FrontMatter,
    MetadataError,
    front_matter_fields,
    given_source_fields,
    read_front_matter,
    read_sidecar,
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


@dataclass(frozen=True)
class Discovery:
    """What one discovery found."""

    sources: list[SourceFile]  # sorted by source_path
    errors: list[IngestError]  # sorted by source_path
    n_skipped: int  # files include/exclude left out


def _owns_every_path(source_path: str) -> bool:
    return True


@dataclass
class _Found:
    root: Path  # resolved
    config: ParseConfig
    sources: list[SourceFile] = field(default_factory=list)
    errors: list[IngestError] = field(default_factory=list)
    n_skipped: int = 0

    def quarantine(self, source_path: str, why: Quarantined, access_scope: str | None = None) -> None:
        """An IngestError for a file; its access_scope, unless given, as far as it can be known (_known_scope)."""
        scope = access_scope or _known_scope(self, source_path)
        self.errors.append(IngestError(source_path, why.stage, why.error_type, why.reason, scope))


def discover_sources(root: Path, config: ParseConfig) -> tuple[list[SourceFile], list[IngestError]]:
    """All documents under root, sorted by source_path, and an IngestError for each file that is unusable."""
    found = discover(root, config)
    return found.sources, found.errors


def discover(root: Path, config: ParseConfig, owns: Callable[[str], bool] = _owns_every_path) -> Discovery:
    """The documents under root whose source_path `owns` accepts (a shard's share; all by default)."""
    root = Path(root)
    if not root.is_dir():
        raise NotADirectoryError(f"source root {root} is not a directory")
    found = _Found(root.resolve(), config)
    for entry in walk_source_tree(found.root, config, owns):
        match entry:
            case TreeFile():
                try:
                    found.sources.append(_read_source(found, entry))
                except Quarantined as q:
                    found.quarantine(entry.source_path, q)
                except OSError as exc:  # vanished or unreadable between listing and reading
                    found.quarantine(entry.source_path, access_error(exc))
            case Rejected(source_path=source_path, why=why):
                found.quarantine(source_path, why)
            case Skipped():
                found.n_skipped += 1
    found.sources.sort(key=lambda source: source.source_path)
    _quarantine_duplicate_doc_ids(found)
    found.errors.sort(key=lambda error: error.source_path)
    return Discovery(found.sources, found.errors, found.n_skipped)


# ---------------------------------------------------------------------- one document


def _read_source(found: _Found, file: TreeFile) -> SourceFile:
    """The file named and hashed; its bytes are dropped here (the parser reads them again)."""
    config, path, source_path = found.config, file.path, file.source_path
    file_format = BY_EXTENSION.get(path.suffix.lower())
    if file_format is None:
        supported = ", ".join(sorted(BY_EXTENSION))
        raise Quarantined(
            "discover",
            "UnsupportedFileType",
            f"unsupported file type {path.suffix or '(no extension)'!r}; supported: {supported}",
        )
    raw = _read_bytes(path, file.stat.st_size, config.max_file_bytes)
    front_matter, sidecars, given = _explicit_metadata(found.root, file.places, file_format.front_matter, raw, config)
    explicit = front_matter.explicit | sidecars[-1] | sidecars[0]  # the sidecar where the walk found it wins
    doc_id = explicit.get("doc_id", source_path)
    return SourceFile(
        path=path.absolute(),
        source_path=source_path,
        doc_id=doc_id,
        filetype=file_format.filetype,
        content_hash=sha256_hex(raw),
        size_bytes=len(raw),
        access_scope=_access_scope(config, front_matter.explicit, sidecars, file.places),
        title=explicit.get("title"),
        front_matter=front_matter.as_json,
        source_fields=_source_fields(config, given, source_path, doc_id),
    )


def _read_bytes(path: Path, size: int, max_bytes: int) -> bytes:
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
    root: Path, places: tuple[tuple[Path, str], ...], has_front_matter: bool, raw: bytes, config: ParseConfig
) -> tuple[FrontMatter, list[dict], dict]:
    """(front matter, the sidecar at each of the file's places, whose keys override the front matter's, and the
    source fields they give). An invalid sidecar quarantines the document: guessing its access_scope could expose an
    internal document. A format with front matter (Markdown, MDX) is decoded as parsing decodes it
    (decode_text), so a Latin-1 or UTF-16 file's front matter is read, and one that cannot be decoded is
    quarantined here."""
    try:
        front_matter = read_front_matter(decode_text(raw)[0] if has_front_matter else "")
        levels = config.authority_levels
        sidecars = [read_sidecar(sidecar_path(place), root, levels) for place, _ in places]
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
    values: dict[str, Any] = {
        name: tuple(value) if isinstance(value, list) else value for name, value in fields.items()
    }
    return SourceFields(**values)


def _access_scope(
    config: ParseConfig,
    front_matter: dict[str, str],
    sidecars: list[dict[str, str]],
    places: tuple[tuple[Path, str], ...],
) -> str:
    """The strictest scope any source gives the file: its front matter, and at each place it is reachable from
    (TreeFile.places) the sidecar there and the first override matching there. Sources that disagree never make a
    file more visible than one of them says; default_access_scope holds only where none says anything."""
    given = [front_matter.get("access_scope")]
    for sidecar, (_, place) in zip(sidecars, places):
        given += [sidecar.get("access_scope"), _override_scope(config, place)]
    said = [scope for scope in given if scope]
    return strictest(said) if said else config.default_access_scope


def _known_scope(found: _Found, source_path: str) -> str | None:
    """The level of a file quarantined before its metadata was read: the strictest of the override for its path and
    its sidecar's access_scope, when the sidecar can be read (None: nothing says, which is public)."""
    sidecar = sidecar_path(found.root / source_path)
    try:
        sidecar_scope = read_sidecar(sidecar, found.root, found.config.authority_levels).get("access_scope")
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
