"""The file-format registry (parsers.formats.FORMATS) is documented and tested: each registered extension has its
row in docs/ingest.md's formats table (which names no other), docs/extending.md names each family module, and each
format names the test that ingests a file of it, a test that exists in a module that writes such a file."""

from __future__ import annotations

import re

import pytest

from parsers.formats import BY_EXTENSION, BY_FILETYPE, FORMATS
from tests.conftest import REPO

# filetype -> the test (module under tests/ :: function) that ingests a file of that format and checks what it
# reads; a new format adds its line.
FORMAT_TESTS = {
    "md": "test_parsers.py::test_markdown",
    "mdx": "test_markup_text.py::test_mdx_leaves_esm_out_of_the_text",
    "html": "test_parsers.py::test_html",
    "txt": "test_parsers.py::test_txt",
    "rst": "test_parsers.py::test_rst",
    "xml": "test_formats_text.py::test_xml_obeys_its_declaration",
    "org": "test_formats_text.py::test_org",
    "docx": "test_formats_office.py::test_headed_document_has_sections",
    "doc": "test_formats_office.py::test_headed_document_has_sections",
    "odt": "test_formats_office.py::test_headed_document_has_sections",
    "rtf": "test_formats_office.py::test_headed_document_has_sections",
    "epub": "test_formats_office.py::test_headed_document_has_sections",
    "pptx": "test_formats_office.py::test_deck_chunks_carry_their_slide",
    "ppt": "test_formats_office.py::test_deck_chunks_carry_their_slide",
    "xlsx": "test_formats_office.py::test_workbook_chunks_carry_sheet_and_rows",
    "xls": "test_formats_office.py::test_workbook_chunks_carry_sheet_and_rows",
    "csv": "test_formats_office.py::test_delimited_chunks_carry_rows",
    "tsv": "test_formats_office.py::test_delimited_chunks_carry_rows",
    "eml": "test_formats_email.py::test_gb2312_quoted_printable_message",
    "msg": "test_formats_email.py::test_msg_maps_header_body_and_attachments",
    "pdf": "test_parsers.py::test_pdf_pages",
    "png": "test_formats_ocr.py::test_english_ocr",
    "jpg": "test_formats_ocr.py::test_english_ocr",
    "tiff": "test_formats_ocr.py::test_english_ocr",
    "bmp": "test_formats_ocr.py::test_english_ocr",
    "heic": "test_formats_ocr.py::test_english_ocr",
}


def formats_table() -> list[list[str]]:
    """The extensions of each row of docs/ingest.md's formats table."""
    text = (REPO / "docs" / "ingest.md").read_text(encoding="utf-8")
    table = text.split("\n| extension | partitioner |", 1)[1].split("\n\n", 1)[0]
    cells = re.findall(r"^\| `([^`]+)` \|", table, flags=re.M)
    return [cell.split() for cell in cells]


def test_each_registered_extension_has_one_row_in_the_formats_table():
    listed = [extension for row in formats_table() for extension in row]
    assert sorted(listed) == sorted(BY_EXTENSION)


def test_extending_names_each_family_module():
    text = (REPO / "docs" / "extending.md").read_text(encoding="utf-8")
    section = text.split("\n## A file format\n", 1)[1].split("\n## ", 1)[0]
    families = {f.partition.__module__.rsplit(".", 1)[1] for f in FORMATS}
    assert sorted(name for name in families if f"`{name}.py`" not in section) == []


def test_each_format_names_its_test():
    assert sorted(FORMAT_TESTS) == sorted(BY_FILETYPE)


@pytest.mark.parametrize("filetype", FORMAT_TESTS)
def test_the_named_test_exists_in_a_module_that_writes_a_file_of_its_format(filetype):
    module, function = FORMAT_TESTS[filetype].split("::")
    source = (REPO / "tests" / module).read_text(encoding="utf-8")
    assert re.search(rf"^def {function}\(", source, flags=re.M), FORMAT_TESTS[filetype]
    extensions = "|".join(re.escape(extension) for extension in BY_FILETYPE[filetype].extensions)
    assert re.search(rf"[\"'][\w./-]+(?:{extensions})[\"']", source), f"{module} names no {filetype} file"
