"""Structure-aware chunking over a document's canonical text: a chunk never spans two sections, slides, sheets or
e-mail parts, and packing restarts at every heading, so an edit moves chunk boundaries only inside its section."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from citekeeper.identity import chunk_ids, text_hash
from citekeeper.text import sentence_spans
from parsers.records import Chunk, Locator

HEADING_CATEGORY = "Title"
# A heading is a breadcrumb in every chunk of its section, and the first one the title of every chunk of its
# document: unstructured takes any line without spaces for a title, so one long line would be copied into
# thousands of chunks (5 MB: 23 GB). Titles and paths are bounded.
MAX_TITLE_CHARS = 200
MAX_SECTION_DEPTH = 16

_WHITESPACE = re.compile(r"\s+")
_CLAUSE_MARKS = "，、：,;:"


@dataclass(frozen=True)
class Block:
    """One element's span of the canonical text."""

    start: int
    end: int
    category: str
    heading_depth: int | None = None  # set for headings only; unstructured's category_depth (None -> 0)
    locator: Locator = Locator()

    @property
    def is_heading(self) -> bool:
        return self.heading_depth is not None


@dataclass(frozen=True)
class _Piece:
    """A span that is never cut further: a whole block, a sentence, or part of an overlong sentence."""

    start: int
    end: int
    block: Block


@dataclass
class _Span:
    start: int
    end: int
    section_path: tuple[str, ...]
    pieces: list[_Piece]


def chunk_document(doc_id: str, text: str, blocks: list[Block], max_chars: int) -> list[Chunk]:
    """Chunks of one document. `blocks`: one per element, as [start, end) spans of `text`. Each section's blocks
    are packed greedily from its start up to max_chars; a block longer than that is cut into sentences (a
    sentence longer than that at whitespace, then hard), packed the same way."""
    spans = [
        span
        for section_path, section in _sections(text, blocks)
        for span in _pack(text, section, section_path, max_chars)
    ]
    ids = chunk_ids(doc_id, (text[span.start : span.end] for span in spans))
    return [_make_chunk(ordinal, cid, text, span) for ordinal, (cid, span) in enumerate(zip(ids, spans, strict=True))]


def _make_chunk(ordinal: int, chunk_id: str, text: str, span: _Span) -> Chunk:
    blocks = list(dict.fromkeys(piece.block for piece in span.pieces))
    locators = [block.locator for block in blocks]
    pages = [loc.page for loc in locators if loc.page is not None]
    rows = [row for loc in locators for row in (loc.row_start, loc.row_end) if row is not None]
    first = locators[0]  # one container per chunk: slide, sheet and part are the same for every block
    chunk_text = text[span.start : span.end]
    return Chunk(
        chunk_id=chunk_id,
        ordinal=ordinal,
        text=chunk_text,
        text_hash=text_hash(chunk_text),
        start_char=span.start,
        end_char=span.end,
        page_start=min(pages) if pages else None,
        page_end=max(pages) if pages else None,
        section_path=list(span.section_path),
        element_types=list(dict.fromkeys(block.category for block in blocks)),
        slide_number=first.slide,
        sheet_name=first.sheet,
        row_start=min(rows) if rows else None,
        row_end=max(rows) if rows else None,
        email_part=first.part,
        ocr=any(loc.ocr for loc in locators),
    )


def _sections(text: str, blocks: list[Block]) -> Iterator[tuple[tuple[str, ...], list[Block]]]:
    """Split blocks at headings and containers; yield each section with its heading breadcrumb. A new
    container (slide, sheet, e-mail part) starts with an empty breadcrumb: its headings are its own."""
    breadcrumb: list[tuple[int, str]] = []  # (depth, heading text), shallowest first
    section: list[Block] = []
    for block in blocks:
        new_container = bool(section) and block.locator.container != section[0].locator.container
        if block.is_heading or new_container:
            if section:
                yield tuple(title for _, title in breadcrumb), section
            section = []
        if new_container:
            breadcrumb = []
        if (depth := block.heading_depth) is not None:  # a heading
            while breadcrumb and breadcrumb[-1][0] >= depth:
                breadcrumb.pop()
            heading = text[block.start : min(block.end, block.start + 4 * MAX_TITLE_CHARS)]
            breadcrumb.append((depth, bounded_title(" ".join(heading.split()))))
            del breadcrumb[:-MAX_SECTION_DEPTH]
        section.append(block)
    if section:
        yield tuple(title for _, title in breadcrumb), section


def bounded_title(title: str) -> str:
    """At most MAX_TITLE_CHARS of a title: a breadcrumb, or the title a document takes from its first heading."""
    return title if len(title) <= MAX_TITLE_CHARS else title[: MAX_TITLE_CHARS - 1] + "…"


def _pack(text: str, blocks: list[Block], section_path: tuple[str, ...], max_chars: int) -> list[_Span]:
    """Greedy packing of one section's pieces into spans of at most max_chars."""
    spans: list[_Span] = []
    for piece in _pieces(text, blocks, max_chars):
        if spans and piece.end - spans[-1].start <= max_chars:
            spans[-1].end = piece.end
            spans[-1].pieces.append(piece)
        else:
            spans.append(_Span(piece.start, piece.end, section_path, [piece]))
    return spans


def _pieces(text: str, blocks: list[Block], max_chars: int) -> Iterator[_Piece]:
    for block in blocks:
        if block.end - block.start <= max_chars:
            yield _Piece(block.start, block.end, block)
            continue
        for start, end in sentence_spans(text, block.start, block.end):
            if end - start <= max_chars:
                yield _Piece(start, end, block)
            else:
                for part_start, part_end in _split_overlong(text, start, end, max_chars):
                    yield _Piece(part_start, part_end, block)


def _skip_whitespace(text: str, pos: int, end: int) -> int:
    match = _WHITESPACE.match(text, pos, end)
    return match.end() if match else pos


def _split_overlong(text: str, start: int, end: int, max_chars: int) -> Iterator[tuple[int, int]]:
    """Cut a sentence longer than max_chars: at the last line break or space that fits, else after the last
    clause mark (Chinese has no spaces: "，" or "、"), else hard."""
    while end - start > max_chars:
        limit = start + max_chars
        cut = max(text.rfind("\n", start + 1, limit + 1), text.rfind(" ", start + 1, limit + 1))
        if cut <= start:
            cut = max(text.rfind(mark, start + 1, limit) for mark in _CLAUSE_MARKS) + 1
        if cut <= start:
            cut = limit
        piece_end = cut
        while piece_end > start and text[piece_end - 1].isspace():
            piece_end -= 1
        yield start, piece_end
        start = _skip_whitespace(text, cut, end)
    if start < end:
        yield start, end
