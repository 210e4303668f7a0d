"""Text formats: Markdown, HTML, plain text and reStructuredText, decoded from their bytes by citekeeper."""
from __future__ import annotations

import codecs
import io
import re

from parsers.formats.base import Format, Partitioned
from parsers.metadata import MetadataError, split_front_matter
from parsers.model import DocumentError, ParseConfig, SourceFile

_HTML_CHARSET = re.compile(rb"<meta[^>]{0,200}?charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:-]+)", re.I)


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


def _partition_md(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    from unstructured.partition.md import partition_md

    try:
        _, body = split_front_matter(decode_utf8(source, raw))
    except MetadataError as exc:  # discovery already quarantined such files; this keeps parse_document total
        raise DocumentError(source.source_path, "read", str(exc), error_type="InvalidMetadata") from exc
    return Partitioned(partition_md(text=body), encoding="utf-8")


def _partition_html(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    from unstructured.partition.html import partition_html

    return Partitioned(partition_html(text=_decode_html(source, raw)))


def _partition_txt(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    from unstructured.partition.text import partition_text

    return Partitioned(partition_text(text=decode_utf8(source, raw)), encoding="utf-8")


def _partition_rst(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    from unstructured.partition.rst import partition_rst

    text = decode_utf8(source, raw)  # pandoc would replace bad bytes silently
    return Partitioned(partition_rst(file=io.BytesIO(text.encode("utf-8"))), encoding="utf-8")


FORMATS = (
    Format("md", (".md", ".markdown"), _partition_md, "Markdown (YAML front matter read as metadata)"),
    Format("html", (".html", ".htm"), _partition_html, "HTML"),
    Format("txt", (".txt",), _partition_txt, "plain text"),
    Format("rst", (".rst",), _partition_rst, "reStructuredText"),
)
