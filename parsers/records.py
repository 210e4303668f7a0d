"""The records parsers/ hands to the store. Field names match citekeeper.schema."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from pathlib import Path

from citekeeper.scope import (
    ACCESS_SCOPES,  # noqa: F401  (re-exported: parsers validate scopes with it)
    AGGREGATE_MARK,
    AGGREGATE_REASON,
    is_aggregate,
)
from citekeeper.sources import DEFAULT_AUTHORITY_LEVELS, DEFAULT_SOURCE_KEYS, DEFAULTABLE_FIELDS, check_url_template
from citekeeper.text import TEXT_RULES_VERSION


@dataclass(frozen=True)
class ParseConfig:
    max_chunk_chars: int = 1000
    max_file_bytes: int = 50 * 1024 * 1024
    default_access_scope: str = "user_visible"
    # Wall-clock limit for parsing one document (None: no limit). A pool worker past it is killed and
    # replaced; a serial parse (workers=1) is interrupted by SIGALRM, in the main thread only.
    parse_timeout_s: float | None = 300.0
    # (glob on source_path, access_scope), first match wins; where a sidecar or front matter disagrees, the strictest holds.
    access_scope_overrides: tuple[tuple[str, str], ...] = ()
    # The sentence and normalisation rules chunks were cut with: new rules re-chunk every document once.
    text_rules: int = TEXT_RULES_VERSION
    # Tesseract languages (as `tesseract --list-langs` names them) for images and scanned PDF pages.
    ocr_languages: tuple[str, ...] = ("eng", "chi_sim")
    # Globs on source_path (see parsers.globs): with includes, only matching files are documents; a file
    # matching an exclude never is. Files left out are counted as skipped, not quarantined.
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    # Processes that parse documents at once (None: one per usable CPU; 1: serially in this process).
    workers: int | None = None
    # What one document may cost; a document over a limit is quarantined as LimitExceeded, naming the setting.
    max_decompressed_bytes: int = 256 * 1024 * 1024  # the members of a ZIP container (docx, xlsx, pptx, odt, epub)
    max_rows_per_sheet: int = 200_000  # a spreadsheet's rows per sheet, or a CSV's rows
    max_chunks_per_document: int = 50_000
    # Address space a parse worker may add beyond what it has when it starts (RLIMIT_AS); None: no cap.
    worker_memory_bytes: int | None = 1536 * 1024 * 1024
    # Source fields from settings, where neither a sidecar nor the front matter gives them (docs/ingest.md,
    # "Source fields"): a URL for every document, e.g. "https://docs.example.com/{path_without_ext}/" (None:
    # none), with citekeeper.sources.URL_PLACEHOLDERS ...
    source_url_template: str | None = None
    # ... and (glob on source_path, field, value): a DEFAULTABLE_FIELDS value, the first matching glob per field.
    source_defaults: tuple[tuple[str, str, str], ...] = ()
    # (field, front matter keys) pairs replacing that field's DEFAULT_SOURCE_KEYS; no keys: never from front matter.
    source_fields_map: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # The authority vocabulary, most authoritative first: a document's `authority` must be one of them.
    authority_levels: tuple[str, ...] = DEFAULT_AUTHORITY_LEVELS

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
                    f"source_fields_map: unknown field {name!r}; fields read from front matter: {list(DEFAULT_SOURCE_KEYS)}"
                )
        for glob, name, value in self.source_defaults:
            if name not in DEFAULTABLE_FIELDS:
                raise ValueError(
                    f"source_defaults {glob!r}: field {name!r} cannot be set by glob; only {list(DEFAULTABLE_FIELDS)}"
                )
            if name == "authority" and value not in levels:
                raise ValueError(
                    f"source_defaults {glob!r}: authority {value!r} is not one of authority_levels {list(levels)}"
                )

    def source_keys(self) -> dict[str, tuple[str, ...]]:
        """Each source field's front matter keys: DEFAULT_SOURCE_KEYS with source_fields_map's replacements."""
        return DEFAULT_SOURCE_KEYS | {name: tuple(keys) for name, keys in self.source_fields_map}


# Settings that decide which files are read, how long a parse may take, which access_scope and source fields a
# document gets, but never what a document parses into: changing them re-parses nothing. (A document whose scope,
# title, doc_id or source fields change is re-parsed on its own: ingest compares those per document.) Any other
# setting, a new one included, counts as a parse setting, so an unknown effect re-parses rather than reusing
# stale output.
RUN_SETTINGS = frozenset(
    {
        "max_file_bytes",
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
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return values | {name: list(values[name]) or None for name in ("access_groups", "scope_labels")}

    def fingerprint(self) -> str | None:
        """The values as one JSON text, for the tree's corpus_hash; None when nothing is said."""
        if self == SourceFields():
            return None
        return json.dumps(self.columns(), sort_keys=True, default=datetime.isoformat, ensure_ascii=False)


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
