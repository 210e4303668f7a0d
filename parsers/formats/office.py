"""Office formats: word-processor documents, decks and spreadsheets."""
from __future__ import annotations

import io
import zipfile

from parsers.formats.base import Format, Partitioned
from parsers.model import DocumentError, ParseConfig, SourceFile


def _partition_docx(source: SourceFile, raw: bytes, config: ParseConfig) -> Partitioned:
    buffer = io.BytesIO(raw)
    if not zipfile.is_zipfile(buffer) or "word/document.xml" not in zipfile.ZipFile(buffer).namelist():
        raise DocumentError(source.source_path, "parse", "not a valid .docx: not a ZIP archive holding word/document.xml", error_type="CorruptDocx")
    from unstructured.partition.docx import partition_docx

    return Partitioned(partition_docx(file=io.BytesIO(raw)))


FORMATS = (
    Format("docx", (".docx",), _partition_docx, "Word document"),
)
