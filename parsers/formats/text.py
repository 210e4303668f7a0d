"""Text formats: Markdown, HTML, plain text, reStructuredText, XML and Org, decoded from their bytes by citekeeper.

Every text format (and an e-mail body, and discovery's front-matter reading) goes through `decode_text`, so a file
reads the same wherever it is read, and `Partitioned.encoding` records what it was decoded from.
"""

from __future__ import annotations

import codecs
import io
import re
import sys
from collections.abc import Iterator

from charset_normalizer import from_bytes

from parsers.formats.base import Format, Partitioned
from parsers.metadata import MetadataError, read_front_matter
from parsers.records import DocumentError, NothingToCite, ParseConfig, SourceFile

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
# UTF-16 without a byte-order mark: every ASCII character, space and newline puts a NUL in its code unit, so the
# NULs share one parity (odd offsets little-endian, even big-endian). A few NULs prove nothing (a stray NUL in
# UTF-8 has a parity too): it takes this many, or NULs in half the bytes of that parity (a short ASCII text).
_UTF16_MIN_NULS = 8
_UTF16_NUL_SHARE = 0.95  # "nearly all" on one parity: a character such as U+0100 puts a NUL on the other

# What a reader of rendered Markdown or HTML never sees: comments, script, style and title bodies, tags with
# their attributes (and declarations, processing instructions), a code fence's own line with its info string, a
# link reference definition and a link's target. Only closed comments and bodies count as unseen, so that an
# unclosed one never makes a page look empty. No match scans past where the next one could start, so the
# measure stays linear in the file however its brackets fall.
_UNSHOWN_MARKUP = re.compile(
    r"<!--(?:(?!<!--).)*?-->"
    r"|<(script|style|title)\b[^<>]*>(?:(?!<(?:script|style|title)\b).)*?</\1\s*>"
    r"|<[!?/]?[A-Za-z](?:[^<>\"']++|\"[^\"]*+\"|'[^']*+')*+>"  # a quoted value may hold < and > (antd: <br>)
    r"|^ {0,3}(?:`{3,}|~{3,})[^\n]*|^ {0,3}\[[^\]\n]+\]:[^\n]*|\]\([^()\[\]\n]*\)",
    re.S | re.I | re.M,
)
_NOT_LETTER_OR_DIGIT = re.compile(r"[\W_]+")
# reStructuredText explicit markup (`.. include:: x`, `.. comment`) with its indented body: nothing of its own shown.
_RST_UNSHOWN = re.compile(r"^\.\.(?:[ \t][^\n]*)?\n?(?:(?:[ \t]+[^\n]*)?\n)*", re.M)
# In Markdown read as plain text (the fallback): HTML comments, and lines that hold nothing but tags.
_UNSHOWN_PROSE = re.compile(r"<!--.*?-->|^[ \t]*(?:<[!/]?[A-Za-z][^<>\n]*>[ \t]*)+$", re.S | re.M)
# A parser that returns less than this share of the letters and digits its source shows has lost text (measured
# on the real corpora: every page keeps more than 0.8 of them; libxml2 dropping a text node past 10 MB keeps
# next to nothing, unstructured keeping only a raw <main> of Markdown 0.015).
_MIN_KEPT_SHARE = 0.5
_HTML_MAIN = re.compile(r"<main\b", re.I)
# MDX reads a block that starts with `import ` or `export ` at the start of a line, up to a blank line, as
# JavaScript (ESM), not prose; in a code fence it is code.
_ESM_START = re.compile(r"(?:import|export) ")
_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})")
# An opening fence with attributes after its language, as Hugo and Pandoc write them (```go {file="a.html"}):
# Python-Markdown takes no such fence, and its code would be read as raw HTML. The attributes are not text.
_FENCE_ATTRIBUTES = re.compile(r"^( {0,3}(?:`{3,}|~{3,})[^`{\n]*?)[ \t]*\{[^}\n]*\}[ \t]*$", re.M)

# unstructured detects a document's language (langdetect) only to fill element.metadata.languages, which citekeeper
# never reads: [""] turns that off, which spares each process loading langdetect's profiles (~0.7 s: most of a
# small reindex's parse after the imports) and each document its detection. Text and element kinds stay the same.
_NO_LANGUAGE_DETECTION = [""]

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
    3. UTF-16 without a byte-order mark, when NULs fall on every other byte (_utf16_codec): little-endian
       when they are at odd offsets, big-endian at even ones.
    4. Strict UTF-8 (UTF-16 without a byte-order mark passes as UTF-8 too, hence 3 first; a stray NUL is
       UTF-8's NUL).
    5. A guess, as unstructured's detect_file_encoding guesses: charset_normalizer ranks the candidates that
       decode every byte; the first that decodes the whole file wins. The candidates are fixed: GB18030
       (which reads GBK and GB2312) and Windows-1252 (which reads printable Latin-1). An open guess misreads
       short text silently: measured, it took a French sentence for Windows-1250 ("Crčme") and a GBK one for
       UTF-16-BE. Even so a file of a few words can be ambiguous; UTF-8 never is.
    6. UndecodableText, naming the first byte that is not UTF-8.

    No rule replaces a byte: a replaced byte would let a citation quote text the document does not hold.
    """
    marked = next((entry for entry in _BOMS if raw.startswith(entry[0])), None)
    if marked:
        return _decode_after_bom(raw, *marked)
    declared_codec = _declared_codec(declared)
    if declared_codec and (text := _strict(raw, declared_codec)) is not None:
        return text, declared_codec
    if (utf16 := _utf16_codec(raw)) and (text := _strict(raw, utf16)) is not None:
        return text, utf16
    try:
        return raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as not_utf8:
        if guessed := _guess(raw):
            return guessed
        raise UndecodableText(_undecodable_reason(raw, declared, not_utf8)) from None


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
        raise UndecodableText(
            f"not valid {name} although it starts with its byte-order mark: byte 0x{raw[offset]:02x} "
            f"at offset {offset} ({exc.reason}); re-save the file as UTF-8"
        ) from exc


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


def _utf16_codec(raw: bytes) -> str | None:
    """The UTF-16 codec the NULs in `raw` show (see _UTF16_MIN_NULS), or None."""
    at_even, at_odd = raw[0::2].count(0), raw[1::2].count(0)
    if at_odd > at_even:
        codec, nuls, parity_bytes = "utf-16-le", at_odd, len(raw) // 2
    else:
        codec, nuls, parity_bytes = "utf-16-be", at_even, (len(raw) + 1) // 2
    if not nuls or nuls < _UTF16_NUL_SHARE * (at_even + at_odd):
        return None
    return codec if nuls >= _UTF16_MIN_NULS or 2 * nuls >= parity_bytes else None


def _guess(raw: bytes) -> tuple[str, str] | None:
    # threshold=1.0: rank every candidate, however messy; its default (0.2) rejects short Chinese with
    # full-width punctuation ("你好，世界。") outright.
    ranked = from_bytes(
        raw, cp_isolation=list(_LEGACY_CANDIDATES), threshold=1.0, enable_fallback=False, preemptive_behaviour=False
    )
    for match in ranked:
        codec = codecs.lookup(match.encoding).name
        # charset_normalizer decodes only samples of a large file: the whole file must decode.
        if (text := _strict(raw, codec)) is not None:
            return text, codec
    return None


def _undecodable_reason(raw: bytes, declared: str | None, not_utf8: UnicodeDecodeError) -> str:
    tried = [f"declared {declared!r}"] if declared else []
    tried += [*filter(None, [_utf16_codec(raw)]), "utf-8", *(codecs.lookup(codec).name for codec in _LEGACY_CANDIDATES)]
    return (
        f"byte 0x{raw[not_utf8.start]:02x} at offset {not_utf8.start} is not UTF-8 ({not_utf8.reason}), "
        f"and no encoding tried ({', '.join(tried)}) decodes every byte; re-save the file as UTF-8"
    )


def _body(source: SourceFile, text: str) -> str:
    """The text to partition; one that is blank (a page of front matter only) has nothing to cite and is skipped."""
    if not text.strip():
        raise NothingToCite(source.source_path)
    return text


def _declared_charset(pattern: re.Pattern[bytes], raw: bytes) -> str | None:
    match = pattern.search(raw[:4096])
    return match.group(1).decode("ascii") if match else None


def _shown_text(source: SourceFile, markup: str) -> str:
    """What Markdown or HTML shows a reader. A page that shows nothing (front matter, comments) has nothing to
    cite and is skipped; lxml finds no element in a page of comments only, and unstructured's HTML partitioner
    fails on it ('NoneType' object has no attribute 'xpath')."""
    return _body(source, _UNSHOWN_MARKUP.sub(" ", markup))


def _count_letters_and_digits(text: str) -> int:
    return len(_NOT_LETTER_OR_DIGIT.sub("", text))


def _lost_text(elements: list, shown: str) -> str | None:
    """Why the parser's elements hold much less text than the source shows (_MIN_KEPT_SHARE), or None."""
    kept = sum(_count_letters_and_digits(element.text or "") for element in elements)
    visible = _count_letters_and_digits(shown)
    if kept >= _MIN_KEPT_SHARE * visible:
        return None
    return f"text lost: the parser kept {kept:,} of the {visible:,} letters and digits the file shows"


def _markdown_body(source: SourceFile, raw: bytes) -> tuple[str, str]:
    """(the text after the front matter, its encoding)."""
    text, encoding = read_text(source, raw)
    try:
        return read_front_matter(text).body, encoding
    except MetadataError as exc:  # discovery already quarantined such files; this keeps parse_document total
        raise DocumentError(source.source_path, "read", str(exc), error_type="InvalidMetadata") from exc


def _import_thinc_without_torch() -> None:
    """Import thinc, the numerics of the spaCy pipeline unstructured classifies text with, with torch hidden, before
    unstructured imports it. thinc imports torch whenever it is installed (~1.8 s, half of the parsers' first
    import: a parse pool's start, a small reindex parsed in process), though spaCy's CPU pipeline (en_core_web_sm)
    never calls it; thinc takes the failed import as "no torch". torch imports as usual afterwards (the
    verifiers' models). A process that holds torch or thinc already is left as it is."""
    if "torch" in sys.modules or "thinc" in sys.modules:
        return
    sys.modules["torch"] = None  # type: ignore[assignment]  # None there: `import torch` raises ImportError
    try:
        import thinc.compat  # noqa: F401
    finally:
        del sys.modules["torch"]


def _partition_markdown(source: SourceFile, body: str) -> list:
    """partition_md's elements, or, where it lost text, partition_text's of the Markdown read as plain text
    (_plain_markdown): Markdown is written to read as plain text, so that is better than its text lost."""
    _import_thinc_without_torch()
    from unstructured.partition.md import partition_md
    from unstructured.partition.text import partition_text

    body = _escaped_angle_brackets(_FENCE_ATTRIBUTES.sub(r"\1", body))
    shown = _shown_text(source, body)
    elements = partition_md(text=body, languages=_NO_LANGUAGE_DETECTION)
    if _lost_text(elements, shown):
        return partition_text(text=_plain_markdown(body), languages=_NO_LANGUAGE_DETECTION)
    return elements


def _markdown_parts(body: str) -> Iterator[tuple[str, str]]:
    """(kind, text) of the body in order, together the whole of it: `fence` (a code fence's own line), `code`
    (a line inside a fence) and `prose` (a run of lines outside fences)."""
    fence: str | None = None  # the open code fence's marker
    prose: list[str] = []  # the prose lines not yet given
    for line in body.splitlines(keepends=True):
        if fence is not None:
            if _closes(fence, line):
                fence = None
                yield "fence", line
            else:
                yield "code", line
        elif opened := _FENCE_OPEN.match(line):
            if prose:
                yield "prose", "".join(prose)
                prose = []
            fence = opened.group(1)
            yield "fence", line
        else:
            prose.append(line)
    if prose:
        yield "prose", "".join(prose)


def _closes(fence: str, line: str) -> bool:
    """Whether `line` closes the code fence opened by `fence`: the marker again, as long or longer, and nothing else."""
    closing = line.strip()
    return closing.startswith(fence) and not closing.strip(fence[0])


def _escaped_angle_brackets(body: str) -> str:
    """`\\<` outside code fences written as `&lt;`: CommonMark (VitePress, Hugo) reads it as a literal `<`,
    Python-Markdown does not escape `<`, so `# \\<script setup>` opened a raw <script> element that swallowed the
    rest of the page (Vue's docs lost whole pages to it)."""
    if "\\<" not in body:
        return body
    return "".join(text.replace("\\<", "&lt;") if kind == "prose" else text for kind, text in _markdown_parts(body))


def _plain_markdown(body: str) -> str:
    """Markdown read as plain text, without what a reader never sees as text: fence lines, and outside fences
    HTML comments and lines of tags alone (VitePress' `<div class="sfc">`, `</div>`); code and prose stay."""
    parts = (
        "\n" if kind == "fence" else _UNSHOWN_PROSE.sub("", text) if kind == "prose" else text
        for kind, text in _markdown_parts(body)
    )
    return "".join(parts)


def _without_esm(body: str) -> str:
    """An MDX body with its ESM blocks (_ESM_START) blanked line by line, so Markdown around them reads as before."""
    lines = body.splitlines(keepends=True)
    fence = None  # the open code fence's marker
    in_esm, after_blank = False, True
    for index, line in enumerate(lines):
        blank = not line.strip()
        if in_esm:
            in_esm = not blank
        elif fence:
            fence = None if _closes(fence, line) else fence
        elif opened := _FENCE_OPEN.match(line):
            fence = opened.group(1)
        else:
            in_esm = after_blank and bool(_ESM_START.match(line))
        if in_esm:
            lines[index] = "\n"
        after_blank = blank
    return "".join(lines)


def _partition_md(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    body, encoding = _markdown_body(source, raw)
    return Partitioned(_partition_markdown(source, body), encoding=encoding)


def _partition_mdx(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    body, encoding = _markdown_body(source, raw)
    return Partitioned(_partition_markdown(source, _without_esm(body)), encoding=encoding)


def _partition_html(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    """partition_html's elements; a page whose text they lost is quarantined (there is no plain reading of HTML)."""
    _import_thinc_without_torch()
    from unstructured.partition.html import partition_html

    text, encoding = read_text(source, raw, _declared_charset(_HTML_CHARSET, raw))
    main = _HTML_MAIN.search(text)  # unstructured reads a page's <main> alone when it has one
    shown = _shown_text(source, text[main.start() :] if main else text)
    elements = partition_html(text=text, languages=_NO_LANGUAGE_DETECTION)
    if reason := _lost_text(elements, shown):
        raise DocumentError(source.source_path, "parse", reason, error_type="TextLost")
    return Partitioned(elements, encoding=encoding)


def _partition_txt(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    _import_thinc_without_torch()
    from unstructured.partition.text import partition_text

    text, encoding = read_text(source, raw)
    return Partitioned(partition_text(text=_body(source, text), languages=_NO_LANGUAGE_DETECTION), encoding=encoding)


def _partition_rst(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    from unstructured.partition.rst import partition_rst

    text, encoding = read_text(source, raw)  # pandoc reads UTF-8 only, and would replace bad bytes silently
    elements = partition_rst(file=io.BytesIO(_body(source, text).encode("utf-8")), languages=_NO_LANGUAGE_DETECTION)
    if not any((element.text or "").strip() for element in elements):
        _body(source, _RST_UNSHOWN.sub("", text))  # explicit markup alone (Sphinx's `.. include::` of a file
        # outside the tree) shows nothing of its own: skipped; anything else pandoc read nothing of is NoText
    return Partitioned(elements, encoding=encoding)


def _partition_org(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    from unstructured.partition.org import partition_org

    text, encoding = read_text(source, raw)  # pandoc, as for rst
    elements = partition_org(file=io.BytesIO(_body(source, text).encode("utf-8")), languages=_NO_LANGUAGE_DETECTION)
    return Partitioned(elements, encoding=encoding)


def _partition_xml(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    _import_thinc_without_torch()
    from unstructured.partition.xml import partition_xml

    text, encoding = read_text(source, raw, _declared_charset(_XML_ENCODING, raw))
    # Handed over as UTF-8 *with* encoding="utf-8": lxml would otherwise obey the file's own declaration
    # (say ISO-8859-1) and misread the re-encoded bytes; partition_xml(text=...) does exactly that.
    elements = partition_xml(file=io.BytesIO(text.encode("utf-8")), encoding="utf-8", languages=_NO_LANGUAGE_DETECTION)
    return Partitioned(elements, encoding=encoding)


FORMATS = (
    Format("md", (".md", ".markdown"), _partition_md, "Markdown (front matter read as metadata)", front_matter=True),
    Format(
        "mdx",
        (".mdx",),
        _partition_mdx,
        "MDX (Markdown with JSX; its ESM import/export blocks are not text)",
        front_matter=True,
    ),
    Format("html", (".html", ".htm"), _partition_html, "HTML"),
    Format("txt", (".txt",), _partition_txt, "plain text"),
    Format("rst", (".rst",), _partition_rst, "reStructuredText", isolated=True),
    Format("xml", (".xml",), _partition_xml, "XML (the text of its elements)"),
    Format("org", (".org",), _partition_org, "Org mode", isolated=True),
)
