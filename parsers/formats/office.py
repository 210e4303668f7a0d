"""Office formats: word-processor documents and decks through unstructured's partitioners (.doc and .ppt converted
by LibreOffice first), and spreadsheets (xlsx, xls, csv, tsv) read here one element per row, so that a citation
knows the rows it quotes (_sheet_elements; docs/ingest.md, "Spreadsheets")."""

from __future__ import annotations

import csv
import datetime
import io
import itertools
import re
import zipfile
from collections.abc import Iterable, Iterator
from typing import Literal

from parsers.formats.base import OLE2_SIGNATURE, Format, Partitioned
from parsers.formats.text import read_text
from parsers.records import DocumentError, Locator, ParseConfig, SourceFile, over_limit
from parsers.system_tools import LIBREOFFICE, require

CELL_SEPARATOR = " | "
_CSV_SNIFF_CHARS = 64 * 1024

# RTF: \ansicpgN names the code page of 8-bit \'hh escapes; \uN escapes (and the \'hh fallbacks right after them,
# which readers skip) are Unicode whatever the code page.
_RTF_CODE_PAGE = re.compile(rb"\\ansicpg(\d+)")
_RTF_UNICODE_ESCAPE = re.compile(rb"\\u-?\d+ ?(?:\\'[0-9a-fA-F]{2})*")
_RTF_8BIT_ESCAPE = re.compile(rb"\\'[89a-fA-F][0-9a-fA-F]")
# pandoc (3.9) drops the character after a `\uN?` escape (jgm/pandoc#8264); a space delimiter before the "?"
# means the same in RTF (the delimiter is consumed) and is read right.
_RTF_UNICODE_THEN_QUESTION_MARK = re.compile(rb"(?<!\\)(\\u-?\d+)\?")


def _corrupt(source: SourceFile, reason: str) -> DocumentError:
    return DocumentError(source.source_path, "parse", reason, error_type=f"Corrupt{source.filetype.capitalize()}")


def _check_zip(source: SourceFile, raw: bytes, member: str, config: ParseConfig) -> None:
    """OOXML, ODF and EPUB are ZIP archives; a missing key member means the file is something else. Their
    members may not unpack past max_decompressed_bytes (zipfile stops a member at its declared size)."""
    buffer = io.BytesIO(raw)
    if zipfile.is_zipfile(buffer) and member in (archive := zipfile.ZipFile(buffer)).namelist():
        unpacked = sum(info.file_size for info in archive.infolist())
        if unpacked > config.max_decompressed_bytes:
            raise over_limit(
                source.source_path,
                "parse",
                f"its ZIP members unpack to {unpacked:,} bytes",
                "max_decompressed_bytes",
                config.max_decompressed_bytes,
            )
        return
    hint = ""
    if raw.startswith(OLE2_SIGNATURE):  # an encrypted OOXML file is an OLE2 container, not a ZIP
        hint = " (it is an OLE2 file: password-protected, or an Office 97-2003 file renamed)"
    raise _corrupt(source, f"not a valid .{source.filetype}: not a ZIP archive holding {member}{hint}")


def _check_ole2(source: SourceFile, raw: bytes) -> None:
    """Office 97-2003 files are OLE2 compound files; LibreOffice would import plain text given as .doc silently."""
    if not raw.startswith(OLE2_SIGNATURE):
        raise _corrupt(source, f"not a valid .{source.filetype}: no OLE2 compound-file header (Office 97-2003 format)")


def _check_rtf(source: SourceFile, raw: bytes) -> None:
    if not raw.lstrip().startswith(b"{\\rtf"):
        raise _corrupt(source, "not a valid .rtf: does not start with {\\rtf")
    code_page = _RTF_CODE_PAGE.search(raw)
    # pandoc reads 8-bit escapes as Windows-1252 whatever the code page, so e.g. GBK text would come out garbled.
    if code_page and code_page.group(1) != b"1252" and _RTF_8BIT_ESCAPE.search(_RTF_UNICODE_ESCAPE.sub(b"", raw)):
        reason = (
            f"RTF text in code page {code_page.group(1).decode()} as 8-bit \\'hh escapes, which pandoc reads "
            f"as Windows-1252 only (the text would be garbled); re-save the file as .docx"
        )
        raise DocumentError(source.source_path, "read", reason, error_type="EncodingError")


def _slide_locator(element) -> Locator:
    """unstructured gives each element its slide's number as metadata.page_number, counting hidden slides, as
    PowerPoint numbers them."""
    return Locator(slide=element.metadata.page_number)


# Documents


def _partition_docx(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    _check_zip(source, raw, "word/document.xml", config)
    from unstructured.partition.docx import partition_docx

    return Partitioned(partition_docx(file=io.BytesIO(raw)))


def _partition_doc(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    require(LIBREOFFICE, source.source_path)
    _check_ole2(source, raw)
    from unstructured.partition.doc import partition_doc

    return Partitioned(partition_doc(file=io.BytesIO(raw)))


def _partition_odt(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    _check_zip(source, raw, "content.xml", config)
    from unstructured.partition.odt import partition_odt

    return Partitioned(partition_odt(file=io.BytesIO(raw)))


def _partition_rtf(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    _check_rtf(source, raw)
    from unstructured.partition.rtf import partition_rtf

    return Partitioned(partition_rtf(file=io.BytesIO(_RTF_UNICODE_THEN_QUESTION_MARK.sub(rb"\1 ?", raw))))


def _partition_epub(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    _check_zip(source, raw, "META-INF/container.xml", config)
    from unstructured.partition.epub import partition_epub

    return Partitioned(partition_epub(file=io.BytesIO(raw)))


# Decks


def _partition_pptx(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    _check_zip(source, raw, "ppt/presentation.xml", config)
    from unstructured.partition.pptx import partition_pptx

    return Partitioned(partition_pptx(file=io.BytesIO(raw), include_page_breaks=False), _slide_locator)


def _partition_ppt(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    require(LIBREOFFICE, source.source_path)
    _check_ole2(source, raw)
    from unstructured.partition.ppt import partition_ppt

    return Partitioned(partition_ppt(file=io.BytesIO(raw), include_page_breaks=False), _slide_locator)


# Spreadsheets: (sheet name or None, 1-based row number, cell values) for every row, empty rows included.

SheetRow = tuple[str | None, int, Iterable]


def _cell_text(value) -> str:
    """A cell's value as text, close to what the sheet shows in its General format."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return format(value, ".15g")  # Excel keeps 15 significant digits; whole numbers without ".0"
    if isinstance(value, datetime.datetime):
        return value.date().isoformat() if value.time() == datetime.time() else value.isoformat(sep=" ")
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return str(value).strip()


def _sheet_elements(sheet: str | None, rows: list[tuple[int, Iterable]]) -> list:
    """One Table element per non-empty row. Every row starts at the sheet's first used column, so a row whose
    first cells are empty still lines up with its column headings."""
    from unstructured.documents.elements import ElementMetadata, Table

    cells_by_row = {row_number: [_cell_text(value) for value in values] for row_number, values in rows}
    filled = {row_number: [i for i, cell in enumerate(cells) if cell] for row_number, cells in cells_by_row.items()}
    filled = {row_number: columns for row_number, columns in filled.items() if columns}
    first_column = min((columns[0] for columns in filled.values()), default=0)
    elements = []
    for row_number, columns in filled.items():
        metadata = ElementMetadata(page_name=sheet)  # page_name: unstructured's own field for a sheet's name
        metadata.row_number = row_number  # an ad-hoc field; unstructured's metadata takes any
        text = CELL_SEPARATOR.join(cells_by_row[row_number][first_column : columns[-1] + 1])
        elements.append(Table(text=text, metadata=metadata))
    return elements


def _row_elements(source: SourceFile, rows: Iterable[SheetRow], config: ParseConfig) -> list:
    """Each sheet's rows as elements (_sheet_elements), row numbers as the sheet shows them: 1-based, the header
    row is row 1, empty rows counted. Not partition_xlsx / partition_csv: those give a whole sheet (or sub-table)
    as one element, cells through pandas' column types (1 as "1.0"), and partition_csv drops blank lines, so
    no element knows its rows."""
    elements = []
    for sheet, sheet_rows in itertools.groupby(rows, key=lambda row: row[0]):
        kept = list(itertools.islice(((n, values) for _, n, values in sheet_rows), config.max_rows_per_sheet + 1))
        if len(kept) > config.max_rows_per_sheet:  # stop reading: 5.7 M rows took minutes and gigabytes
            where = f"sheet {sheet!r}" if sheet is not None else "the file"
            raise over_limit(
                source.source_path,
                "parse",
                f"{where} has more than {config.max_rows_per_sheet:,} rows",
                "max_rows_per_sheet",
                config.max_rows_per_sheet,
            )
        elements += _sheet_elements(sheet, kept)
    return elements


def _row_locator(element) -> Locator:
    metadata = element.metadata
    return Locator(sheet=metadata.page_name, row_start=metadata.row_number, row_end=metadata.row_number)


def _xlsx_rows(raw: bytes) -> Iterator[SheetRow]:
    import openpyxl

    # read_only streams the sheets; data_only gives a formula's cached value, as Excel last displayed it.
    workbook = openpyxl.load_workbook(io.BytesIO(raw), read_only=True, data_only=True)
    try:
        for sheet in workbook.worksheets:  # chart sheets have no cells and are not listed
            sheet.reset_dimensions()  # the stored <dimension> may be stale: it would cut rows or shift row 1
            for row_number, values in enumerate(sheet.iter_rows(min_row=1, min_col=1, values_only=True), start=1):
                yield sheet.title, row_number, values
    finally:
        workbook.close()


def _xls_value(cell, datemode: Literal[0, 1]):
    import xlrd

    if cell.ctype == xlrd.XL_CELL_DATE:
        moment = xlrd.xldate.xldate_as_datetime(cell.value, datemode)
        return moment.time() if cell.value < 1 else moment  # a serial under 1 is a time of day, no date
    if cell.ctype == xlrd.XL_CELL_BOOLEAN:
        return bool(cell.value)
    if cell.ctype == xlrd.XL_CELL_ERROR:
        return xlrd.error_text_from_code.get(cell.value, "#ERROR")
    if cell.ctype in (xlrd.XL_CELL_EMPTY, xlrd.XL_CELL_BLANK):
        return None
    return cell.value  # text, or a number (always a float in .xls)


def _xls_rows(raw: bytes) -> Iterator[SheetRow]:
    import xlrd

    book = xlrd.open_workbook(file_contents=raw, on_demand=True)
    try:
        for index in range(book.nsheets):
            sheet = book.sheet_by_index(index)
            for row_index in range(sheet.nrows):
                yield sheet.name, row_index + 1, [_xls_value(cell, book.datemode) for cell in sheet.row(row_index)]
            book.unload_sheet(index)
    finally:
        book.release_resources()


def _csv_delimiter(text: str) -> str:
    """The delimiter csv.Sniffer finds in the first lines (as partition_csv sniffs), else a comma."""
    sample = text[:_CSV_SNIFF_CHARS]
    if len(text) > len(sample):
        sample = sample[: sample.rfind("\n") + 1] or sample  # a cut last line confuses the sniffer
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:  # one column, or nothing to go on
        return ","


def _delimited_rows(text: str, delimiter: str) -> Iterator[SheetRow]:
    # newline="": line breaks inside a quoted cell stay in the cell; a blank line is an empty row ([]).
    for row_number, cells in enumerate(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter), start=1):
        yield None, row_number, cells


def _partition_xlsx(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    _check_zip(source, raw, "xl/workbook.xml", config)
    return Partitioned(_row_elements(source, _xlsx_rows(raw), config), _row_locator)


def _partition_xls(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    _check_ole2(source, raw)
    return Partitioned(_row_elements(source, _xls_rows(raw), config), _row_locator)


def _partition_delimited(source: SourceFile, raw: bytes, delimiter: str | None, config: ParseConfig) -> Partitioned:
    text, encoding = read_text(source, raw)
    rows = _delimited_rows(text, delimiter or _csv_delimiter(text))
    return Partitioned(_row_elements(source, rows, config), _row_locator, encoding=encoding)


def _partition_csv(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    return _partition_delimited(source, raw, None, config)  # sniffed: ";" and tabs are common in ".csv" files


def _partition_tsv(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    return _partition_delimited(source, raw, "\t", config)


FORMATS = (
    Format("docx", (".docx",), _partition_docx, "Word document"),
    Format("doc", (".doc",), _partition_doc, "Word 97-2003 document (converted by LibreOffice)", isolated=True),
    Format("odt", (".odt",), _partition_odt, "OpenDocument text", isolated=True),
    Format("rtf", (".rtf",), _partition_rtf, "Rich Text Format", isolated=True),
    Format("epub", (".epub",), _partition_epub, "EPUB e-book", isolated=True),
    Format("pptx", (".pptx",), _partition_pptx, "PowerPoint deck, located by slide"),
    Format(
        "ppt",
        (".ppt",),
        _partition_ppt,
        "PowerPoint 97-2003 deck (converted by LibreOffice), located by slide",
        isolated=True,
    ),
    Format("xlsx", (".xlsx",), _partition_xlsx, "Excel workbook, one element per row, located by sheet and row"),
    Format("xls", (".xls",), _partition_xls, "Excel 97-2003 workbook, one element per row, located by sheet and row"),
    Format("csv", (".csv",), _partition_csv, "comma-separated values, one element per row, located by row"),
    Format("tsv", (".tsv",), _partition_tsv, "tab-separated values, one element per row, located by row"),
)
