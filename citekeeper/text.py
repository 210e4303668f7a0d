"""Text rules shared by chunking, identity and verification: sentence spans and normalisation.

Offsets are Python string indices (code points), the same unit as every start_char/end_char in the store.
"""
from __future__ import annotations

import re
import unicodedata

# A sentence ends at . ! ? (or …) plus closing quotes/brackets and citation markers ("[1]"), before whitespace
# and a sentence opener: a capital (Latin-1 included), digit, opening quote/bracket or markdown mark; a
# paragraph break always ends one. Conservative on purpose: a missed boundary only makes a sentence longer.
_BOUNDARY = re.compile(
    r"(?P<end>[.!?\u2026]+[\"'\u201d\u2019)\]]*(?P<markers>(?:\s*\[\d+\])*))"
    r"(?=\s+[\"'\u201c\u2018(\[]?[A-Z\u00c0-\u00d6\u00d8-\u00de0-9`*#>-])"
    r"|\n[^\S\n]*\n\s*"
)
# Words whose trailing period does not end a sentence (single letters count too: initials, "Plan B.").
_ABBREVIATIONS = frozenset(
    "e.g i.e etc vs cf al fig no nos eq mr mrs ms dr prof inc ltd co corp jr sr st approx dept est min max u.s u.k".split()
)
_LONGEST_ABBREVIATION = max(map(len, _ABBREVIATIONS))
_OPENING_PUNCTUATION = "(\"'[\u201c\u2018"

# Characters NFKC leaves alone that still differ only typographically.
_TYPOGRAPHIC = str.maketrans(
    {"‘": "'", "’": "'", "‚": "'", "“": '"', "”": '"', "„": '"', "–": "-", "—": "-", "‐": "-", "−": "-"}
)


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Sentences of text[start:end] as absolute, whitespace-trimmed (start, end) spans; no empty spans."""
    end = len(text) if end is None else end
    spans: list[tuple[int, int]] = []
    sentence_start = start
    for match in _BOUNDARY.finditer(text, start, end):
        if match.group("end") and _ends_in_abbreviation(text, sentence_start, match):
            continue
        _append_trimmed(spans, text, sentence_start, match.end("end") if match.group("end") else match.start())
        sentence_start = match.end()
    _append_trimmed(spans, text, sentence_start, end)
    return spans


def split_sentences(text: str) -> list[str]:
    return [text[start:end] for start, end in sentence_spans(text)]


def _ends_in_abbreviation(text: str, sentence_start: int, match: re.Match) -> bool:
    """A lone period right after an abbreviation; a citation marker after it always ends the sentence."""
    if match.group("markers") or not match.group("end").startswith("."):
        return False
    dot = match.start()
    # Bounded look-back (no quadratic rescans): a longer word leaves a suffix too long to be an abbreviation.
    lookback = max(sentence_start, dot - _LONGEST_ABBREVIATION - 2)
    word_start = max(text.rfind(" ", lookback, dot), text.rfind("\n", lookback, dot)) + 1
    word = text[max(word_start, lookback) : dot].lstrip(_OPENING_PUNCTUATION).lower()
    return (len(word) == 1 and word.isalpha()) or word in _ABBREVIATIONS


def _append_trimmed(spans: list[tuple[int, int]], text: str, start: int, end: int) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if start < end:
        spans.append((start, end))


def normalize_text(text: str) -> str:
    """NFKC + typographic quotes/dashes folded + whitespace runs collapsed to one space, trimmed."""
    return " ".join(unicodedata.normalize("NFKC", text).translate(_TYPOGRAPHIC).split())


def normalize_with_offsets(text: str) -> tuple[str, list[int]]:
    """normalize_text(text) plus, for each of its characters, the index of the original character it came
    from, so a match in the normalised text maps back to exact offsets in `text`.

    NFKC runs per segment (a character plus what composes with it), mapped to the segment's first index.
    """
    chars: list[str] = []
    origin: list[int] = []
    for index, segment in _composition_segments(text):
        for out in unicodedata.normalize("NFKC", segment).translate(_TYPOGRAPHIC):
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


def _composition_segments(text: str) -> list[tuple[int, str]]:
    """(start index, segment): a new segment starts where NFKC of the pair equals NFKC of each side,
    so normalising segment by segment gives the same text as normalising the whole."""
    segments: list[tuple[int, str]] = []
    for index, char in enumerate(text):
        if segments and (unicodedata.combining(char) or _composes(segments[-1][1], char)):
            segments[-1] = (segments[-1][0], segments[-1][1] + char)
        else:
            segments.append((index, char))
    return segments


def _composes(segment: str, char: str) -> bool:
    if char.isascii() and segment[-1].isascii():
        return False
    return unicodedata.normalize("NFKC", segment + char) != unicodedata.normalize("NFKC", segment) + unicodedata.normalize(
        "NFKC", char
    )
