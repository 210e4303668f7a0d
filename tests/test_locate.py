"""citekeeper.locate: the one quote locator, in code points, over every script."""

from __future__ import annotations

import unicodedata

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from citekeeper.locate import MATCH_EXACT, MATCH_NORMALIZED, char_find, locate_quote, locate_quotes
from citekeeper.text import normalize_text
from verifiers.anchoring import anchor_quotes

# CJK, emoji (astral plane), combining marks, full-width and typographic punctuation, odd whitespace.
PIECES = [
    "Vite",
    "是一种",
    "新型",
    "前端构建工具",
    "。",
    "，",
    "（",
    "）",
    "「",
    "」",
    "ＡＢＣ",
    "１２３",
    "😀",
    "👍🏽",
    "e\u0301",
    "é",
    "Café",
    "—",
    "–",
    "“",
    "”",
    "’",
    "ﬁ",
    " ",
    "  ",
    "\n",
    "\u00a0",
    "\u3000",
    "\t",
    "ok",
    ".",
    "[1]",
]
texts = st.lists(st.sampled_from(PIECES), min_size=1, max_size=30).map("".join)


def _grapheme_bound(text: str, index: int) -> int:
    """Move `index` back to a grapheme start: a real quote never begins or ends inside é (e + U+0301)."""
    while 0 < index < len(text) and unicodedata.combining(text[index]):
        index -= 1
    return index


def _variant(quote: str) -> str:
    """What an LLM or a PDF makes of a quote: half-width forms, straight quotes, other whitespace."""
    return (
        quote.replace("，", ",")
        .replace("（", "(")
        .replace("”", '"')
        .replace("—", "-")
        .replace(" ", "\n")
        .replace("ＡＢＣ", "ABC")
    )


@settings(max_examples=1000, deadline=None)
@given(texts, st.data())
def test_every_located_span_reproduces_the_quote_or_its_normalised_match(text, data):
    start = data.draw(st.integers(0, len(text) - 1))
    end = data.draw(st.integers(start + 1, len(text)))
    start, end = _grapheme_bound(text, start), _grapheme_bound(text, end)
    for quote in (text[start:end], _variant(text[start:end])):
        found = locate_quote(text, quote)
        if not normalize_text(quote):
            continue  # a blank quote has nothing to match after normalisation
        assert found is not None, (text, quote)
        if found.kind == MATCH_EXACT:
            assert text[found.start : found.end] == quote
        else:
            assert found.kind == MATCH_NORMALIZED
            assert normalize_text(text[found.start : found.end], loose=True) == normalize_text(quote, loose=True), (
                text,
                quote,
                found,
            )


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(texts, st.integers(0, 40), st.integers(1, 8)), min_size=1, max_size=10))
def test_vectorised_locator_agrees_with_the_scalar_one(rows):
    frame = pl.DataFrame(
        {"text": [t for t, _, _ in rows], "quote": [_variant(t[s : s + n]) or None for t, s, n in rows]},
        schema={"text": pl.String, "quote": pl.String},
    )
    located = locate_quotes(frame, "text", "quote")
    for text, quote, start, end, kind in located.select(
        "text", "quote", "quote_start", "quote_end", "quote_match"
    ).iter_rows():
        found = locate_quote(text, quote) if quote else None
        if found is None:
            assert (start, end, kind) == (None, None, None)
        else:
            assert (start, end, kind) == (found.start, found.end, found.kind)


def test_a_normalised_span_keeps_a_trailing_combining_mark():
    text = "前端构建工具。，e\u0301"  # found by the property test: the span ended before U+0301
    found = locate_quote(text, "前端构建工具。,e\u0301")
    assert (found.start, found.end, found.kind) == (0, len(text), MATCH_NORMALIZED)


def test_offsets_are_code_points_not_utf8_bytes():
    text = "Café — ok. The fee is 5."
    assert pl.select(pl.lit(text).str.find("The fee")).item() == 14  # polars answers in bytes
    assert pl.select(char_find(pl.lit(text), pl.lit("The fee"))).item() == 11
    assert locate_quote(text, "The fee") == (found := locate_quote(text, "The fee")) and found.start == 11
    chinese = "Vite 是一种新型前端构建工具。它使用 Rollup 打包代码。"
    anchored = anchor_quotes(pl.DataFrame({"chunk_text": [chinese], "quote": ["它使用 Rollup"]}))
    start, end = anchored["quote_start"].item(), anchored["quote_end"].item()
    assert chinese[start:end] == "它使用 Rollup" and anchored["anchor"].item() == "exact"


def test_full_width_curly_and_wrapped_quotes_are_found_normalised():
    chunk = "框架（Vue）是一款\n用于构建用户界面的框架，它“渐进式”。"
    found = locate_quote(chunk, '框架(Vue)是一款用于构建用户界面的框架,它"渐进式"')
    assert found is not None and found.kind == MATCH_NORMALIZED
    assert chunk[found.start : found.end] == "框架（Vue）是一款\n用于构建用户界面的框架，它“渐进式”"
    assert locate_quote(chunk, "框架是一款用于构建后端的框架") is None


def test_a_half_width_comma_and_space_finds_the_full_width_comma():
    """A quote typed with ", " against a document's "，" (NFKC gives "," but the typed space stayed): found
    after normalisation, never called invented (issue #20)."""
    text = "在开发过程中，Vite 将会启动一个开发服务器。"
    found = locate_quote(text, "在开发过程中, Vite")
    assert found is not None and found.kind == MATCH_NORMALIZED
    assert text[found.start : found.end] == "在开发过程中，Vite"
