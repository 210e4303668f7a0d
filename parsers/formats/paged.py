"""Paged formats: PDF (its text layer)."""
from __future__ import annotations

import io

from parsers.formats.base import Format, Partitioned, page_locator
from parsers.model import DocumentError, ParseConfig, SourceFile


def _partition_pdf(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    if b"%PDF-" not in raw[:1024]:
        raise DocumentError(source.source_path, "parse", "not a PDF: no %PDF- header in the first 1024 bytes", error_type="NotAPdf")
    from unstructured.partition.pdf import partition_pdf

    # strategy="fast": the PDF's own text layer via pdfminer; no OCR, no layout model. languages=["eng"] is
    # unstructured's own default, given explicitly so it does not warn on every PDF.
    return Partitioned(partition_pdf(file=io.BytesIO(raw), strategy="fast", languages=["eng"]), page_locator)


FORMATS = (
    Format("pdf", (".pdf",), _partition_pdf, "PDF"),
)
