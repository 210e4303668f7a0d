"""Office formats end to end: a small real file of each format, built here, ingested into a real store.

Every chunk must quote its document exactly (text[start_char:end_char]), carry its format's native locator (section
path, slide number, sheet name and rows) and hold the expected text. The .doc, .ppt, .xls and .odt files are made by
LibreOffice from the .docx/.pptx/.xlsx built here, so their tests need `soffice`.
"""

from __future__ import annotations

import datetime
import io
import shutil
import subprocess
import zipfile
from pathlib import Path

import docx
import openpyxl
import polars as pl
import pptx
import pytest

from citekeeper.integrity import misplaced_offsets
from citekeeper.store import CorpusStore
from parsers.discover import discover_sources
from parsers.document import ELEMENT_SEPARATOR, parse_document
from parsers.formats.base import OLE2_SIGNATURE
from parsers.ingest import ingest
from parsers.records import DocumentError, ParseConfig, ParsedDocument
from tests.conftest import require_service

HAS_SOFFICE = shutil.which("soffice") is not None

# The headed document every word-processor format carries: (heading level or None, text).
HANDBOOK = [
    (1, "Incident policy"),
    (None, "Page the on-call engineer within five minutes."),
    (2, "Escalation"),
    (None, "升级到值班经理。Escalate to the duty manager after thirty minutes."),
]
SLIDES = [
    ("Quarterly plan", "Ship the billing rewrite before the end of March."),
    ("第二季度预算", "研发预算增加百分之二十，销售预算保持不变，市场预算另行审批。"),
]
# Workbook cells by sheet: {row: [values from column A]}; the rows not listed stay empty.
WORKBOOK = {
    "预算": {
        1: ["部门", "金额", "备注"],
        2: ["研发", 120, "含外包"],
        4: [None, 80, "待定"],
        5: ["销售", 1.5, "Q2"],
    },
    "Notes": {3: [None, "Reviewed by finance"], 4: [None, datetime.date(2024, 3, 31)]},
}
# Each non-empty row's element text: cells from the sheet's first used column, joined by " | ".
WORKBOOK_ROWS = {
    "预算": {1: "部门 | 金额 | 备注", 2: "研发 | 120 | 含外包", 4: "| 80 | 待定", 5: "销售 | 1.5 | Q2"},
    "Notes": {3: "Reviewed by finance", 4: "2024-03-31"},
}
DELIMITED = [["name", "部门", "amount"], ["Alice", "研发", "120"], [], ["Bob", "multi\nline", "80"], ["", "销售", ""]]
DELIMITED_ROWS = {None: {1: "name | 部门 | amount", 2: "Alice | 研发 | 120", 4: "Bob | multi\nline | 80", 5: "| 销售"}}

HEADED = ("handbook.docx", "handbook.doc", "handbook.odt", "handbook.rtf", "handbook.epub")
DECKS = ("deck.pptx", "deck.ppt")
WORKBOOKS = ("budget.xlsx", "budget.xls")
TABLES = ("staff.csv", "staff.tsv")
MADE_BY_SOFFICE = {"handbook.doc", "handbook.odt", "deck.ppt", "budget.xls"}


def needs_soffice(doc_id: str) -> None:
    if doc_id in MADE_BY_SOFFICE:
        require_service(HAS_SOFFICE, f"LibreOffice (`soffice`, to make {doc_id})")


# Building the files


def write_docx(path: Path) -> None:
    document = docx.Document()
    for level, text in HANDBOOK:
        if level:
            document.add_heading(text, level=level)
        else:
            document.add_paragraph(text)
    document.save(path)


def rtf_escape(text: str) -> str:
    """Non-ASCII as RTF Unicode escapes (\\uN, signed 16-bit, '?' for readers without Unicode)."""
    return "".join(ch if ord(ch) < 128 else f"\\u{ord(ch) - 65536 if ord(ch) > 32767 else ord(ch)}?" for ch in text)


def rtf(paragraphs: list[str], code_page: int = 1252) -> bytes:
    body = "\n".join(paragraphs)
    return f"{{\\rtf1\\ansi\\ansicpg{code_page}\\deff0{{\\fonttbl{{\\f0 Calibri;}}}}\n{body}\n}}".encode("ascii")


def write_rtf(path: Path) -> None:
    """As Word writes headings: \\outlinelevelN (0 for level 1) on the paragraph."""
    paragraphs = [
        f"{{\\pard\\outlinelevel{level - 1}\\b {rtf_escape(text)}\\par}}"
        if level
        else f"{{\\pard {rtf_escape(text)}\\par}}"
        for level, text in HANDBOOK
    ]
    path.write_bytes(rtf(paragraphs))


EPUB_CONTAINER = """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>"""
EPUB_PACKAGE = """<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:identifier id="id">urn:uuid:6c1b0d5e-0b8f-4f0e-9a55-1d2f3c4b5a69</dc:identifier>
    <dc:title>Handbook</dc:title><dc:language>en</dc:language>
    <meta property="dcterms:modified">2024-03-31T00:00:00Z</meta>
  </metadata>
  <manifest>
    <item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>
    <item id="chapter" href="chapter.xhtml" media-type="application/xhtml+xml"/>
  </manifest>
  <spine><itemref idref="chapter"/></spine>
</package>"""
EPUB_NAV = """<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops"><head><title>Contents</title></head>
<body><nav epub:type="toc"><ol><li><a href="chapter.xhtml">Handbook</a></li></ol></nav></body></html>"""


def write_epub(path: Path) -> None:
    blocks = "\n".join(f"<h{level}>{text}</h{level}>" if level else f"<p>{text}</p>" for level, text in HANDBOOK)
    chapter = f"""<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Handbook</title></head><body>\n{blocks}\n</body></html>"""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)  # first, uncompressed
        archive.writestr("META-INF/container.xml", EPUB_CONTAINER)
        archive.writestr("OEBPS/content.opf", EPUB_PACKAGE)
        archive.writestr("OEBPS/nav.xhtml", EPUB_NAV)
        archive.writestr("OEBPS/chapter.xhtml", chapter)


def write_pptx(path: Path) -> None:
    deck = pptx.Presentation()
    for title, body in SLIDES:
        slide = deck.slides.add_slide(deck.slide_layouts[1])  # "Title and Content"
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    deck.save(path)


def write_xlsx(path: Path) -> None:
    workbook = openpyxl.Workbook()
    workbook.remove(workbook.active)
    for name, rows in WORKBOOK.items():
        sheet = workbook.create_sheet(name)
        for row, values in rows.items():
            for column, value in enumerate(values, start=1):
                sheet.cell(row=row, column=column, value=value)
    workbook.save(path)


def write_delimited(path: Path, delimiter: str) -> None:
    lines = []
    for cells in DELIMITED:
        lines.append(delimiter.join(f'"{cell}"' if "\n" in cell else cell for cell in cells))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def soffice_convert(source: Path, target_format: str, profile: Path) -> None:
    """LibreOffice writes source's stem + the new extension beside it; its own profile keeps it off other runs'."""
    command = [
        "soffice",
        f"-env:UserInstallation={profile.as_uri()}",
        "--headless",
        "--convert-to",
        target_format,
        "--outdir",
        str(source.parent),
        str(source),
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=180)
    assert source.with_suffix(f".{target_format}").exists(), f"soffice did not convert {source.name} to {target_format}"


@pytest.fixture(scope="module")
def source_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("office")
    write_docx(root / "handbook.docx")
    write_rtf(root / "handbook.rtf")
    write_epub(root / "handbook.epub")
    write_pptx(root / "deck.pptx")
    write_xlsx(root / "budget.xlsx")
    write_delimited(root / "staff.csv", ",")
    write_delimited(root / "staff.tsv", "\t")
    if HAS_SOFFICE:
        profile = tmp_path_factory.mktemp("libreoffice-profile")
        for name in MADE_BY_SOFFICE:
            stem, extension = name.split(".")
            original = next(root.glob(f"{stem}.*x"))  # the .docx / .pptx / .xlsx built above
            soffice_convert(original, extension, profile)
    return root


@pytest.fixture(scope="module")
def ingested(source_root, tmp_path_factory) -> tuple[dict[str, pl.DataFrame], dict[str, dict]]:
    """Every file ingested as one version: (chunks by doc_id, document row by doc_id)."""
    store = CorpusStore(tmp_path_factory.mktemp("store"))
    result = ingest(source_root, store)
    assert result.errors == []
    version = result.manifest.name
    chunks, documents = store.read_chunks(version), store.read_documents(version)
    assert misplaced_offsets(chunks, documents).height == 0
    return (
        {doc_id: frame.sort("ordinal") for (doc_id,), frame in chunks.group_by("doc_id")},
        {row["doc_id"]: row for row in documents.iter_rows(named=True)},
    )


def chunks_of(ingested, doc_id: str) -> list[dict]:
    needs_soffice(doc_id)
    return list(ingested[0][doc_id].iter_rows(named=True))


def text_of(ingested, doc_id: str) -> str:
    return ingested[1][doc_id]["text"]


# Every format


@pytest.mark.parametrize("doc_id", HEADED + DECKS + WORKBOOKS + TABLES)
def test_chunks_quote_their_document(ingested, doc_id):
    chunks = chunks_of(ingested, doc_id)
    text = text_of(ingested, doc_id)
    assert chunks
    for chunk in chunks:
        assert text[chunk["start_char"] : chunk["end_char"]] == chunk["text"]
    assert ingested[1][doc_id]["filetype"] == doc_id.rsplit(".", 1)[1]


# Word-processor documents: headings make the section path


@pytest.mark.parametrize("doc_id", HEADED)
def test_headed_document_has_sections(ingested, doc_id):
    chunks = chunks_of(ingested, doc_id)
    assert text_of(ingested, doc_id) == ELEMENT_SEPARATOR.join(text for _, text in HANDBOOK)
    (chinese,) = [c for c in chunks if "升级到值班经理" in c["text"]]
    assert chinese["section_path"] == ["Incident policy", "Escalation"]
    (first,) = [c for c in chunks if "Page the on-call engineer" in c["text"]]
    assert first["section_path"] == ["Incident policy"]
    assert all(c["slide_number"] is None and c["sheet_name"] is None and c["row_start"] is None for c in chunks)


# Decks: one slide per chunk at most


@pytest.mark.parametrize("doc_id", DECKS)
def test_deck_chunks_carry_their_slide(ingested, doc_id):
    chunks = chunks_of(ingested, doc_id)
    for slide_number, (title, body) in enumerate(SLIDES, start=1):
        on_slide = [c for c in chunks if c["slide_number"] == slide_number]
        assert ELEMENT_SEPARATOR.join(c["text"] for c in on_slide) == f"{title}{ELEMENT_SEPARATOR}{body}"
    assert {c["slide_number"] for c in chunks} == {1, 2}
    # Both slides fit in one chunk of max_chunk_chars; only the slide boundary keeps them apart.
    assert len(text_of(ingested, doc_id)) < ParseConfig().max_chunk_chars
    assert not [c for c in chunks if "Quarterly plan" in c["text"] and "第二季度预算" in c["text"]]


# Spreadsheets: sheet and exact rows


def assert_exact_rows(chunks: list[dict], rows_by_sheet: dict) -> None:
    """Each chunk is exactly the non-empty rows in its [row_start, row_end] of its sheet, and every row is in one."""
    covered = {sheet: [] for sheet in rows_by_sheet}
    for chunk in chunks:
        rows = rows_by_sheet[chunk["sheet_name"]]
        in_range = [number for number in sorted(rows) if chunk["row_start"] <= number <= chunk["row_end"]]
        assert in_range[0] == chunk["row_start"] and in_range[-1] == chunk["row_end"]
        assert chunk["text"] == ELEMENT_SEPARATOR.join(rows[number] for number in in_range)
        covered[chunk["sheet_name"]] += in_range
    assert covered == {sheet: sorted(rows) for sheet, rows in rows_by_sheet.items()}


@pytest.mark.parametrize("doc_id", WORKBOOKS)
def test_workbook_chunks_carry_sheet_and_rows(ingested, doc_id):
    chunks = chunks_of(ingested, doc_id)
    # Each sheet fits in one chunk; the sheet boundary splits them.
    assert [(c["sheet_name"], c["row_start"], c["row_end"]) for c in chunks] == [("预算", 1, 5), ("Notes", 3, 4)]
    assert_exact_rows(chunks, WORKBOOK_ROWS)
    assert ingested[1][doc_id]["encoding"] is None


@pytest.mark.parametrize("doc_id", TABLES)
def test_delimited_chunks_carry_rows(ingested, doc_id):
    chunks = chunks_of(ingested, doc_id)
    assert [(c["sheet_name"], c["row_start"], c["row_end"]) for c in chunks] == [(None, 1, 5)]
    assert_exact_rows(chunks, DELIMITED_ROWS)
    assert ingested[1][doc_id]["encoding"] == "utf-8"


def parse_one(path: Path, config: ParseConfig = ParseConfig()) -> ParsedDocument:
    sources, errors = discover_sources(path.parent, config)
    assert errors == []
    (source,) = [s for s in sources if s.path == path.absolute()]
    return parse_document(source, config)


def as_rows(doc: ParsedDocument) -> list[dict]:
    return [
        {"text": c.text, "sheet_name": c.sheet_name, "row_start": c.row_start, "row_end": c.row_end} for c in doc.chunks
    ]


@pytest.mark.parametrize(
    ("doc_id", "rows"),
    [
        ("budget.xlsx", WORKBOOK_ROWS),
        ("budget.xls", WORKBOOK_ROWS),
        ("staff.csv", DELIMITED_ROWS),
        ("staff.tsv", DELIMITED_ROWS),
    ],
)
def test_small_chunks_have_exact_row_ranges(source_root, doc_id, rows):
    needs_soffice(doc_id)
    doc = parse_one(source_root / doc_id, ParseConfig(max_chunk_chars=25))
    assert len(doc.chunks) > len(rows)  # rows are split over several chunks per sheet
    assert_exact_rows(as_rows(doc), rows)


def test_csv_in_gbk_with_semicolons(tmp_path):
    """A CSV as Excel saves it on a Chinese Windows: GBK, and ";" where the locale uses "," in numbers."""
    (tmp_path / "staff.csv").write_bytes("部门;金额\n研发;1,5\n销售;2\n".encode("gbk"))
    doc = parse_one(tmp_path / "staff.csv")
    assert doc.encoding == "gb18030"
    (chunk,) = as_rows(doc)
    assert chunk == {"text": "部门 | 金额\n\n研发 | 1,5\n\n销售 | 2", "sheet_name": None, "row_start": 1, "row_end": 3}


def test_cells_read_as_the_sheet_shows_them(tmp_path):
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.append([1, 2.5, 0.1 + 0.2, True, "007", datetime.datetime(2024, 1, 5, 13, 30), datetime.date(2024, 1, 5)])
    sheet.append(["line one\nline two", "=1+1", None, "N/A"])
    workbook.save(tmp_path / "cells.xlsx")
    doc = parse_one(tmp_path / "cells.xlsx")
    # A formula written by openpyxl has no cached value (Excel stores one on save), so it reads as empty.
    assert doc.text == "1 | 2.5 | 0.3 | TRUE | 007 | 2024-01-05 13:30:00 | 2024-01-05\n\nline one\nline two |  |  | N/A"


# Bad input: a clear reason, not a stack trace


@pytest.mark.parametrize("name", ["memo.doc", "deck.ppt"])
def test_legacy_office_file_without_libreoffice_is_quarantined(tmp_path, monkeypatch, name):
    """Parsed here, not through ingest: a worker process started earlier would not see the emptied PATH."""
    (tmp_path / name).write_bytes(OLE2_SIGNATURE + bytes(504))
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(DocumentError) as caught:
        parse_one(tmp_path / name)
    error = caught.value.error
    assert (error.source_path, error.stage, error.error_type) == (name, "parse", "MissingSystemTool")
    assert "LibreOffice" in error.reason and "apt-get install" in error.reason


def zip_holding(member: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(member, "something else")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("name", "payload", "error_type", "reason_part"),
    [
        ("deck.pptx", b"not a zip archive at all", "CorruptPptx", "ppt/presentation.xml"),
        ("book.xlsx", OLE2_SIGNATURE + bytes(504), "CorruptXlsx", "password-protected"),
        ("book.xlsx", zip_holding("word/document.xml"), "CorruptXlsx", "xl/workbook.xml"),
        ("book.xls", zip_holding("xl/workbook.xml"), "CorruptXls", "OLE2"),
        ("memo.odt", b"plain text", "CorruptOdt", "content.xml"),
        ("book.epub", zip_holding("chapter.xhtml"), "CorruptEpub", "META-INF/container.xml"),
        ("memo.rtf", b"plain text, no RTF header", "CorruptRtf", "{\\rtf"),
        ("memo.doc", b"plain text that LibreOffice would import", "CorruptDoc", "OLE2"),
        ("deck.ppt", b"plain text", "CorruptPpt", "OLE2"),
    ],
)
def test_corrupt_file_is_named(tmp_path, name, payload, error_type, reason_part):
    if name.endswith((".doc", ".ppt")):  # LibreOffice is looked for first
        require_service(HAS_SOFFICE, "LibreOffice (`soffice`, looked for before a .doc/.ppt is read)")
    (tmp_path / name).write_bytes(payload)
    with pytest.raises(DocumentError) as caught:
        parse_one(tmp_path / name)
    assert (caught.value.error.stage, caught.value.error.error_type) == ("parse", error_type)
    assert reason_part in caught.value.error.reason


def test_rtf_in_a_code_page_pandoc_cannot_read_is_refused(tmp_path):
    """GBK bytes as \\'hh escapes would come out of pandoc as Latin-1 mojibake; a citation must not quote that."""
    gbk = "".join(f"\\'{byte:02x}" for byte in "升级到值班经理".encode("gbk"))
    (tmp_path / "memo.rtf").write_bytes(rtf([f"{{\\pard {gbk}\\par}}"], code_page=936))
    with pytest.raises(DocumentError) as caught:
        parse_one(tmp_path / "memo.rtf")
    assert (caught.value.error.stage, caught.value.error.error_type) == ("read", "EncodingError")
    assert "code page 936" in caught.value.error.reason


def test_rtf_unicode_escapes_in_any_code_page_are_read(tmp_path):
    """\\uN escapes are Unicode whatever \\ansicpg says; their \\'hh fallbacks are skipped, not refused."""
    fallback = "".join(f"\\u{ord(ch)}\\'{b1:02x}\\'{b2:02x}" for ch in "升级" for b1, b2 in [ch.encode("gbk")])
    (tmp_path / "memo.rtf").write_bytes(rtf([f"{{\\pard\\uc2 {fallback}\\par}}"], code_page=936))
    assert parse_one(tmp_path / "memo.rtf").text == "升级"
