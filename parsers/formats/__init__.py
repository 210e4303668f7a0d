"""Every file format citekeeper ingests: each family module (text, office, email, paged) lists its `FORMATS`,
merged here into the lookups by extension and filetype that discovery and parsing use. A format's partitioner
takes the source, its raw bytes and the parse settings and returns `Partitioned` (parsers.formats.base): the
elements in reading order, each element's Locator (page, slide, sheet and rows, e-mail part, OCR) and what the
format knows of the whole document (encoding, e-mail header); it raises DocumentError with a clear reason."""

from __future__ import annotations

from parsers.formats import email, office, paged, text
from parsers.formats.base import Format, Partitioned, no_locator

FORMATS: tuple[Format, ...] = (*text.FORMATS, *office.FORMATS, *email.FORMATS, *paged.FORMATS)
BY_FILETYPE: dict[str, Format] = {f.filetype: f for f in FORMATS}
BY_EXTENSION: dict[str, Format] = {ext: f for f in FORMATS for ext in f.extensions}

__all__ = ["BY_EXTENSION", "BY_FILETYPE", "FORMATS", "Format", "Partitioned", "no_locator"]
