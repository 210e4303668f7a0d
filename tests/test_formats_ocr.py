"""OCR: images and scanned PDF pages read by Tesseract (unstructured's ocr_only strategy), end to end.

The images and PDFs are drawn here: Latin text in Pillow's bundled font, Chinese in an installed CJK font
(fonts-wqy-microhei in CI). One ingest reads them all, to keep OCR time down. HEIC is read from
tests/data/english.heic, the English image encoded once by libheif's heif-enc: pi-heif decodes HEIC but has no
encoder to make one here.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import polars as pl
import pytest
from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFont

from citekeeper.integrity import misplaced_offsets
from citekeeper.store import CorpusStore
from citekeeper.text import HAN
from parsers.ingest import IngestResult, ingest
from parsers.records import IngestError, ParseConfig
from tests.conftest import require_service

ENGLISH = ["Quarterly revenue grew by twelve percent.", "The warehouse in Leeds closes on Friday."]
CHINESE = ["季度收入增长了百分之十二。", "利兹的仓库将于周五关闭。"]
TEXT_LAYER = "This page has a text layer about backups."
DPI = 300  # image pixels per PDF inch: Poppler renders the page back at the size it was drawn
# Small chunks, so that the mixed PDF's text page and scanned page never share one. Parsed in this process:
# a PATH a test sets applies (pool workers fork from a server started earlier), and each pool worker would
# import the PDF and OCR stack again (seconds), which costs more than it saves on these few documents.
CONFIG = ParseConfig(max_chunk_chars=60, workers=1)
OCR_TOOLS = (
    "Tesseract OCR (eng, chi_sim) and Poppler (apt-get install tesseract-ocr tesseract-ocr-chi-sim poppler-utils)"
)


def ocr_installed() -> bool:
    if not (shutil.which("tesseract") and shutil.which("pdftoppm")):
        return False
    listed = subprocess.run(["tesseract", "--list-langs"], capture_output=True, text=True).stdout.split()
    return {"eng", "chi_sim"} <= set(listed)


def chinese_font() -> str | None:
    if not shutil.which("fc-list"):
        return None
    files = subprocess.run(["fc-list", ":lang=zh", "file"], capture_output=True, text=True).stdout.split()
    return files[0].rstrip(":") if files else None


def drawn(lines: list[str], font: ImageFont.FreeTypeFont) -> Image.Image:
    image = Image.new("L", (1000, 40 + 80 * len(lines)), 255)
    draw = ImageDraw.Draw(image)
    for row, line in enumerate(lines):
        draw.text((30, 20 + 80 * row), line, font=font, fill=0)
    return image


def pdf(pages: list[str | Image.Image]) -> bytes:
    """A PDF whose str pages have a text layer and whose image pages are scans (no text layer)."""
    document = FPDF(unit="pt")
    document.set_auto_page_break(False)
    for page in pages:
        if isinstance(page, str):
            document.add_page(format=(500, 120))
            document.set_font("Helvetica", size=14)
            document.text(20, 60, page)
        else:
            size = (page.width * 72 / DPI, page.height * 72 / DPI)
            document.add_page(format=size)
            document.image(page, x=0, y=0, w=size[0], h=size[1])
    return bytes(document.output())


def transparent(image: Image.Image) -> Image.Image:
    """Black text on a transparent background whose hidden colour is black too, as many exported PNGs are."""
    clear = Image.new("RGBA", image.size, (0, 0, 0, 0))
    clear.putalpha(image.point(lambda grey: 255 - grey))  # opaque where the text is
    return clear


def tiff(frames: list[Image.Image]) -> bytes:
    buffer = io.BytesIO()
    frames[0].save(buffer, "TIFF", save_all=True, append_images=frames[1:])
    return buffer.getvalue()


@pytest.fixture(scope="module")
def ocr_tools() -> None:
    require_service(ocr_installed(), OCR_TOOLS)


@pytest.fixture(scope="module")
def fonts(ocr_tools) -> tuple[ImageFont.FreeTypeFont, ImageFont.FreeTypeFont]:
    cjk = chinese_font()
    require_service(cjk is not None, "a Chinese font to draw the test images (apt-get install fonts-wqy-microhei)")
    return ImageFont.load_default(size=40), ImageFont.truetype(cjk, 44)


@pytest.fixture(scope="module")
def ocred(fonts, tmp_path_factory) -> tuple[IngestResult, pl.DataFrame, dict[str, str]]:
    """One ingest of every OCR case: (result, chunks, document text by source path)."""
    latin, cjk = fonts
    english, chinese = drawn(ENGLISH, latin), drawn(CHINESE, cjk)
    root = tmp_path_factory.mktemp("ocr-src")
    english.save(root / "english.png")
    english.convert("RGB").save(root / "english.jpg", quality=90)
    english.save(root / "english.bmp")
    (root / "english.heic").write_bytes((Path(__file__).parent / "data" / "english.heic").read_bytes())
    transparent(english).save(root / "transparent.png")
    chinese.save(root / "chinese.png")
    (root / "pages.tiff").write_bytes(tiff([drawn(ENGLISH[:1], latin), drawn(ENGLISH[1:], latin)]))
    (root / "scan-english.pdf").write_bytes(pdf([drawn(ENGLISH[:1], latin), drawn(ENGLISH[1:], latin)]))
    (root / "scan-chinese.pdf").write_bytes(pdf([chinese]))
    (root / "mixed.pdf").write_bytes(pdf([TEXT_LAYER, english]))
    store = CorpusStore(tmp_path_factory.mktemp("ocr-store"))
    result = ingest(root, store, config=CONFIG)
    chunks = store.read_chunks(result.manifest.name)
    documents = store.read_documents(result.manifest.name)
    assert misplaced_offsets(chunks, documents).height == 0  # every chunk's offsets reproduce its text
    return result, chunks, dict(zip(documents["source_path"], documents["text"]))


def chunks_of(chunks: pl.DataFrame, source_path: str) -> pl.DataFrame:
    return chunks.filter(pl.col("source_path") == source_path).sort("ordinal")


def assert_ocr_chunks_index(chunks: pl.DataFrame, text: str) -> None:
    """Every chunk is OCR'd, has a page, and its offsets reproduce its text from the canonical text."""
    assert chunks.height > 0 and chunks["ocr"].all() and chunks["page_start"].null_count() == 0
    for chunk in chunks.iter_rows(named=True):
        assert text[chunk["start_char"] : chunk["end_char"]] == chunk["text"]


def test_every_ocr_document_is_ingested(ocred):
    result, _, texts = ocred
    assert result.errors == []
    assert sorted(texts) == [
        "chinese.png",
        "english.bmp",
        "english.heic",
        "english.jpg",
        "english.png",
        "mixed.pdf",
        "pages.tiff",
        "scan-chinese.pdf",
        "scan-english.pdf",
        "transparent.png",
    ]


@pytest.mark.parametrize(
    "source_path",
    ["english.png", "english.jpg", "english.bmp", "english.heic", "transparent.png", "pages.tiff", "scan-english.pdf"],
)
def test_english_ocr(ocred, source_path):
    _, chunks, texts = ocred
    for phrase in ("Quarterly revenue", "twelve percent", "warehouse in Leeds", "Friday"):
        assert phrase in texts[source_path]
    assert_ocr_chunks_index(chunks_of(chunks, source_path), texts[source_path])


@pytest.mark.parametrize("source_path", ["chinese.png", "scan-chinese.pdf"])
def test_chinese_ocr_has_no_spaces_between_han_characters(ocred, source_path):
    _, chunks, texts = ocred
    text = texts[source_path]
    for phrase in ("季度收入", "百分之十二", "仓库"):
        assert phrase in text
    assert not re.search(f"[{HAN}]\\s+[{HAN}]", text), text
    mine = chunks_of(chunks, source_path)
    assert_ocr_chunks_index(mine, text)
    assert mine["page_start"].to_list() == [1] * mine.height


@pytest.mark.parametrize("source_path", ["scan-english.pdf", "pages.tiff"])
def test_pages_and_frames_are_numbered(ocred, source_path):
    _, chunks, _ = ocred
    mine = chunks_of(chunks, source_path)
    by_page = {row["page_start"]: row["text"] for row in mine.iter_rows(named=True)}
    assert sorted(by_page) == [1, 2] and mine["page_end"].to_list() == mine["page_start"].to_list()
    assert "Quarterly" in by_page[1] and "Leeds" in by_page[2]


def test_mixed_pdf_keeps_its_text_layer_and_ocrs_only_the_scanned_page(ocred):
    _, chunks, texts = ocred
    assert texts["mixed.pdf"].startswith(TEXT_LAYER)  # page order: the text page first
    rows = chunks_of(chunks, "mixed.pdf").select("page_start", "page_end", "ocr", "text").rows()
    assert rows[0] == (1, 1, False, TEXT_LAYER)
    assert rows[1:] and all(row[:3] == (2, 2, True) for row in rows[1:])
    assert "Leeds" in " ".join(row[3] for row in rows[1:])


def ingest_one(tmp_path: Path, name: str, payload: bytes, config: ParseConfig = CONFIG) -> IngestResult:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / name).write_bytes(payload)
    return ingest(tmp_path / "src", CorpusStore(tmp_path / "store"), config=config)


def quarantined(result: IngestResult, name: str) -> IngestError:
    (error,) = result.errors
    assert (error.source_path, error.stage) == (name, "parse")
    return error


def blank(name: str) -> bytes:
    """An empty white PNG, or a PDF of one empty scanned page."""
    page = Image.new("L", (300, 100), 255)
    if name.endswith(".pdf"):
        return pdf([page])
    buffer = io.BytesIO()
    page.save(buffer, "PNG")
    return buffer.getvalue()


@pytest.mark.parametrize("name", ["scan.png", "scan.pdf"])
def test_without_tesseract_an_ocr_document_is_quarantined_with_the_install_hint(tmp_path, monkeypatch, name):
    monkeypatch.setenv("PATH", str(tmp_path / "no-programs-here"))
    error = quarantined(ingest_one(tmp_path, name, blank(name)), name)
    assert error.error_type == "MissingSystemTool"
    assert "Tesseract" in error.reason and "apt-get install tesseract-ocr" in error.reason


def test_a_text_layer_pdf_needs_no_ocr_tools(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no-programs-here"))
    result = ingest_one(tmp_path, "text.pdf", pdf([TEXT_LAYER]))
    chunks = CorpusStore(tmp_path / "store").read_chunks(result.manifest.name)
    assert result.errors == [] and chunks.select("text", "page_start", "ocr").rows() == [(TEXT_LAYER, 1, False)]


def test_a_corrupt_image_is_quarantined(tmp_path):
    error = quarantined(ingest_one(tmp_path, "photo.jpg", b"\xff\xd8\xff not really a jpeg" * 10), "photo.jpg")
    assert error.error_type == "CorruptImage" and "JPG" in error.reason


def test_a_missing_language_pack_is_named(tmp_path, ocr_tools):
    config = ParseConfig(ocr_languages=("eng", "zzz_test"))
    error = quarantined(ingest_one(tmp_path, "scan.png", blank("scan.png"), config), "scan.png")
    assert error.error_type == "MissingSystemTool"
    assert "zzz_test" in error.reason and "apt-get install tesseract-ocr-zzz-test" in error.reason


@pytest.mark.parametrize("name", ["blank.png", "blank.pdf"])
def test_ocr_that_finds_nothing_says_so(tmp_path, ocr_tools, name):
    error = quarantined(ingest_one(tmp_path, name, blank(name)), name)
    assert error.error_type == "NoText" and "OCR (Tesseract eng+chi_sim) found no text" in error.reason


def test_a_worker_killed_while_it_ocrs_leaves_no_temp_files(tmp_path, ocr_tools, monkeypatch):
    """The rendered pages, the PDF copy and Tesseract's own `tess_*` files of a worker killed past
    parse_timeout_s are removed (#21, #30): each worker writes into a private temp dir, its TMPDIR."""
    system_temp = Path(tempfile.gettempdir())
    before = {path.name for path in system_temp.iterdir() if path.name.startswith(("tess_", "citekeeper-"))}
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temp"))  # where the pool makes the workers' dirs
    (tmp_path / "temp").mkdir()
    scan = drawn(ENGLISH * 8, ImageFont.load_default(size=40))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "scan.pdf").write_bytes(pdf([scan] * 30))
    # 6 s: past rendering, most likely while Tesseract reads a page (3 s killed it before it began: no tess_ files)
    result = ingest(
        tmp_path / "src", CorpusStore(tmp_path / "store"), config=ParseConfig(workers=2, parse_timeout_s=6.0)
    )
    assert [e.error_type for e in result.errors] == ["ParseTimeout"]
    left = [path.name for path in (tmp_path / "temp").iterdir() if not path.name.startswith("pymp-")]
    assert left == []  # (pymp-*: multiprocessing's own dir of this process, removed when it exits)
    after = {path.name for path in system_temp.iterdir() if path.name.startswith(("tess_", "citekeeper-"))}
    assert after <= before


def test_each_worker_has_a_private_temp_dir(tmp_path, monkeypatch):
    """Mode 0700, named as the worker's TMPDIR, and gone once the pool closes."""
    from parsers.parse_pool import _Pool

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    pool = _Pool(2, ParseConfig())
    dirs = [Path(tmp_path / name) for name in os.listdir(tmp_path)]
    assert len(dirs) == 2 and all(stat.S_IMODE(d.stat().st_mode) == 0o700 for d in dirs)
    pool.close()
    assert not any(d.exists() for d in dirs)
