"""Sentence splitting and text normalisation with offsets back into the original text.

Generic helpers: no model, no I/O. Offsets are Python string indices (code points), the same unit as every
start_char/end_char in the store.
"""
from __future__ import annotations

import re
import unicodedata

# Abbreviations whose trailing period does not end a sentence.
_ABBREVIATIONS = frozenset(
    "e.g i.e etc vs mr mrs ms dr prof sr jr st no fig eq approx cf al inc ltd co corp u.s u.k".split()
)
# Candidate boundary: terminal punctuation (plus closing quotes/brackets), whitespace, then a sentence opener.
_BOUNDARY = re.compile(r"[.!?…]+[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9`*#>-])|\n\s*\n+")
_WORD_BEFORE = re.compile(r"(\S+)$")

# Characters NFKC leaves alone that still differ only typographically.
_TYPOGRAPHIC = str.maketrans(
    {"‘": "'", "’": "'", "‚": "'", "“": '"', "”": '"', "„": '"', "–": "-", "—": "-", "‐": "-", "−": "-"}
)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence in `text`, whitespace trimmed; empty text gives no spans."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        head = text[start : match.start() + 1]
        word = _WORD_BEFORE.search(head)
        if word and match.group().startswith(".") and _is_abbreviation(word.group(1)):
            continue
        _append_trimmed(spans, text, start, match.start() + len(match.group().rstrip()))
        start = match.end()
    _append_trimmed(spans, text, start, len(text))
    return spans


def split_sentences(text: str) -> list[str]:
    return [text[start:end] for start, end in sentence_spans(text)]


def _is_abbreviation(word: str) -> bool:
    stem = word.rstrip(".").lower().lstrip("(\"'")
    return stem in _ABBREVIATIONS or (len(stem) == 1 and stem.isalpha())


def _append_trimmed(spans: list[tuple[int, int]], text: str, start: int, end: int) -> None:
    segment = text[start:end]
    stripped = segment.strip()
    if stripped:
        lead = len(segment) - len(segment.lstrip())
        spans.append((start + lead, start + lead + len(stripped)))


def normalize_with_offsets(text: str) -> tuple[str, list[int]]:
    """NFKC + typographic folding + whitespace runs collapsed to one space.

    Returns the normalised text and, for each of its characters, the index of the original character it
    came from, so a match in the normalised text maps back to exact offsets in `text`.
    """
    chars: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        for out in unicodedata.normalize("NFKC", char).translate(_TYPOGRAPHIC):
            if out.isspace():
                if not chars or chars[-1] == " ":
                    continue
                out = " "
            chars.append(out)
            origin.append(index)
    if chars and chars[-1] == " ":
        chars.pop()
        origin.pop()
    return "".join(chars), origin


def normalize_text(text: str) -> str:
    return normalize_with_offsets(text)[0]
