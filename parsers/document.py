"""One document -> elements (unstructured) -> canonical text -> chunks.

Canonical text: the texts of the document's non-empty elements, each stripped, joined by a blank line.
Each element's span is recorded while the text is built, so chunk offsets cost nothing extra.
Headings stay in the text as their own elements; each heading opens its section's first chunk.
"""
from __future__ import annotations

import codecs
import io
import os
import re
import zipfile
from collections.abc import Callable

from parsers.chunking import HEADING_CATEGORY, Block, chunk_document
from citekeeper.identity import sha256_hex
from parsers.metadata import MetadataError, split_front_matter
from parsers.model import DocumentError, ParseConfig, ParsedDocument, SourceFile
from parsers.time_limit import ParseTimeout, time_limit

ELEMENT_SEPARATOR = "\n\n"
_HTML_CHARSET = re.compile(rb"<meta[^>]{0,200}?charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:-]+)", re.I)


def parse_document(source: SourceFile, config: ParseConfig) -> ParsedDocument:
    """Raises DocumentError (naming the file) for anything that cannot be parsed into at least one chunk."""
    text, blocks = extract_blocks(source, config)
    try:
        chunks = chunk_document(source.doc_id, text, blocks, config.max_chunk_chars)
    except Exception as exc:  # a chunker bug must quarantine one document, not sink the run
        raise DocumentError(source.source_path, "chunk", f"{type(exc).__name__}: {exc}", error_type="ChunkerCrash") from exc
    title = source.title or next((text[b.start : b.end] for b in blocks if b.is_heading), None)
    return ParsedDocument(source=source, text=text, title=title, chunks=chunks)


def extract_blocks(source: SourceFile, config: ParseConfig) -> tuple[str, list[Block]]:
    """The document's canonical text and its elements' spans; raises DocumentError when there is no text."""
    elements = partition_elements(source, config)
    text, blocks = canonical_text(elements, with_pages=source.filetype == "pdf")
    if not blocks:
        reason = "no text extracted" + (" (no text layer? OCR is not enabled)" if source.filetype == "pdf" else "")
        raise DocumentError(source.source_path, "parse", reason, error_type="NoText")
    return text, blocks


def canonical_text(elements: list, with_pages: bool = False) -> tuple[str, list[Block]]:
    """Join element texts; return the text and each element's span of it (empty elements are dropped)."""
    parts: list[str] = []
    blocks: list[Block] = []
    position = 0
    for element in elements:
        element_text = (element.text or "").strip()
        if not element_text:
            continue
        if parts:
            parts.append(ELEMENT_SEPARATOR)
            position += len(ELEMENT_SEPARATOR)
        parts.append(element_text)
        metadata = element.metadata
        is_heading = element.category == HEADING_CATEGORY
        blocks.append(
            Block(
                start=position,
                end=position + len(element_text),
                category=element.category,
                page=metadata.page_number if with_pages else None,
                heading_depth=(metadata.category_depth or 0) if is_heading else None,
            )
        )
        position += len(element_text)
    return "".join(parts), blocks


def _raw_bytes(source: SourceFile) -> bytes:
    if source.raw is not None:
        return source.raw
    try:
        raw = source.path.read_bytes()
    except OSError as exc:
        raise DocumentError(source.source_path, "read", f"cannot read file: {exc.strerror or exc}", error_type="ReadError") from exc
    if sha256_hex(raw) != source.content_hash:
        raise DocumentError(source.source_path, "read", "file changed since it was discovered", error_type="ChangedDuringIngest")
    return raw


def partition_elements(source: SourceFile, config: ParseConfig) -> list:
    """unstructured's elements for the document, exactly as parse_document partitions it."""
    raw = _raw_bytes(source)
    partitioner = _PARTITIONERS[source.filetype]
    # unstructured prints an advert on its first partition call (a banner on a terminal's stdout, else a
    # log warning) unless this is set; setdefault keeps a user's own choice.
    os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
    try:
        with time_limit(config.parse_timeout_s):
            return partitioner(source, raw)
    except ParseTimeout:
        reason = f"parsing took longer than {config.parse_timeout_s:g} s (parse_timeout_s); file skipped"
        raise DocumentError(source.source_path, "parse", reason, error_type="ParseTimeout") from None
    except DocumentError:
        raise
    except Exception as exc:  # unstructured and its backends raise anything on malformed input
        reason = f"{source.filetype} parser failed: {type(exc).__name__}: {exc}"
        raise DocumentError(source.source_path, "parse", reason, error_type="ParserError") from exc


def decode_utf8(source: SourceFile, raw: bytes) -> str:
    """Strict UTF-8 (a BOM is dropped; a UTF-16 BOM means UTF-16): silently replacing bytes would make
    citations quote text that isn't there."""
    encoding = "utf-16" if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) else "utf-8-sig"
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.start + 1].hex()
        reason = f"not valid {encoding.upper().removesuffix('-SIG')}: byte 0x{bad} at offset {exc.start} ({exc.reason}); re-save the file as UTF-8"
        raise DocumentError(source.source_path, "read", reason, error_type="EncodingError") from exc


def _decode_html(source: SourceFile, raw: bytes) -> str:
    declared = _HTML_CHARSET.search(raw[:4096])
    if declared and declared.group(1).lower() not in (b"utf-8", b"utf8"):
        encoding = declared.group(1).decode("ascii")
        try:
            return raw.decode(encoding)
        except (LookupError, UnicodeDecodeError) as exc:
            raise DocumentError(source.source_path, "read", f"cannot decode as declared charset {encoding!r}: {exc}", error_type="EncodingError") from exc
    return decode_utf8(source, raw)


def _partition_md(source: SourceFile, raw: bytes) -> list:
    from unstructured.partition.md import partition_md

    try:
        _, body = split_front_matter(decode_utf8(source, raw))
    except MetadataError as exc:  # discovery already quarantined such files; this keeps parse_document total
        raise DocumentError(source.source_path, "read", str(exc), error_type="InvalidMetadata") from exc
    return partition_md(text=body)


def _partition_html(source: SourceFile, raw: bytes) -> list:
    from unstructured.partition.html import partition_html

    return partition_html(text=_decode_html(source, raw))


def _partition_txt(source: SourceFile, raw: bytes) -> list:
    from unstructured.partition.text import partition_text

    return partition_text(text=decode_utf8(source, raw))


def _partition_rst(source: SourceFile, raw: bytes) -> list:
    from unstructured.partition.rst import partition_rst

    text = decode_utf8(source, raw)  # pandoc would replace bad bytes silently
    return partition_rst(file=io.BytesIO(text.encode("utf-8")))


def _partition_pdf(source: SourceFile, raw: bytes) -> list:
    if b"%PDF-" not in raw[:1024]:
        raise DocumentError(source.source_path, "parse", "not a PDF: no %PDF- header in the first 1024 bytes", error_type="NotAPdf")
    from unstructured.partition.pdf import partition_pdf

    # strategy="fast": the PDF's own text layer via pdfminer; no OCR, no layout model. languages=["eng"] is
    # unstructured's own default, given explicitly so it does not warn on every PDF.
    return partition_pdf(file=io.BytesIO(raw), strategy="fast", languages=["eng"])


def _partition_docx(source: SourceFile, raw: bytes) -> list:
    buffer = io.BytesIO(raw)
    if not zipfile.is_zipfile(buffer) or "word/document.xml" not in zipfile.ZipFile(buffer).namelist():
        raise DocumentError(source.source_path, "parse", "not a valid .docx: not a ZIP archive holding word/document.xml", error_type="CorruptDocx")
    from unstructured.partition.docx import partition_docx

    return partition_docx(file=io.BytesIO(raw))


_PARTITIONERS: dict[str, Callable[[SourceFile, bytes], list]] = {
    "md": _partition_md,
    "html": _partition_html,
    "txt": _partition_txt,
    "rst": _partition_rst,
    "pdf": _partition_pdf,
    "docx": _partition_docx,
}
