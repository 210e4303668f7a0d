"""A chunk's format-native locator as one readable line: page, slide, sheet and rows, e-mail, OCR.

The columns are those of schema.CHUNKS; `native_locator(prefix)` reads them with a prefix (`old_`, `new_`)
so status tables and reports of any version say where a chunk sits the way its format does.
"""

from __future__ import annotations

import polars as pl

LOCATOR_COLUMNS = [
    "page_start",
    "page_end",
    "slide_number",
    "sheet_name",
    "row_start",
    "row_end",
    "email_subject",
    "email_from",
    "email_date",
    "email_part",
    "ocr",
]


def native_locator(prefix: str = "") -> pl.Expr:
    """e.g. "page 3", "pages 3–4 · OCR", "slide 2", "sheet Q3 · rows 5–9",
    "e-mail “Renewal” from a@b.c, 2024-05-01T09:00:00+00:00 · attachment terms.txt"; null when none applies."""

    def col(name: str) -> pl.Expr:
        return pl.col(prefix + name)

    parts = [
        _range("page", col("page_start"), col("page_end")),
        pl.when(col("slide_number").is_not_null()).then(pl.format("slide {}", col("slide_number"))),
        pl.when(col("sheet_name").is_not_null()).then(pl.format("sheet {}", col("sheet_name"))),
        _range("row", col("row_start"), col("row_end")),
        pl.when(col("email_subject").is_not_null() | col("email_from").is_not_null()).then(
            pl.format(
                "e-mail “{}” from {}, {}",
                *(col(c).fill_null("?") for c in ("email_subject", "email_from", "email_date")),
            )
        ),
        pl.when(col("email_part").is_not_null() & (col("email_part") != "body")).then(
            pl.format("attachment {}", col("email_part"))
        ),
        pl.when(col("ocr").fill_null(False)).then(pl.lit("OCR")),
    ]
    line = pl.concat_str(parts, separator=" · ", ignore_nulls=True)
    return pl.when(line != "").then(line)


def _range(unit: str, start: pl.Expr, end: pl.Expr) -> pl.Expr:
    return (
        pl.when(start.is_null())
        .then(None)
        .when(start == end)
        .then(pl.format(f"{unit} {{}}", start))
        .otherwise(pl.format(f"{unit}s {{}}–{{}}", start, end))
    )
