"""The one quote locator: where a quote is in a text, in code points (Python string indices), exact first, then
after normalisation. Anchoring, citation status and re-anchoring all locate quotes here (docs/languages.md)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from citekeeper.text import normalize_text, normalize_with_offsets, segment_end

MATCH_EXACT = "exact"
MATCH_NORMALIZED = "normalized"


@dataclass(frozen=True)
class QuoteMatch:
    start: int
    end: int
    kind: str  # MATCH_EXACT | MATCH_NORMALIZED


def locate_quote(text: str, quote: str) -> QuoteMatch | None:
    """The first occurrence of `quote` in `text`: exact, else after normalisation (strict, then loose: spacing
    next to punctuation ignored too); None when absent."""
    start = text.find(quote)
    if start >= 0:
        return QuoteMatch(start, start + len(quote), MATCH_EXACT)
    for loose in (False, True):
        norm_quote = normalize_text(quote, loose)
        if not norm_quote:
            return None
        norm_text, origin = normalize_with_offsets(text, loose)
        norm_start = norm_text.find(norm_quote)
        if norm_start >= 0:
            end = segment_end(text, origin[norm_start + len(norm_quote) - 1])
            return QuoteMatch(origin[norm_start], end, MATCH_NORMALIZED)
    return None


def char_find(text: pl.Expr, quote: pl.Expr) -> pl.Expr:
    """Code-point offset of the first exact occurrence of `quote` in `text`; null when absent or null.

    (polars `str.find` answers in UTF-8 bytes: the characters before the first match are counted instead. It and
    `str.contains`, even literal, compile a lone pattern into a regex, which a long quote overflows; `str.split`
    builds none.)
    """
    parts = text.str.split(quote)
    found = (parts.list.len() > 1) & (quote.str.len_chars() > 0)
    return pl.when(found).then(parts.list.first().str.len_chars().cast(pl.Int64))


def locate_quotes(frame: pl.DataFrame, text: str, quote: str, prefix: str = "quote") -> pl.DataFrame:
    """`frame` plus `<prefix>_start`, `<prefix>_end` (code points into column `text`) and `<prefix>_match`
    (exact | normalized | null) for the quote in column `quote`; nulls where either is null or absent.

    Exact matches are found vectorised; only the rows they miss are retried after normalisation.
    """
    start, end, kind = f"{prefix}_start", f"{prefix}_end", f"{prefix}_match"
    exact = frame.with_row_index("_locate_row").with_columns(char_find(pl.col(text), pl.col(quote)).alias(start))
    exact = exact.with_columns(
        (pl.col(start) + pl.col(quote).str.len_chars()).alias(end),
        pl.when(pl.col(start).is_not_null()).then(pl.lit(MATCH_EXACT)).alias(kind),
    )
    missed = exact.filter(pl.col(start).is_null() & pl.col(text).is_not_null() & pl.col(quote).is_not_null())
    if missed.is_empty():
        return exact.drop("_locate_row")
    found = [locate_quote(t, q) for t, q in missed.select(text, quote).iter_rows()]
    retried = missed.with_columns(
        pl.Series(start, [f.start if f else None for f in found], dtype=pl.Int64),
        pl.Series(end, [f.end if f else None for f in found], dtype=pl.Int64),
        pl.Series(kind, [f.kind if f else None for f in found], dtype=pl.String),
    )
    kept = exact.join(missed.select("_locate_row"), on="_locate_row", how="anti")
    return pl.concat([kept, retried]).sort("_locate_row").drop("_locate_row")
