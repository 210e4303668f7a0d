"""Every file format citekeeper ingests: its extensions, its partitioner and how it locates an element.

Each family module (text, office, email, paged) lists its `FORMATS`; this module merges them into the
lookups discovery and parsing use. A partitioner takes the source, its raw bytes and the parse settings and
returns `Partitioned`: unstructured's elements in reading order, a function giving each element's Locator
(page, slide, sheet and rows, e-mail part, OCR), and what the format knows about the whole document (the
text encoding it was decoded from, an e-mail's header). It raises DocumentError with a clear reason.
"""
from __future__ import annotations

from parsers.formats.base import Format, Partitioned, no_locator
from parsers.formats import email, office, paged, text

FORMATS: tuple[Format, ...] = (*text.FORMATS, *office.FORMATS, *email.FORMATS, *paged.FORMATS)
BY_FILETYPE: dict[str, Format] = {f.filetype: f for f in FORMATS}
BY_EXTENSION: dict[str, Format] = {ext: f for f in FORMATS for ext in f.extensions}

__all__ = ["BY_EXTENSION", "BY_FILETYPE", "FORMATS", "Format", "Partitioned", "no_locator"]
