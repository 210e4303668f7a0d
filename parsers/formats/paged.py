"""Paged formats: PDF (a page's text layer where it has one, OCR of the pages without, in page order) and images
(OCR'd frame by frame). OCR is unstructured's "ocr_only" strategy, Tesseract alone: the layout models of
"hi_res" are downloads that air-gapped machines cannot make."""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from citekeeper.text import close_unspaced_gaps
from parsers.formats.base import Format, Partitioned, page_locator
from parsers.records import DocumentError, Locator, ParseConfig, SourceFile
from parsers.system_tools import PDFTOPPM, TESSERACT, SystemTool, require

# Tesseract reads body text best at 300 dpi or more; higher only costs time.
RENDER_DPI = 300


# ---------------------------------------------------------------------- PDF


def _partition_pdf(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    if b"%PDF-" not in raw[:1024]:
        raise DocumentError(
            source.source_path, "parse", "not a PDF: no %PDF- header in the first 1024 bytes", error_type="NotAPdf"
        )
    pages = _text_layer_pages(raw) or _pages_without_text(raw)
    scanned = [number for number, elements in enumerate(pages, start=1) if not _has_text(elements)]
    if not scanned:
        return Partitioned(_flatten(pages), page_locator)
    _require_ocr(source, config, PDFTOPPM)
    with _pdf_on_disk(raw) as pdf_path:
        for number in scanned:
            pages[number - 1] = _ocr_pdf_page(pdf_path, number, config)
    if not any(map(_has_text, pages)):
        reason = f"no text layer on its {len(pages)} page(s), and OCR ({_languages(config)}) found no text on them"
        raise DocumentError(source.source_path, "parse", reason, error_type="NoText")
    return Partitioned(_flatten(pages), _pdf_locator(ocr_pages=set(scanned)))


def _text_layer_pages(raw: bytes) -> list[list]:
    """The text layer's elements, one list per page (empty for a page without text); [] when pdfminer read
    no page. A page break closes every page, text or not, which is how pages without text are counted."""
    from unstructured.partition.pdf import partition_pdf

    # languages=["eng"] is unstructured's own default for the text layer, given so it does not warn per PDF.
    elements = partition_pdf(file=io.BytesIO(raw), strategy="fast", languages=["eng"], include_page_breaks=True)
    pages: list[list] = []
    current: list = []
    for element in elements:
        if element.category == "PageBreak":
            pages.append(current)
            current = []
        else:
            current.append(element)
    return pages


def _pages_without_text(raw: bytes) -> list[list]:
    """An empty page per page of a PDF that pdfminer read no page of (unstructured skips PDFs it judges too
    complex, and pdfminer fails on some that Poppler renders), so every page is OCR'd. pypdf counts them; a
    PDF it cannot read either raises, and is quarantined with pypdf's reason."""
    from pypdf import PdfReader

    return [[] for _ in PdfReader(io.BytesIO(raw)).pages]


@contextmanager
def _pdf_on_disk(raw: bytes) -> Iterator[Path]:
    """Poppler reads files: the PDF is written once for all of its pages."""
    with tempfile.TemporaryDirectory(prefix="citekeeper-ocr-") as directory:  # in a pool worker: its private temp dir
        path = Path(directory) / "document.pdf"
        path.write_bytes(raw)
        yield path


def _ocr_pdf_page(pdf_path: Path, number: int, config: ParseConfig) -> list:
    from pdf2image import convert_from_path

    with tempfile.TemporaryDirectory(dir=pdf_path.parent) as directory:
        (png,) = convert_from_path(
            str(pdf_path),
            dpi=RENDER_DPI,
            first_page=number,
            last_page=number,
            fmt="png",
            grayscale=True,
            output_folder=directory,
            paths_only=True,
        )
        # paths_only gives file names, though pdf2image annotates a list of images
        return _ocr_image(Path(png).read_bytes(), number, config)  # type: ignore[arg-type]


def _flatten(pages: list[list]) -> list:
    return [element for page in pages for element in page]


def _has_text(elements: list) -> bool:
    return any((element.text or "").strip() for element in elements)


# ---------------------------------------------------------------------- images


def _partition_image(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    frames = _image_frames(source, raw)
    _require_ocr(source, config)
    elements = [
        element for number, frame in enumerate(frames, start=1) for element in _ocr_image(frame, number, config)
    ]
    if not _has_text(elements):
        raise DocumentError(
            source.source_path, "parse", f"OCR ({_languages(config)}) found no text in the image", error_type="NoText"
        )
    return Partitioned(elements, _ocr_locator)


def _image_frames(source: SourceFile, raw: bytes) -> list[bytes]:
    """Each frame (a TIFF's pages; one for most images) as PNG: unstructured's ocr_only reads only an
    image's first frame."""
    from pi_heif import register_heif_opener
    from PIL import Image, ImageSequence, UnidentifiedImageError

    register_heif_opener()  # HEIC/HEIF (iPhone photos) through Pillow
    try:
        with Image.open(io.BytesIO(raw)) as image:
            return [_png(frame) for frame in ImageSequence.Iterator(image)]
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        reason = f"not a readable {source.filetype.upper()} image: {exc}"
        raise DocumentError(source.source_path, "parse", reason, error_type="CorruptImage") from exc


def _png(frame) -> bytes:
    """The frame in grey (all Tesseract reads), on white where it is transparent: transparent pixels are
    often black underneath, which would hide dark text."""
    from PIL import Image

    if frame.has_transparency_data:
        frame = Image.alpha_composite(Image.new("RGBA", frame.size, "white"), frame.convert("RGBA"))
    buffer = io.BytesIO()
    frame.convert("L").save(buffer, "PNG", compress_level=1)  # level 1: fast, the PNG is only handed on
    return buffer.getvalue()


# ---------------------------------------------------------------------- OCR


def _require_ocr(source: SourceFile, config: ParseConfig, *tools: SystemTool) -> None:
    """Tesseract, each configured language pack and the other `tools` are installed, else DocumentError."""
    for tool in (TESSERACT, *tools):
        require(tool, source.source_path)
    from unstructured_pytesseract import get_languages

    installed = set(
        get_languages()
    )  # `tesseract --list-langs`, asked per document: packs can be added while a run goes on
    missing = [language for language in config.ocr_languages if language not in installed]
    if missing:
        packs = " ".join(f"tesseract-ocr-{language.replace('_', '-')}" for language in missing)
        reason = (
            f"OCR language(s) {', '.join(missing)} (ParseConfig.ocr_languages) not installed for Tesseract "
            f"(installed: {', '.join(sorted(installed))}): apt-get install {packs}"
        )
        raise DocumentError(source.source_path, "parse", reason, error_type="MissingSystemTool")


def _ocr_image(png: bytes, number: int, config: ParseConfig) -> list:
    """unstructured's ocr_only elements for one page image, numbered `number`, with Chinese/Japanese spacing fixed."""
    from unstructured.partition.image import partition_image

    elements = partition_image(
        file=io.BytesIO(png), strategy="ocr_only", languages=list(config.ocr_languages), starting_page_number=number
    )
    for element in elements:
        element.text = close_unspaced_gaps(str(element.text or ""))
    return elements


def _languages(config: ParseConfig) -> str:
    return f"Tesseract {'+'.join(config.ocr_languages)}"


def _ocr_locator(element) -> Locator:
    return Locator(page=element.metadata.page_number, ocr=True)


def _pdf_locator(ocr_pages: set[int]):
    def locate(element) -> Locator:
        page = element.metadata.page_number
        return Locator(page=page, ocr=page in ocr_pages)

    return locate


FORMATS = (
    Format("pdf", (".pdf",), _partition_pdf, "PDF (text layer; scanned pages OCR'd)", isolated=True),
    Format("png", (".png",), _partition_image, "PNG image (OCR)", isolated=True),
    Format("jpg", (".jpg", ".jpeg"), _partition_image, "JPEG image (OCR)", isolated=True),
    Format("tiff", (".tiff", ".tif"), _partition_image, "TIFF image, every page (OCR)", isolated=True),
    Format("bmp", (".bmp",), _partition_image, "BMP image (OCR)", isolated=True),
    Format("heic", (".heic", ".heif"), _partition_image, "HEIC/HEIF image (OCR)", isolated=True),
)
