"""System programs some formats need, found at run time: a missing one quarantines only the documents that
need it, with a reason that names the program and how to install it."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from parsers.records import DocumentError


@dataclass(frozen=True)
class SystemTool:
    command: str
    name: str
    needed_for: str
    install: str  # Debian/Ubuntu; docs/ingest.md lists the others


TESSERACT = SystemTool(
    "tesseract",
    "Tesseract OCR",
    "OCR of images and scanned PDF pages",
    "apt-get install tesseract-ocr tesseract-ocr-chi-sim (one tesseract-ocr-<lang> per OCR language)",
)
PDFTOPPM = SystemTool("pdftoppm", "Poppler", "rendering scanned PDF pages for OCR", "apt-get install poppler-utils")
LIBREOFFICE = SystemTool(
    "soffice",
    "LibreOffice",
    "converting legacy .doc/.ppt files",
    "apt-get install libreoffice-writer-nogui libreoffice-impress-nogui libreoffice-calc-nogui",
)


def require(tool: SystemTool, source_path: str) -> str:
    """The program's path; raises DocumentError naming the tool and how to install it when it is missing."""
    found = shutil.which(tool.command)
    if found is None:
        reason = (
            f"{tool.needed_for} needs {tool.name} (`{tool.command}` on PATH), which is not installed: {tool.install}"
        )
        raise DocumentError(source_path, "parse", reason, error_type="MissingSystemTool")
    return found
