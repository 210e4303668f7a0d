"""One document -> elements (unstructured) -> canonical text -> chunks. The canonical text is the stripped texts
of the non-empty elements joined by a blank line, each element's span recorded as it is built; headings stay
in it as their own elements."""

from __future__ import annotations

import os
from collections.abc import Callable

from citekeeper.identity import sha256_hex
from parsers.chunking import HEADING_CATEGORY, Block, bounded_title, chunk_document
from parsers.formats import BY_FILETYPE, Partitioned, no_locator
from parsers.records import DocumentError, Locator, ParseConfig, ParsedDocument, SourceFile, over_limit
from parsers.time_limit import ParseTimeout, time_limit

ELEMENT_SEPARATOR = "\n\n"


def parse_document(source: SourceFile, config: ParseConfig) -> ParsedDocument:
    """Raises DocumentError (naming the file) for anything that cannot be parsed into at least one chunk."""
    partitioned = partition_elements(source, config)
    text, blocks = _blocks(source, partitioned)
    try:
        chunks = chunk_document(source.doc_id, text, blocks, config.max_chunk_chars)
    except Exception as exc:  # a chunker bug must quarantine one document, not sink the run
        raise DocumentError(
            source.source_path, "chunk", f"{type(exc).__name__}: {exc}", error_type="ChunkerCrash"
        ) from exc
    if len(chunks) > config.max_chunks_per_document:
        raise over_limit(
            source.source_path,
            "chunk",
            f"it has {len(chunks):,} chunks",
            "max_chunks_per_document",
            config.max_chunks_per_document,
        )
    title = source.title or next((bounded_title(text[b.start : b.end]) for b in blocks if b.is_heading), None)
    return ParsedDocument(
        source=source, text=text, title=title, chunks=chunks, encoding=partitioned.encoding, email=partitioned.email
    )


def extract_blocks(source: SourceFile, config: ParseConfig) -> tuple[str, list[Block]]:
    """The document's canonical text and its elements' spans; raises DocumentError when there is no text."""
    return _blocks(source, partition_elements(source, config))


def _blocks(source: SourceFile, partitioned: Partitioned) -> tuple[str, list[Block]]:
    text, blocks = canonical_text(partitioned.elements, partitioned.locate)
    if not blocks:
        raise DocumentError(source.source_path, "parse", "no text extracted", error_type="NoText")
    return text, blocks


def canonical_text(elements: list, locate: Callable[[object], Locator] = no_locator) -> tuple[str, list[Block]]:
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
        is_heading = element.category == HEADING_CATEGORY
        blocks.append(
            Block(
                start=position,
                end=position + len(element_text),
                category=element.category,
                heading_depth=(element.metadata.category_depth or 0) if is_heading else None,
                locator=locate(element),
            )
        )
        position += len(element_text)
    return "".join(parts), blocks


def _raw_bytes(source: SourceFile) -> bytes:
    """The bytes discovery hashed: read again, at most one byte past the size it saw (a file that grew since
    costs no more memory than it had), and checked against the hash."""
    if source.raw is not None:
        return source.raw
    try:
        with source.path.open("rb") as handle:
            raw = handle.read(source.size_bytes + 1)
    except OSError as exc:
        raise DocumentError(
            source.source_path, "read", f"cannot read file: {exc.strerror or exc}", error_type="ReadError"
        ) from exc
    if sha256_hex(raw) != source.content_hash:
        raise DocumentError(
            source.source_path, "read", "file changed since it was discovered", error_type="ChangedDuringIngest"
        )
    return raw


def partition_elements(source: SourceFile, config: ParseConfig) -> Partitioned:
    """unstructured's elements for the document (with their locators), exactly as parse_document partitions it."""
    raw = _raw_bytes(source)
    partitioner = BY_FILETYPE[source.filetype].partition
    # unstructured prints an advert on its first partition call (a banner on a terminal's stdout, else a
    # log warning), and on every call starts a thread that reports usage to Scarf (a company's document
    # counts and types leaving the machine; and a thread makes the parse pool's fork unsafe), unless these
    # are set; setdefault keeps a user's own choice.
    os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
    os.environ.setdefault("SCARF_NO_ANALYTICS", "1")
    try:
        with time_limit(config.parse_timeout_s):
            return partitioner(source, raw, config)
    except ParseTimeout:
        reason = f"parsing took longer than {config.parse_timeout_s:g} s (parse_timeout_s); file skipped"
        raise DocumentError(source.source_path, "parse", reason, error_type="ParseTimeout") from None
    except DocumentError:
        raise
    except Exception as exc:  # unstructured and its backends raise anything on malformed input
        reason = f"{source.filetype} parser failed: {type(exc).__name__}: {exc}"
        raise DocumentError(source.source_path, "parse", reason, error_type="ParserError") from exc
