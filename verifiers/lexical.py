"""Tier 2, lexical fast path: a claim sentence that is near-verbatim in the evidence is supported.

Kept deliberately precise (measured on WiCE dev by bench/wice_lexical_precision.py): a sentence counts as
supported only when, inside one or two consecutive evidence sentences,
- its tokens appear in order (LCS over tokens / claim tokens >= `min_score`),
- at least `min_content_recall` of its content words, and every one of its numbers, are present,
- the evidence adds no negation or hedge the claim lacks ("not", "never", "may", "reportedly" ...),
- and the claim has at least `min_content_tokens` content words (short claims are too easy to match).
Anything else is left undecided for the NLI tier; this tier never says "unsupported".
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from rapidfuzz.distance import LCSseq

from citekeeper.text import normalize_text, sentence_spans

_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|\w+")
_NUMBER = re.compile(r"^\d")
STOPWORDS = frozenset(
    """a an the of in on at to for from by with and or as is are was were be been being it its this that these
    those which who whom whose he she they them his her their there here has have had do does did than then so
    such into onto over under about also s""".split()
)
# Words that flip or weaken a statement: their presence in the evidence but not the claim blocks a match.
QUALIFIERS = frozenset(
    """not no never nor none neither cannot can't isn't aren't wasn't weren't doesn't don't didn't won't without
    may might could would should possibly probably reportedly allegedly alleged rumored rumoured claimed claims
    if unless except former formerly previously nearly almost approximately about around until""".split()
)


@dataclass(frozen=True)
class LexicalSettings:
    min_score: float = 0.8
    min_content_recall: float = 0.8
    min_content_tokens: int = 4
    max_window_sentences: int = 2

    def key(self) -> str:
        return (
            f"lexical(min_score={self.min_score},min_content_recall={self.min_content_recall},"
            f"min_content_tokens={self.min_content_tokens},window={self.max_window_sentences})"
        )


@dataclass(frozen=True)
class LexicalMatch:
    """A near-verbatim match: `score` in [0, 1], `start`/`end` offsets of the window in the evidence text."""

    score: float
    start: int
    end: int


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(normalize_text(text).lower())


def lexical_support(claim: str, evidence: str, settings: LexicalSettings = LexicalSettings()) -> LexicalMatch | None:
    """The best near-verbatim window of `evidence` for `claim`, or None when the fast path cannot decide."""
    claim_tokens = tokens(claim)
    content = {t for t in claim_tokens if t not in STOPWORDS}
    if len(content) < settings.min_content_tokens:
        return None
    best: LexicalMatch | None = None
    for window in _windows(evidence, settings.max_window_sentences):
        match = _match_window(claim_tokens, content, window, settings)
        if match >= settings.min_score and (best is None or match > best.score):
            best = LexicalMatch(match, window.start, window.end)
    return best


@dataclass(frozen=True)
class _Window:
    """One to `max_window_sentences` consecutive evidence sentences, tokenised."""

    start: int
    end: int
    tokens: tuple[str, ...]
    token_set: frozenset[str]


@lru_cache(maxsize=4096)
def _windows(evidence: str, max_sentences: int) -> tuple[_Window, ...]:
    """The windows of an evidence text; cached, because one evidence is judged against many claim sentences."""
    spans = sentence_spans(evidence)
    span_tokens = [tokens(evidence[start:end]) for start, end in spans]
    windows = []
    for first in range(len(spans)):
        for last in range(first, min(first + max_sentences, len(spans))):
            window = [t for part in span_tokens[first : last + 1] for t in part]
            windows.append(_Window(spans[first][0], spans[last][1], tuple(window), frozenset(window)))
    return tuple(windows)


def _match_window(claim_tokens: list[str], content: set[str], window: _Window, settings: LexicalSettings) -> float:
    """LCS share of claim tokens found in order in `window`; 0 when a guard fails."""
    if len(content & window.token_set) < settings.min_content_recall * len(content):
        return 0.0
    if any(_NUMBER.match(t) and t not in window.token_set for t in content):
        return 0.0
    if (window.token_set & QUALIFIERS) - set(claim_tokens):
        return 0.0
    return LCSseq.similarity(claim_tokens, window.tokens) / len(claim_tokens)
