"""parse_document: every file type through unstructured, canonical text, and bad input as DocumentError."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import signal
import zipfile
from dataclasses import replace
from pathlib import Path

import docx
import pytest

from parsers.discover import discover_sources
from parsers.document import ELEMENT_SEPARATOR, parse_document
from parsers.records import DocumentError, ParseConfig, ParsedDocument

from .conftest import SAMPLE_CORPUS, load_script

CONFIG = ParseConfig()


def parse_file(path: Path, config: ParseConfig = CONFIG) -> ParsedDocument:
    """Discover path's directory and parse the one source at path."""
    sources, errors = discover_sources(path.parent, config)
    assert errors == []
    (source,) = [s for s in sources if s.path == path.absolute()]
    return parse_document(source, config)


def write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


@pytest.fixture(scope="module")
def sample_v1() -> dict[str, ParsedDocument]:
    sources, errors = discover_sources(SAMPLE_CORPUS / "v1", CONFIG)
    assert errors == []
    return {source.doc_id: parse_document(source, CONFIG) for source in sources}


def chunk_with(doc: ParsedDocument, phrase: str):
    (chunk,) = [c for c in doc.chunks if phrase in c.text]
    return chunk


def assert_offsets(doc: ParsedDocument) -> None:
    for chunk in doc.chunks:
        assert doc.text[chunk.start_char : chunk.end_char] == chunk.text
        assert chunk.text_hash == "sha256:" + hashlib.sha256(chunk.text.encode("utf-8")).hexdigest()
    assert [c.ordinal for c in doc.chunks] == list(range(len(doc.chunks)))


def test_markdown(sample_v1):
    doc = sample_v1["getting-started.md"]
    assert doc.title == "Getting Started with Acme Cloud"
    assert doc.source.filetype == "md"
    region = chunk_with(doc, "Acme Cloud runs in four regions")
    assert region.section_path == ["Getting Started with Acme Cloud", "Choosing a Region"]
    assert region.text.startswith("Choosing a Region" + ELEMENT_SEPARATOR)  # the heading opens its section's chunk
    assert region.element_types == ["Title", "NarrativeText"]
    assert region.page_start is None and region.page_end is None
    bullets = chunk_with(doc, "Health checks run every 10 seconds")
    assert "ListItem" in bullets.element_types
    assert "# " not in doc.text  # markup is gone, text is what a reader sees
    assert_offsets(doc)


def test_html(sample_v1):
    doc = sample_v1["security.html"]
    assert doc.title == "Security Guide"
    keys = chunk_with(doc, "Rotate keys at least every 90 days")
    assert keys.section_path == ["Security Guide", "API Keys"]
    assert "<p>" not in doc.text
    assert_offsets(doc)


def test_pdf_pages(sample_v1):
    doc = sample_v1["backups.pdf"]
    assert [(c.section_path[-1], c.page_start, c.page_end) for c in doc.chunks] == [
        ("Backups and Restores", 1, 1),
        ("Backup Schedule", 1, 1),
        ("Retention", 2, 2),
        ("Restoring a Backup", 3, 3),
    ]
    assert "Nightly snapshots are kept for 30 days on the Starter and Team plans." in doc.text
    assert_offsets(doc)


def test_docx(sample_v1):
    doc = sample_v1["incident-response.docx"]
    on_call = chunk_with(doc, "weekly on-call rotation")
    assert on_call.section_path == ["Incident Response", "On-Call Rotation"]
    assert "ListItem" in on_call.element_types and "Never go on call" in on_call.text
    assert on_call.page_start is None
    assert_offsets(doc)


def test_txt(sample_v1):
    doc = sample_v1["sla.txt"]
    credits = chunk_with(doc, "service credit of 10 percent")
    assert credits.section_path == ["SERVICE CREDITS"]
    assert_offsets(doc)


def test_internal_document_keeps_script_literal(sample_v1):
    doc = sample_v1["internal/db-failover-runbook.md"]
    assert doc.source.access_scope == "internal_only"
    assert "<script>alert(1)</script>" in chunk_with(doc, "alert(1)").text


@pytest.mark.skipif(importlib.util.find_spec("pypandoc") is None, reason="pandoc (pypandoc-binary) not installed")
def test_rst(tmp_path):
    path = write(
        tmp_path / "guide.rst",
        "Guide\n=====\n\nIntro text. More words here.\n\nInstall\n-------\n\nRun the installer. Then reboot.\n",
    )
    doc = parse_file(path)
    assert doc.source.filetype == "rst"
    install = chunk_with(doc, "Run the installer")
    assert install.section_path == ["Guide", "Install"]
    assert_offsets(doc)


def test_front_matter_is_not_text(tmp_path):
    path = write(
        tmp_path / "page.md", "---\ntitle: Explicit Title\ndoc_id: pages/one\n---\n# Shown Heading\n\nBody text here.\n"
    )
    doc = parse_file(path)
    assert doc.title == "Explicit Title" and doc.source.doc_id == "pages/one"
    assert doc.text == "Shown Heading" + ELEMENT_SEPARATOR + "Body text here."


def test_yaml_front_matter_with_crlf_and_chinese_is_not_text(tmp_path):
    page = '---\r\ntitle: >\r\n  运维\r\n  手册\r\ndoc_id: "手册/\\"一\\""\r\n---\r\n# 简介\r\n\r\n正文在这里。\r\n'
    doc = parse_file(write(tmp_path / "page.md", page))
    assert (doc.title, doc.source.doc_id) == ("运维 手册", '手册/"一"')
    assert doc.text == "简介" + ELEMENT_SEPARATOR + "正文在这里。"


def test_leading_rule_stays_text(tmp_path):
    doc = parse_file(write(tmp_path / "rule.md", "---\nA paragraph between rules.\n---\n\nBody text here.\n"))
    assert "A paragraph between rules." in doc.text and "Body text here." in doc.text


def test_html_declared_charset(tmp_path):
    page = (
        '<html><head><meta charset="iso-8859-1"></head>'
        "<body><h1>Caf\xe9</h1><p>Cr\xe8me br\xfbl\xe9e is served daily.</p></body></html>"
    )
    doc = parse_file(write(tmp_path / "menu.html", page.encode("latin-1")))
    assert "Crème brûlée is served daily." in doc.text


def test_parsing_is_deterministic(sample_v1):
    sources, _ = discover_sources(SAMPLE_CORPUS / "v1", CONFIG)
    for source in sources:
        again = parse_document(source, CONFIG)
        assert again.text == sample_v1[source.doc_id].text
        assert again.chunks == sample_v1[source.doc_id].chunks


def parse_error(path: Path) -> DocumentError:
    sources, errors = discover_sources(path.parent, CONFIG)
    assert errors == []
    with pytest.raises(DocumentError) as caught:
        parse_document(sources[0], CONFIG)
    assert caught.value.error.source_path == path.name
    assert path.name in str(caught.value)
    return caught.value


def test_binary_file_named_pdf(tmp_path):
    error = parse_error(write(tmp_path / "report.pdf", bytes(range(256)) * 40)).error
    assert (error.stage, error.error_type) == ("parse", "NotAPdf")


def test_pdf_header_with_garbage_body(tmp_path):
    error = parse_error(write(tmp_path / "broken.pdf", b"%PDF-1.7\n" + bytes(range(256)) * 40)).error
    assert error.stage == "parse" and error.error_type in {"NoText", "ParserError"}


@pytest.mark.parametrize(
    "payload",
    [
        b"PK\x03\x04 this is not really a zip archive" * 20,
        "zip-without-document",
        "truncated",
    ],
)
def test_corrupt_docx(tmp_path, payload):
    if payload == "zip-without-document":
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("hello.txt", "not a word document")
        payload = buffer.getvalue()
    elif payload == "truncated":
        buffer = io.BytesIO()
        document = docx.Document()
        document.add_paragraph("Some text that will be cut off.")
        document.save(buffer)
        payload = buffer.getvalue()[: len(buffer.getvalue()) // 2]
    error = parse_error(write(tmp_path / "memo.docx", payload)).error
    assert error.stage == "parse" and error.error_type in {"CorruptDocx", "ParserError"}


@pytest.mark.parametrize("name", ["notes.txt", "notes.md", "notes.rst", "notes.html"])
def test_latin1_text_is_decoded(tmp_path, name):
    doc = parse_file(write(tmp_path / name, "Caf\xe9 au lait is on the menu.\n".encode("latin-1")))
    assert (doc.text, doc.encoding) == ("Café au lait is on the menu.", "cp1252")


@pytest.mark.parametrize("name", ["notes.txt", "notes.rst", "notes.html"])
def test_undecodable_text(tmp_path, name):
    error = parse_error(write(tmp_path / name, b"Caf\x81 \xff au lait is on the menu.\n")).error
    assert (error.stage, error.error_type) == ("read", "EncodingError")
    assert "offset 3" in error.reason and "0x81" in error.reason


def test_undecodable_markdown_is_quarantined_at_discovery(tmp_path):
    write(tmp_path / "notes.md", b"Caf\x81 \xff au lait is on the menu.\n")
    sources, (error,) = discover_sources(tmp_path, CONFIG)
    assert sources == [] and (error.stage, error.error_type) == ("read", "EncodingError")
    assert "offset 3" in error.reason and "0x81" in error.reason


def test_utf16_with_bom(tmp_path):
    doc = parse_file(write(tmp_path / "notes.txt", "Caf\xe9 au lait is on the menu.\n".encode("utf-16")))
    assert doc.text == "Café au lait is on the menu."


def test_whitespace_only_file(tmp_path):
    error = parse_error(write(tmp_path / "blank.md", "\n\n   \n")).error
    assert (error.stage, error.error_type) == ("parse", "NoText")


def test_parse_time_limit(tmp_path):
    write(tmp_path / "long.md", "\n\n".join(f"Paragraph {i} has a sentence. And another one." for i in range(300)))
    outer_timer_before = signal.getitimer(signal.ITIMER_REAL)[0]
    (source,), _ = discover_sources(tmp_path, CONFIG)
    with pytest.raises(DocumentError) as caught:
        parse_document(source, ParseConfig(parse_timeout_s=0.001))
    assert (caught.value.error.stage, caught.value.error.error_type) == ("parse", "ParseTimeout")
    assert "long.md" in str(caught.value) and "parse_timeout_s" in caught.value.error.reason
    assert len(parse_document(source, CONFIG).chunks) > 10  # the default limit lets it through
    if outer_timer_before:  # pytest-timeout's own alarm is re-armed, not lost
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 0


def test_changed_after_discovery(tmp_path):
    path = write(tmp_path / "doc.md", "# Doc\n\nOriginal.\n")
    (source,), _ = discover_sources(tmp_path, CONFIG)
    write(path, "# Doc\n\nEdited meanwhile.\n")
    with pytest.raises(DocumentError, match="changed since it was discovered"):
        parse_document(replace(source, raw=None), CONFIG)


def test_sample_corpus_matches_its_generator(tmp_path):
    module = load_script("scripts/make_sample_corpus.py")
    module.write_corpus(tmp_path)
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    committed = sorted(
        p.relative_to(SAMPLE_CORPUS) for p in SAMPLE_CORPUS.rglob("*") if p.is_file() and p.parent != SAMPLE_CORPUS
    )
    assert generated == committed
    for relative in generated:
        assert (tmp_path / relative).read_bytes() == (SAMPLE_CORPUS / relative).read_bytes(), relative
