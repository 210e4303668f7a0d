"""Text formats: Markdown, HTML, plain text, reStructuredText, XML and Org, decoded from their bytes by citekeeper.

Every text format (and an e-mail body, and discovery's front-matter reading) goes through `decode_text`, so a file
reads the same wherever it is read, and `Partitioned.encoding` records what it was decoded from.
"""
from __future__ import annotations

import codecs
import io
import re

from charset_normalizer import from_bytes

from parsers.formats.base import Format, Partitioned
from parsers.metadata import MetadataError, read_front_matter
from parsers.model import DocumentError, NothingToCite, ParseConfig, SourceFile

# (byte-order mark, the encoding recorded, the codec of the bytes after the mark). UTF-32 comes first: the
# UTF-32-LE mark starts with the UTF-16-LE one.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32", "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32", "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8-sig", "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16", "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16", "utf-16-be"),
)
# A declared label is read as the WHATWG Encoding Standard (browsers, mail readers) reads it: by the superset
# that files so labelled are really written in (Windows "Latin-1" has curly quotes in 0x80-0x9F; "GB2312"
# mail holds GBK characters).
_SUPERSETS = {"iso8859-1": "cp1252", "ascii": "cp1252", "gb2312": "gb18030", "gbk": "gb18030"}
# What undeclared, non-UTF-8 office files here are written in: Chinese and Western Windows code pages.
_LEGACY_CANDIDATES = ("gb18030", "cp1252")
# Only UTF-16 puts NUL bytes in text (every ASCII character, space and newline has one).
_NUL_CANDIDATES = ("utf_16_le", "utf_16_be")

_HTML_CHARSET = re.compile(rb"<meta[^>]{0,200}?charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:-]+)", re.I)
_XML_ENCODING = re.compile(rb"\A\s*<\?xml[^>]{0,200}?encoding\s*=\s*[\"']([A-Za-z0-9_.:-]+)")


class UndecodableText(ValueError):
    """No encoding citekeeper reads decodes every byte; the message names the first bad byte and its offset."""


def decode_text(raw: bytes, declared: str | None = None) -> tuple[str, str]:
    """(text, Python's name of the codec it was decoded from). The first rule that applies:

    1. A byte-order mark: UTF-8, UTF-16 or UTF-32, as it says; bytes it does not decode are an error.
    2. The declared charset (an HTML <meta>, the XML declaration, a MIME part's charset), read by its superset
       (_SUPERSETS), when it is known, ASCII-compatible and decodes every byte. A declaration is the
       document's own word; browsers and mail readers follow it too, and 7-bit charsets (ISO-2022-JP) would
       pass as UTF-8.
    3. Strict UTF-8, when the bytes hold no NUL (UTF-16 without a byte-order mark passes as UTF-8 too).
    4. A guess, as unstructured's detect_file_encoding guesses: charset_normalizer ranks the candidates that
       decode every byte; the first that decodes the whole file wins. The candidates are fixed: GB18030
       (which reads GBK and GB2312) and Windows-1252 (which reads printable Latin-1), or UTF-16 LE/BE when
       the bytes hold NULs. An open guess misreads short text silently: measured, it took a French sentence
       for Windows-1250 ("Crčme") and a GBK one for UTF-16-BE. Even so a file of a few words can be
       ambiguous; UTF-8 never is.
    5. UndecodableText, naming the first byte that is not UTF-8 (or the first NUL).

    No rule replaces a byte: a replaced byte would let a citation quote text the document does not hold.
    """
    marked = next((entry for entry in _BOMS if raw.startswith(entry[0])), None)
    if marked:
        return _decode_after_bom(raw, *marked)
    declared_codec = _declared_codec(declared)
    if declared_codec and (text := _strict(raw, declared_codec)) is not None:
        return text, declared_codec
    if b"\x00" not in raw and (text := _strict(raw, "utf-8")) is not None:
        return text, "utf-8"
    if guessed := _guess(raw):
        return guessed
    raise UndecodableText(_undecodable_reason(raw, declared))


def read_text(source: SourceFile, raw: bytes, declared: str | None = None) -> tuple[str, str]:
    """decode_text for a partitioner: bytes it cannot decode quarantine the document as an EncodingError."""
    try:
        return decode_text(raw, declared)
    except UndecodableText as exc:
        raise DocumentError(source.source_path, "read", str(exc), error_type="EncodingError") from exc


def _strict(raw: bytes, codec: str) -> str | None:
    try:
        return raw.decode(codec)
    except UnicodeError:  # UnicodeDecodeError, or a plain UnicodeError from codecs such as idna
        return None


def _decode_after_bom(raw: bytes, bom: bytes, encoding: str, codec: str) -> tuple[str, str]:
    try:
        return raw[len(bom) :].decode(codec), encoding
    except UnicodeDecodeError as exc:
        offset = len(bom) + exc.start
        name = encoding.upper().removesuffix("-SIG")
        raise UndecodableText(f"not valid {name} although it starts with its byte-order mark: byte 0x{raw[offset]:02x} at offset {offset} ({exc.reason}); re-save the file as UTF-8") from exc


def _declared_codec(declared: str | None) -> str | None:
    """The codec to read a declared label with; None for an unknown label or one that is not ASCII-compatible
    (a <meta> saying UTF-16 was itself read as ASCII, so it cannot be right; a BOM or the NUL guess reads
    real UTF-16)."""
    if not declared:
        return None
    try:
        name = codecs.lookup(declared).name
        codec = _SUPERSETS.get(name, name)
        ascii_compatible = "charset=".encode(codec) == b"charset="
    except LookupError:  # unknown, or no text encoding at all (charset="base64")
        return None
    return codec if ascii_compatible else None


def _guess_candidates(raw: bytes) -> tuple[str, ...]:
    return _NUL_CANDIDATES if b"\x00" in raw else _LEGACY_CANDIDATES


def _guess(raw: bytes) -> tuple[str, str] | None:
    # threshold=1.0: rank every candidate, however messy; its default (0.2) rejects short Chinese with
    # full-width punctuation ("你好，世界。") outright.
    ranked = from_bytes(raw, cp_isolation=list(_guess_candidates(raw)), threshold=1.0, enable_fallback=False, preemptive_behaviour=False)
    for match in ranked:
        codec = codecs.lookup(match.encoding).name
        # charset_normalizer decodes only samples of a large file: the whole file must decode.
        if (text := _strict(raw, codec)) is not None:
            return text, codec
    return None


def _undecodable_reason(raw: bytes, declared: str | None) -> str:
    try:
        raw.decode("utf-8")
        offset, why = raw.index(b"\x00"), "is NUL, which text does not hold"
    except UnicodeDecodeError as exc:
        offset, why = exc.start, f"is not UTF-8 ({exc.reason})"
    tried = [f"declared {declared!r}"] if declared else []
    tried += ["utf-8", *(codecs.lookup(codec).name for codec in _guess_candidates(raw))]
    return f"byte 0x{raw[offset]:02x} at offset {offset} {why}, and no encoding tried ({', '.join(tried)}) decodes every byte; re-save the file as UTF-8"


def _body(source: SourceFile, text: str) -> str:
    """The text to partition; one that is blank (a page of front matter only) has nothing to cite and is skipped."""
    if not text.strip():
        raise NothingToCite(source.source_path)
    return text


def _declared_charset(pattern: re.Pattern[bytes], raw: bytes) -> str | None:
    match = pattern.search(raw[:4096])
    return match.group(1).decode("ascii") if match else None


def _partition_md(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    from unstructured.partition.md import partition_md

    text, encoding = read_text(source, raw)
    try:
        body = read_front_matter(text).body
    except MetadataError as exc:  # discovery already quarantined such files; this keeps parse_document total
        raise DocumentError(source.source_path, "read", str(exc), error_type="InvalidMetadata") from exc
    return Partitioned(partition_md(text=_body(source, body)), encoding=encoding)


def _partition_html(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    from unstructured.partition.html import partition_html

    text, encoding = read_text(source, raw, _declared_charset(_HTML_CHARSET, raw))
    return Partitioned(partition_html(text=text), encoding=encoding)


def _partition_txt(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    from unstructured.partition.text import partition_text

    text, encoding = read_text(source, raw)
    return Partitioned(partition_text(text=_body(source, text)), encoding=encoding)


def _partition_rst(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    from unstructured.partition.rst import partition_rst

    text, encoding = read_text(source, raw)  # pandoc reads UTF-8 only, and would replace bad bytes silently
    return Partitioned(partition_rst(file=io.BytesIO(_body(source, text).encode("utf-8"))), encoding=encoding)


def _partition_org(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    from unstructured.partition.org import partition_org

    text, encoding = read_text(source, raw)  # pandoc, as for rst
    return Partitioned(partition_org(file=io.BytesIO(_body(source, text).encode("utf-8"))), encoding=encoding)


def _partition_xml(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    from unstructured.partition.xml import partition_xml

    text, encoding = read_text(source, raw, _declared_charset(_XML_ENCODING, raw))
    # Handed over as UTF-8 *with* encoding="utf-8": lxml would otherwise obey the file's own declaration
    # (say ISO-8859-1) and misread the re-encoded bytes; partition_xml(text=...) does exactly that.
    return Partitioned(partition_xml(file=io.BytesIO(text.encode("utf-8")), encoding="utf-8"), encoding=encoding)


FORMATS = (
    Format("md", (".md", ".markdown"), _partition_md, "Markdown (YAML front matter read as metadata)"),
    Format("html", (".html", ".htm"), _partition_html, "HTML"),
    Format("txt", (".txt",), _partition_txt, "plain text"),
    Format("rst", (".rst",), _partition_rst, "reStructuredText"),
    Format("xml", (".xml",), _partition_xml, "XML (the text of its elements)"),
    Format("org", (".org",), _partition_org, "Org mode"),
)
