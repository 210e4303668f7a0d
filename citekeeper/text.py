"""Text rules shared by chunking, identity, answers and verification, for every script: sentence spans,
citation markers and normalisation.

Offsets are Python string indices (code points), the same unit as every start_char/end_char in the store.
"""

from __future__ import annotations

import re
import unicodedata

# Bumped whenever a rule here changes chunk boundaries or chunk identity; part of the parse settings, so the
# next ingest re-chunks every document once (ingest says why). 1: English-only rules; 2: every script;
# 3: markers after a final stop, ASCII stops after code.
TEXT_RULES_VERSION = 3

# Regex class bodies. Han ideographs (basic, extension A, compatibility forms); then with extension B and
# beyond, kana and hangul syllables; then the scripts written without spaces between words.
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_HAN_EXTENDED = "\U00020000-\U0002fa1f"
_KANA = "\u3040-\u30ff"
CJK = f"{_KANA}{HAN}\uac00-\ud7af{_HAN_EXTENDED}"
# Whitespace between two characters of these (or their punctuation) is a line wrap.
_UNSPACED = f"{_KANA}{HAN}{_HAN_EXTENDED}\u3000-\u303f\uff01-\uff60"
_CJK_CHAR = re.compile(f"[{CJK}]")

# A citation marker: [1], [1][2], [1,2], 【1】, ［1］, ^[1], and alphanumeric ids such as
# [D1] or [S2] that multi-agent systems emit. A marker id always holds a digit, so [link] text is no marker.
MARKER_ID = r"[A-Za-z]{0,8}[-_]?\d+"
_MARKER_IDS = rf"{MARKER_ID}(?:\s*[,，、;；]\s*{MARKER_ID})*"
MARKER = re.compile(rf"\^?[\[【［]\s*(?P<ids>{_MARKER_IDS})\s*[\]】］]")
_SPACED_MARKER = re.compile(rf"\s*{MARKER.pattern}")
_MARKER_OPENERS = "[【［"  # every MARKER has one
_MARKER_ID_SPLIT = re.compile(r"\s*[,，、;；]\s*")
_MARKER_RUN = rf"(?:\s*\^?[\[【［]\s*{_MARKER_IDS}\s*[\]】］])+"
_MARKERS = f"(?:{_MARKER_RUN})?"
_CLOSERS = "[\"'\u201d\u2019)\\]」』）】》〉]*"

# A sentence ends
# - at a full-width 。！？； (or an ellipsis after a CJK character), whatever follows;
# - at . ! ? (or …) right after a word, a closing quote/bracket or a code/markup mark (never after a space or
#   an operator such as `=`: `使用 . 作为` and `NODE_ENV=... 的` are code inside a sentence), and then
#   - with citation markers after it, before whitespace or the end of the text ("… request. [1]");
#   - else before a CJK character, with or without whitespace between;
#   - else before whitespace and a sentence opener: a capital (Latin-1 included), digit, opening
#     quote/bracket or markdown mark;
# each with the closing quotes/brackets and citation markers that follow it; a paragraph break always ends one.
# Conservative on purpose: a missed boundary only makes a sentence longer.
_ASCII_STOP_AFTER = "\\w\"'\u201d\u2019)\\]」』）】》〉%`*"
_BOUNDARY = re.compile(
    r"(?=[。！？；…⋯.!?\n])(?:"  # every boundary starts with one of these: other positions fail at once
    rf"(?P<end>(?:[。！？；]+|(?<=[{CJK}])[…⋯]+){_CLOSERS}{_MARKERS})"
    rf"|(?P<end_ascii>(?<=[{_ASCII_STOP_AFTER}])[.!?\u2026]+{_CLOSERS}(?P<markers>{_MARKER_RUN})?)"
    rf"(?(markers)(?=\s|\Z)|(?=\s*[「『“（【《{CJK}]|\s+[\"'\u201c\u2018(\[【［^]?[A-Z\u00c0-\u00d6\u00d8-\u00de0-9`*#>-]))"
    r"|\n[^\S\n]*\n\s*)"
)
# Words whose trailing period does not end a sentence (single letters count too: initials, "Plan B.").
_ABBREVIATIONS = frozenset(
    (
        "e.g i.e etc vs cf al fig no nos eq mr mrs ms dr prof inc ltd co corp jr sr st approx dept est min max u.s u.k"
    ).split()
)
_LONGEST_ABBREVIATION = max(map(len, _ABBREVIATIONS))
_OPENING_PUNCTUATION = "(\"'[\u201c\u2018"

# Characters NFKC leaves alone that still differ only typographically.
_TYPOGRAPHIC = str.maketrans(
    {"‘": "'", "’": "'", "‚": "'", "“": '"', "”": '"', "„": '"', "–": "-", "—": "-", "‐": "-", "−": "-"}
)
# Whitespace next to a character of an unspaced script is a line wrap or optional spacing ("Vue 是" and
# "Vue是" are the same text): normalisation drops it; other whitespace runs become one space.
_WRAPPED = re.compile(f"(?<=[{_UNSPACED}]) | (?=[{_UNSPACED}])")
# The looser form quotes are also matched in drops whitespace next to ASCII punctuation too: NFKC turns a
# document's "中，Vite" into "中,Vite", and a quote typed "中, Vite" keeps its space. (Identity keeps the strict
# form, so English chunk ids do not change.)
_LOOSE_GAP = re.compile(f"(?<=[{_UNSPACED}!-/:-@\\[-`{{-~]) | (?=[{_UNSPACED}!-/:-@\\[-`{{-~])")
_GAP_BETWEEN_UNSPACED = re.compile(f"(?<=[{_UNSPACED}])\\s+(?=[{_UNSPACED}])")


# A letter or digit of a script written with spaces between words (CJK characters are words of their own).
_SPACED_WORD_CHAR = re.compile(f"[^\\W{_UNSPACED}]")


def snap_to_words(text: str, start: int, end: int) -> tuple[int, int]:
    """A span of `text` without cut words or edge whitespace: a word cut at the start belongs to the text before
    and is dropped, one cut at the end is completed. Spans of Chinese or Japanese are only trimmed."""

    def inside_word(i: int) -> bool:
        return 0 < i < len(text) and all(_SPACED_WORD_CHAR.match(c) for c in text[i - 1 : i + 1])

    while start < end and inside_word(start):
        start += 1
    while inside_word(end):
        end += 1
    return trim_span(text, start, end)


def trim_span(text: str, start: int, end: int) -> tuple[int, int]:
    """text[start:end] without the whitespace at its edges, as a span."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def is_cjk(char: str) -> bool:
    return _CJK_CHAR.match(char) is not None


def close_unspaced_gaps(text: str) -> str:
    """Drop whitespace between two characters of unspaced scripts (Chinese, Japanese): OCR puts spaces
    there (`季度 收入 增长 了 。`) that the page does not have. Spaces next to Latin words or Hangul stay."""
    return _GAP_BETWEEN_UNSPACED.sub("", text)


def marker_ids(text: str) -> list[str]:
    """The reference ids of every citation marker in `text`, in order ("[1][2]" and "[1,2]" -> ["1", "2"])."""
    return [ref for match in MARKER.finditer(text) for ref in _MARKER_ID_SPLIT.split(match.group("ids"))]


def strip_markers(text: str) -> str:
    """`text` without its citation markers (and the whitespace before each), whitespace runs collapsed."""
    if any(bracket in text for bracket in _MARKER_OPENERS):  # most sentences have none: skip the regex
        text = _SPACED_MARKER.sub("", text)
    return " ".join(text.split())


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Sentences of text[start:end] as absolute, whitespace-trimmed (start, end) spans; no empty spans."""
    end = len(text) if end is None else end
    spans: list[tuple[int, int]] = []
    sentence_start = start
    for match in _BOUNDARY.finditer(text, start, end):
        if match.group("end_ascii") and _ends_in_abbreviation(text, sentence_start, match):
            continue
        _append_trimmed(spans, text, sentence_start, _sentence_end(match))
        sentence_start = match.end()
    _append_trimmed(spans, text, sentence_start, end)
    return spans


def split_sentences(text: str) -> list[str]:
    return [text[start:end] for start, end in sentence_spans(text)]


def _sentence_end(match: re.Match) -> int:
    """Where the sentence of a boundary match ends: after its terminator, closers and markers."""
    for group in ("end", "end_ascii"):
        if match.group(group):
            return match.end(group)
    return match.start()  # a paragraph break


def _ends_in_abbreviation(text: str, sentence_start: int, match: re.Match) -> bool:
    """A lone period right after an abbreviation; a citation marker after it always ends the sentence."""
    if match.group("markers") or not match.group("end_ascii").startswith("."):
        return False
    dot = match.start()
    # Bounded look-back (no quadratic rescans): a longer word leaves a suffix too long to be an abbreviation.
    lookback = max(sentence_start, dot - _LONGEST_ABBREVIATION - 2)
    word_start = max(text.rfind(" ", lookback, dot), text.rfind("\n", lookback, dot)) + 1
    word = text[max(word_start, lookback) : dot].lstrip(_OPENING_PUNCTUATION).lower()
    if word.isdigit() and not text[sentence_start : max(word_start, lookback)].strip():
        return True  # "1. " opening a sentence numbers a list item
    return (len(word) == 1 and word.isalpha()) or word in _ABBREVIATIONS


def _append_trimmed(spans: list[tuple[int, int]], text: str, start: int, end: int) -> None:
    start, end = trim_span(text, start, end)
    if start < end:
        spans.append((start, end))


def normalize_text(text: str, loose: bool = False) -> str:
    """NFKC + typographic quotes/dashes folded + whitespace runs collapsed to one space (none next to a
    CJK character; with `loose`, none next to ASCII punctuation either), trimmed."""
    return _gaps(loose).sub("", " ".join(unicodedata.normalize("NFKC", text).translate(_TYPOGRAPHIC).split()))


def normalize_with_offsets(text: str, loose: bool = False) -> tuple[str, list[int]]:
    """normalize_text(text, loose) plus, for each of its characters, the index of the original character it
    came from, so a match in the normalised text maps back to exact offsets in `text`.

    NFKC runs per segment (a character plus what composes with it), mapped to the segment's first index.
    """
    chars: list[str] = []
    origin: list[int] = []
    space_at: int | None = None  # origin of a whitespace run not yet emitted (dropped when trailing)
    for index, segment in _composition_segments(text):
        for out in unicodedata.normalize("NFKC", segment).translate(_TYPOGRAPHIC):
            if out.isspace():
                if chars and space_at is None:
                    space_at = index
                continue
            if space_at is not None:
                chars.append(" ")
                origin.append(space_at)
            space_at = None
            chars.append(out)
            origin.append(index)
    # The spaces normalize_text drops, found by the same rule over the collapsed text.
    dropped = {match.start() for match in _gaps(loose).finditer("".join(chars))}
    kept = [i for i in range(len(chars)) if i not in dropped]
    return "".join(chars[i] for i in kept), [origin[i] for i in kept]


def _gaps(loose: bool) -> re.Pattern:
    return _LOOSE_GAP if loose else _WRAPPED


def segment_end(text: str, start: int) -> int:
    """End of the composition segment starting at `start` (normalize_with_offsets maps each normalised
    character to such a start): a span ending in "e" + U+0301 must keep the combining mark."""
    end = start + 1
    while end < len(text) and (unicodedata.combining(text[end]) or _composes(text[start:end], text[end])):
        end += 1
    return end


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
    return unicodedata.normalize("NFKC", segment + char) != unicodedata.normalize(
        "NFKC", segment
    ) + unicodedata.normalize("NFKC", char)


# Characters that would act on a terminal rather than show: C0/C1 controls (ESC starts an ANSI sequence, a
# newline could forge a line), line/paragraph separators and bidirectional overrides.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def lone_surrogate(text: str) -> str | None:
    """The first character of `text` UTF-8 cannot encode (a lone surrogate: a "\\ud800" escape, or what
    os.scandir makes of a file name's undecodable bytes), else None. No table can store such text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.object[exc.start]
    return None


def printable(text: str) -> str:
    """`text` safe to print on one terminal line: each control character shown as its escape (\\x1b, \\n)."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
