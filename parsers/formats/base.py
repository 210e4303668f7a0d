"""The contract between a file format and the rest of parsing (see parsers.formats)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from parsers.records import EmailHeader, Locator, ParseConfig, SourceFile

# The compound-file header of Office 97-2003 documents, Outlook .msg files and encrypted OOXML.
OLE2_SIGNATURE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def no_locator(element) -> Locator:
    return Locator()


def page_locator(element) -> Locator:
    return Locator(page=element.metadata.page_number)


@dataclass
class Partitioned:
    elements: list  # unstructured elements, in reading order
    locate: Callable[[object], Locator] = no_locator
    encoding: str | None = None  # text formats: the encoding the bytes were decoded from
    email: EmailHeader | None = None  # e-mail formats: the message's own header


@dataclass(frozen=True)
class Format:
    filetype: str  # the `filetype` column
    extensions: tuple[str, ...]  # lower case, with the dot
    partition: Callable[[SourceFile, bytes, ParseConfig], Partitioned]
    description: str  # for the format table (docs/ingest.md) and error messages
    front_matter: bool = False  # a leading YAML/TOML block is metadata (parsers.metadata), read at discovery
    # Parsed in a worker process only, never in the ingesting one (parsers.parse_pool): it runs a system program
    # (pandoc, LibreOffice, Poppler, Tesseract) or a native image stack, which only killing the worker's process
    # group stops in time and only its memory cap bounds, or it holds attachments of any format.
    isolated: bool = False
