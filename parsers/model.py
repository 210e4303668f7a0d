"""The records parsers/ hands to the store. Field names match citekeeper.schema."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from citekeeper.text import TEXT_RULES_VERSION

ACCESS_SCOPES = ("user_visible", "internal_only")


@dataclass(frozen=True)
class ParseConfig:
    max_chunk_chars: int = 1000
    max_file_bytes: int = 50 * 1024 * 1024
    default_access_scope: str = "user_visible"
    # Wall-clock limit for partitioning one document (None: no limit); enforced in the main thread only.
    parse_timeout_s: float | None = 300.0
    # (glob on source_path, access_scope), first match wins; a sidecar or front matter still overrides.
    access_scope_overrides: tuple[tuple[str, str], ...] = ()
    # The sentence and normalisation rules chunks were cut with: new rules re-chunk every document once.
    text_rules: int = TEXT_RULES_VERSION


@dataclass(frozen=True)
class SourceFile:
    """A file found under the source root, read once and hashed; not parsed yet."""

    path: Path  # absolute
    source_path: str  # posix path relative to the source root
    doc_id: str
    filetype: str  # a parsers.formats filetype: md, html, pdf, pptx, xlsx, eml, png, ...
    content_hash: str  # "sha256:" + hex of the raw bytes
    size_bytes: int
    access_scope: str
    title: str | None = None  # explicit title from a sidecar / front matter
    # The bytes read at discovery, so a document is read once; None means read `path` again at parse time.
    raw: bytes | None = field(default=None, repr=False, compare=False)


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


class DocumentError(Exception):
    """One document could not be ingested; the run goes on without it."""

    def __init__(self, source_path: str, stage: str, reason: str, error_type: str | None = None):
        super().__init__(f"{source_path}: {stage}: {reason}")
        self.error = IngestError(source_path, stage, error_type or type(self).__name__, reason)
