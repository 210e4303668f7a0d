"""The records parsers/ hands to the store. Field names match citekeeper.schema."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from pathlib import Path
from types import GenericAlias
from typing import Any, TypeVar, get_args, get_origin, get_type_hints

from pydantic import BaseModel, Field, create_model

from citekeeper import schema
from citekeeper.scope import (
    ACCESS_SCOPES,  # noqa: F401  (re-exported: parsers validate scopes with it)
    AGGREGATE_MARK,
    AGGREGATE_REASON,
    is_aggregate,
)
from citekeeper.sources import (
    DEFAULT_AUTHORITY_LEVELS,
    DEFAULT_SOURCE_KEYS,
    DEFAULTABLE_FIELDS,
    URL_PLACEHOLDERS,
    check_url_template,
)
from citekeeper.text import TEXT_RULES_VERSION


def _setting(default: Any, help: str, **how: Any) -> Any:
    """A ParseConfig field people set (a Setting in SETTINGS). `how`: a Setting's resource_field, option, minimum
    or metavar where the default (the field's name, --field-name, none) does not do."""
    return field(default=default, metadata={"setting": {"help": help, **how}})


@dataclass(frozen=True)
class ParseConfig:
    """How a source tree is parsed. The fields made with _setting are the settings people give: declared here
    once, with their type, default and help, and made into the ingest resource's fields and the `citekeeper
    ingest` options from SETTINGS."""

    max_chunk_chars: int = _setting(1000, "Chunk size limit, in characters.", minimum=50)
    max_file_bytes: int = _setting(50 * 1024 * 1024, "Largest file read, in bytes.", minimum=1)
    # Unchanged files cost a stat: a file whose size, mtime, ctime and inode are what they were when it was read
    # last keeps the hash read then (docs/ingest.md, "What a run reads").
    rehash: bool = _setting(
        False,
        "Read and hash every document again, trusting no file's size, times and inode nor an object's stamp (for "
        "filesystems whose timestamps cannot be trusted).",
    )
    default_access_scope: str = "user_visible"
    # A pool worker past it is killed and replaced; a serial parse (workers=1) is interrupted by SIGALRM, in the
    # main thread only.
    parse_timeout_s: float | None = _setting(
        300.0, "Seconds one document may take to parse (None: no limit).", option="--parse-timeout", minimum=1
    )
    # (glob on source_path, access_scope), first match wins; where a sidecar or front matter disagrees, the
    # strictest holds.
    access_scope_overrides: tuple[tuple[str, str], ...] = ()
    # The sentence and normalisation rules chunks were cut with: new rules re-chunk every document once.
    text_rules: int = TEXT_RULES_VERSION
    ocr_languages: tuple[str, ...] = _setting(
        ("eng", "chi_sim"),
        "Tesseract languages (as `tesseract --list-langs` names them) for OCR of images and scanned pages, one "
        "language pack each.",
        option="--ocr-lang",
        metavar="CODE",
    )
    # Globs on source_path (see parsers.globs). Files left out are counted as skipped, not quarantined.
    include: tuple[str, ...] = _setting(
        (),
        "Ingest only files whose path under the source root matches a GLOB: `*` stays within a folder, `**/` "
        "spans any depth ('**/*.md'). Files left out are counted as skipped.",
        metavar="GLOB",
    )
    exclude: tuple[str, ...] = _setting(
        (),
        "Never ingest files matching a GLOB, e.g. 'drafts/**'; they are counted as skipped, not quarantined, so a "
        "strict ingest still holds.",
        metavar="GLOB",
    )
    workers: int | None = _setting(
        None,
        "Processes parsing documents at once (default: one per CPU the run may use; 1: parse in this process).",
        resource_field="parse_workers",
        minimum=1,
    )
    # What one document may cost; a document over a limit is quarantined as LimitExceeded, naming the setting.
    max_decompressed_bytes: int = _setting(
        256 * 1024 * 1024, "Most a ZIP-based document (docx, xlsx, pptx, odt, epub) may unpack to, in bytes.", minimum=1
    )
    max_rows_per_sheet: int = _setting(200_000, "Most rows of one sheet or CSV.", minimum=1)
    max_chunks_per_document: int = _setting(50_000, "Most chunks of one document.", minimum=1)
    worker_memory_bytes: int | None = _setting(
        1536 * 1024 * 1024,
        "Address space a parse worker may add beyond what it has when it starts (RLIMIT_AS; None: no cap).",
        minimum=64 * 1024 * 1024,
    )
    # Source fields from settings, where neither a sidecar nor the front matter gives them (docs/ingest.md,
    # "Source fields").
    source_url_template: str | None = _setting(
        None,
        "Every document's source_url where its sidecar or front matter gives none, e.g. "
        "'https://docs.example.com/{path_without_ext}/'; placeholders: "
        + ", ".join(f"{{{name}}}" for name in URL_PLACEHOLDERS)
        + ". A relative URL a page gives (url: /about/) is resolved against it.",
        metavar="TEMPLATE",
    )
    source_defaults: tuple[tuple[str, str, str], ...] = _setting(
        (),
        f"{', '.join(DEFAULTABLE_FIELDS)} of the documents matching a glob (fnmatch) that do not give one, as "
        "(glob, field, value); the first matching glob per field wins.",
        option="--source-default",
        metavar="GLOB FIELD=VALUE",
    )
    source_fields_map: tuple[tuple[str, tuple[str, ...]], ...] = _setting(
        (),
        "The front matter keys a source field is read from, first present first, replacing its default list (no "
        "keys: never from front matter), e.g. updated_at: modified, lastmod.",
        option="--source-field",
        metavar="FIELD=KEY[,KEY...]",
    )
    authority_levels: tuple[str, ...] = _setting(
        DEFAULT_AUTHORITY_LEVELS,
        "The authority vocabulary, most authoritative first: a document's `authority` must be one of them.",
    )

    @classmethod
    def from_settings(cls, values: Mapping[str, Any]) -> ParseConfig:
        """The config of `values` by field name, as plain values (lists, a dict of lists); fields left out keep
        their defaults. How the ingest resource and `citekeeper ingest` build theirs."""
        return cls(**{name: _frozen(value) for name, value in values.items()})

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers must be at least 1 (or None for one per CPU), got {self.workers}")
        self._check_source_settings()

    def _check_source_settings(self) -> None:
        """The source settings refused when they are built, not document by document."""
        if self.source_url_template is not None:
            check_url_template(self.source_url_template)
        levels = self.authority_levels
        if (
            not levels
            or len(set(levels)) < len(levels)
            or not all(isinstance(level, str) and level.strip() for level in levels)
        ):
            raise ValueError(
                f"authority_levels must be distinct, non-empty names, most authoritative first; got {list(levels)}"
            )
        for name, _ in self.source_fields_map:
            if name not in DEFAULT_SOURCE_KEYS:
                raise ValueError(
                    f"source_fields_map: unknown field {name!r}; fields read from front matter: "
                    f"{list(DEFAULT_SOURCE_KEYS)}"
                )
        for entry in self.source_defaults:
            if len(entry) != 3:
                raise ValueError(f"source_defaults: each entry is [glob, field, value], got {list(entry)!r}")
            glob, name, value = entry
            if name not in DEFAULTABLE_FIELDS:
                raise ValueError(
                    f"source_defaults {glob!r}: field {name!r} cannot be set by glob; only {list(DEFAULTABLE_FIELDS)}"
                )
            if name == "authority" and value not in levels:
                raise ValueError(
                    f"source_defaults {glob!r}: authority {value!r} is not one of authority_levels {list(levels)}"
                )

    @functools.cached_property
    def source_keys(self) -> dict[str, tuple[str, ...]]:
        """Each source field's front matter keys: DEFAULT_SOURCE_KEYS with source_fields_map's replacements (once:
        discovery asks for every document)."""
        return DEFAULT_SOURCE_KEYS | {name: tuple(keys) for name, keys in self.source_fields_map}


@dataclass(frozen=True)
class Setting:
    """A ParseConfig field people set, as the ingest resource and `citekeeper ingest` give it."""

    name: str  # the ParseConfig field
    help: str
    resource_field: str  # assets.resources.IngestResource's field
    option: str  # `citekeeper ingest`'s option
    minimum: float | None  # the least value the option takes
    metavar: str | None
    type: Any  # as plain values (what a resource's config holds): tuples as lists, (name, values) pairs as a dict
    default: Any  # likewise


def _plain_type(hint: Any) -> Any:
    """`hint` with tuples as lists and a tuple of (name, values) pairs as a dict."""
    if get_origin(hint) is not tuple:
        return hint
    item = get_args(hint)[0]
    if get_origin(item) is not tuple:
        return GenericAlias(list, item)
    first, *rest = get_args(item)
    if len(rest) == 1 and get_origin(rest[0]) is tuple:
        return GenericAlias(dict, (first, _plain_type(rest[0])))
    return GenericAlias(list, GenericAlias(list, first))


def _plain(value: Any, kind: Any) -> Any:
    if get_origin(kind) is dict:
        return {name: list(values) for name, values in value}
    if get_origin(kind) is list:
        return [list(v) if isinstance(v, tuple) else v for v in value]
    return value


def _frozen(value: Any) -> Any:
    """A plain value as ParseConfig holds it: lists as tuples, a dict as (name, values) pairs."""
    if isinstance(value, dict):
        return tuple((name, _frozen(values)) for name, values in value.items())
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


def _settings() -> tuple[Setting, ...]:
    hints = get_type_hints(ParseConfig)
    settings = []
    for declared in fields(ParseConfig):
        if "setting" not in declared.metadata:
            continue
        how = declared.metadata["setting"]
        kind = _plain_type(hints[declared.name])
        settings.append(
            Setting(
                name=declared.name,
                help=how["help"],
                resource_field=how.get("resource_field", declared.name),
                option=how.get("option", "--" + declared.name.replace("_", "-")),
                minimum=how.get("minimum"),
                metavar=how.get("metavar"),
                type=kind,
                default=_plain(declared.default, kind),
            )
        )
    return tuple(settings)


SETTINGS = _settings()  # in declaration order
Model = TypeVar("Model", bound=BaseModel)


def with_parse_settings(model: type[Model]) -> type[Model]:
    """`model` (a pydantic model, the ingest resource) with a field per Setting: its resource_field, plain type,
    default and help. A class decorator, so that a type checker sees the class as it is written."""
    declared: Any = {s.resource_field: (s.type, Field(s.default, description=s.help)) for s in SETTINGS}
    return create_model(model.__name__, __base__=model, __module__=model.__module__, __doc__=model.__doc__, **declared)


def parse_config_of(holder: object) -> ParseConfig:
    """The ParseConfig of an object holding every Setting as its resource_field (the ingest resource)."""
    return ParseConfig.from_settings({s.name: getattr(holder, s.resource_field) for s in SETTINGS})


# Settings that decide which files are read, how long a parse may take, which access_scope and source fields a
# document gets, but never what a document parses into: changing them re-parses nothing. (A document whose scope,
# title, doc_id or source fields change is re-parsed on its own: ingest compares those per document.) Any other
# setting, a new one included, counts as a parse setting, so an unknown effect re-parses rather than reusing
# stale output.
RUN_SETTINGS = frozenset(
    {
        "max_file_bytes",
        "rehash",
        "parse_timeout_s",
        "default_access_scope",
        "access_scope_overrides",
        "include",
        "exclude",
        "workers",
        "max_decompressed_bytes",
        "max_rows_per_sheet",
        "max_chunks_per_document",
        "worker_memory_bytes",
        "source_url_template",
        "source_defaults",
        "source_fields_map",
        "authority_levels",
    }
)


@dataclass(frozen=True)
class SourceFields:
    """A document's source model (citekeeper.schema.SOURCE_FIELDS): None or empty where nothing says."""

    source_type: str | None = None
    source_url: str | None = None
    published_at: datetime | None = None  # UTC
    updated_at: datetime | None = None
    authority: str | None = None
    source_version: str | None = None
    summary: str | None = None
    access_groups: tuple[str, ...] = ()
    scope_labels: tuple[str, ...] = ()

    def columns(self) -> dict:
        """The values as SOURCE_FIELDS columns (lists for the label fields, null when empty)."""
        values = {name: getattr(self, name) for name in SOURCE_FIELD_NAMES}
        return values | {name: list(values[name]) or None for name in ("access_groups", "scope_labels")}

    def fingerprint(self) -> str | None:
        """The values as one JSON text, for the tree's corpus_hash; None when nothing is said."""
        if self == _NO_SOURCE_FIELDS:
            return None
        return json.dumps(self.columns(), sort_keys=True, default=datetime.isoformat, ensure_ascii=False)


# The source model's columns (citekeeper.schema.SOURCE_FIELDS), a SourceFields' fields by name; and the empty
# value. Made once, not per document: discovery and the reuse check ask every document of a tree.
SOURCE_FIELD_NAMES = tuple(f.name for f in schema.SOURCE_FIELDS)
_NO_SOURCE_FIELDS = SourceFields()


@dataclass(frozen=True)
class SourceFile:
    """A file found under the source root, hashed and named; not parsed yet."""

    path: Path  # absolute
    source_path: str  # posix path relative to the source root
    doc_id: str
    filetype: str  # a parsers.formats filetype: md, html, pdf, pptx, xlsx, eml, png, ...
    content_hash: str  # "sha256:" + hex of the raw bytes
    size_bytes: int
    access_scope: str
    title: str | None = None  # explicit title from a sidecar / front matter
    front_matter: str | None = None  # the whole front matter as JSON; None when the file has none
    source_fields: SourceFields = SourceFields()  # sidecar, front matter, then settings (parsers.discover)
    # The document's bytes when a caller already holds them; None (what discovery gives, so that a tree is
    # never held in memory): the parser reads `path` again and checks it against content_hash.
    raw: bytes | None = field(default=None, repr=False, compare=False)

    @property
    def source_fields_key(self) -> str | None:
        return self.source_fields.fingerprint()


@dataclass(frozen=True)
class Locator:
    """Where one element sits in its source format, beyond its offsets into the canonical text.

    slide, sheet and part are containers: a chunk never spans two of them (nor two sections).
    """

    page: int | None = None  # PDF page, image frame (1-based)
    slide: int | None = None  # slide number of a deck (1-based)
    sheet: str | None = None  # sheet name of a workbook; CSV/TSV have none
    row_start: int | None = None  # spreadsheet rows the element covers (1-based, as the sheet numbers them)
    row_end: int | None = None
    part: str | None = None  # e-mail: "body", or the attachment's file name
    ocr: bool = False  # the text was recognised from pixels (Tesseract), not read from a text layer

    @property
    def container(self) -> tuple:
        return (self.slide, self.sheet, self.part)


@dataclass(frozen=True)
class EmailHeader:
    """A message's own metadata, as its headers give it."""

    subject: str | None
    sender: str | None
    sent_at: str | None  # ISO 8601


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    ordinal: int
    text: str
    text_hash: str
    start_char: int
    end_char: int
    page_start: int | None
    page_end: int | None
    section_path: list[str]
    element_types: list[str]
    slide_number: int | None = None
    sheet_name: str | None = None
    row_start: int | None = None
    row_end: int | None = None
    email_part: str | None = None
    ocr: bool = False  # some of the chunk's text came from OCR


@dataclass
class ParsedDocument:
    source: SourceFile
    text: str  # canonical text: text[c.start_char:c.end_char] == c.text for every chunk
    title: str | None
    chunks: list[Chunk] = field(default_factory=list)
    encoding: str | None = None  # the text encoding a text format was decoded from (None: binary format)
    email: EmailHeader | None = None


@dataclass(frozen=True)
class IngestError:
    source_path: str
    stage: str  # discover | read | parse | chunk
    error_type: str
    reason: str
    access_scope: str | None = None  # the file's level where known (INGEST_ERRORS.access_scope)

    def shared(self) -> IngestError:
        """The error as a printed line or recorded metadata shows it: an aggregate_only file neither named nor
        described."""
        return (
            replace(self, source_path=AGGREGATE_MARK, reason=AGGREGATE_REASON)
            if is_aggregate(self.access_scope)
            else self
        )


@dataclass(frozen=True)
class SkippedDocument:
    """A file with nothing to cite (a page of front matter only): left out of the version and listed, not an error."""

    source_path: str
    reason: str  # no_text


def over_limit(source_path: str, stage: str, what: str, setting: str, limit: int) -> DocumentError:
    """The error of a document over one of ParseConfig's cost limits."""
    return DocumentError(
        source_path, stage, f"{what}, over the limit of {limit:,} ({setting})", error_type="LimitExceeded"
    )


class DocumentError(Exception):
    """One document could not be ingested; the run goes on without it."""

    def __init__(self, source_path: str, stage: str, reason: str, error_type: str | None = None):
        super().__init__(f"{source_path}: {stage}: {reason}")
        self.error = IngestError(source_path, stage, error_type or type(self).__name__, reason)


class NothingToCite(DocumentError):
    """The document holds no body text at all (as its source shows, not as a parser returned): it is skipped."""

    def __init__(self, source_path: str):
        super().__init__(source_path, "parse", "no body text: nothing to cite", error_type="NoText")
        self.skipped = SkippedDocument(source_path, "no_text")
