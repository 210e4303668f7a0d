"""Tier 2, the lexical fast path: a claim sentence that is near-verbatim in one or two consecutive evidence
sentences is supported without a model; one that is near-verbatim in one evidence sentence but for a changed
number, or a negation one side has and the other lacks, is contradicted; anything else is left to the NLI tier
(this tier never says "unsupported"). Kept deliberately precise: the rules are in docs/verification.md, the
precision is measured by bench/wice_lexical_precision.py and bench/zh_lexical_precision.py."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import cache, lru_cache

import jieba
from rapidfuzz.distance import LCSseq

from citekeeper.text import HAN, normalize_text, sentence_spans

# The matched claim tokens may skip at most as many window tokens as they cover: a dropped clause, not a
# sentence stitched from the start of one evidence sentence and the end of the next.
_MIN_DENSITY = 0.5
# jieba segments runs of Han ideographs.
_HAN_RUN = re.compile(f"[{HAN}]+")
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|\w+")
_NUMBER = re.compile(r"^\d")
_CONTRACTION = re.compile(r"\b(?:can't|cannot|won't|shan't|(\w+)n't)\b")
_IRREGULAR_NOT = {"can't": "can not", "cannot": "can not", "won't": "will not", "shan't": "shall not"}
# A cheap English stem: inflected forms of one word ("released", "releases", "release") share it.
_SUFFIX = re.compile(r"(?:ing|ed|es|er|est|ly|s|e)$")

_ENGLISH_STOPWORDS = """a an the of in on at to for from by with and or as is are was were be been being it its this
    that these those which who whom whose he she they them his her their there here has have had do does did than
    then so such into onto over under about also s"""
_CHINESE_STOPWORDS = """的 地 得 了 着 过 是 在 和 与 及 以及 或 或者 也 都 就 还 又 并 并且 而 之
    其 该 此 这 那 这个 那个 这些 那些 这样 它 它们 我 我们 你 你们 他 她 他们 被 把 对 为 以 于 从 到
    由 将 给 向 个 中 上 下 等 吗 呢 吧 啊"""
STOPWORDS = frozenset(_ENGLISH_STOPWORDS.split() + _CHINESE_STOPWORDS.split())

# Words that flip, weaken or contrast a statement: claim and window must carry the same ones.
_ENGLISH_QUALIFIERS = """not no never nor none neither without may might could would should possibly probably
    reportedly allegedly alleged rumored rumoured claimed claims if unless except former formerly previously nearly
    almost approximately about around until but however although though yet whereas nevertheless"""
_CHINESE_QUALIFIERS = """不 没 没有 未 非 无 别 勿 莫 不是 不能 不会 无法 从未 并非 尚未 并未 并不
    从不 永不 绝不 毫无 可能 也许 或许 大概 据说 约 大约 将近 几乎 差不多 左右 除非 如果 假如 若 要是
    倘若 可能会 直到 曾 曾经 但是 但 然而 不过 可是 却 虽然 尽管 尽管如此"""
QUALIFIERS = frozenset(_ENGLISH_QUALIFIERS.split() + _CHINESE_QUALIFIERS.split())
# jieba glues a negator to its verb (不支持, 无需, 未能, 不可), so a multi-character word starting with one is a
# negation too, except for common words that start with such a character but do not negate. Uses in the Vue
# docs: 不同 "different" 127, 非常 "very" 47, 无障碍 "accessibility" 29, 别名 "alias" 22, 无论/不论/不管
# "regardless", 不仅/不但 "not only", 未来 "future"; without the exemptions bench/zh_lexical_precision.py
# decides none of its claims that drop a 非常 (0/45 instead of 45/45).
_NEGATION_START = "不没未无非别勿莫"
_NOT_NEGATIONS = (
    "不同",
    "非常",
    "别名",
    "别处",
    "别的",
    "别人",
    "无障碍",
    "无论",
    "不论",
    "不管",
    "不仅",
    "不但",
    "未来",
)
# The words that negate outright (not the hedges and contrasts among QUALIFIERS): a claim and an evidence sentence
# that differ only in one of these contradict each other. A glued Chinese negation (不支持) counts as its first
# character plus the rest (不 支持), so that it lines up with the plain verb.
_ENGLISH_NEGATORS = frozenset("not no never nor neither none without".split())
_CHINESE_NEGATORS = frozenset("从未 并非 尚未 并未 并不 从不 永不 绝不 毫无".split()) | frozenset(_NEGATION_START)

_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_UNITS = {"十": 10, "百": 100, "千": 1000}
_MYRIADS = {"万": 10_000, "亿": 100_000_000}
# A word that is wholly a numeral, optionally followed by one measure word: jieba keeps "十二个", "两种" whole,
# and without the measure words "两个" never matches "2 个" (bench/zh_lexical_precision.py: 0/100 instead of
# 100/100). Measure words that also make idioms are left out: 十分 "very", 一点 "a little", 一下, 一些, 一样.
_MEASURE_WORDS = "个种次件位名条项步段节层章套组份行列年月天周倍帧"
_NUMERAL_CHARS = re.compile(f"[{''.join(_DIGITS)}{''.join(_UNITS)}{''.join(_MYRIADS)}]+")
_CHINESE_NUMERAL = re.compile(rf"({_NUMERAL_CHARS.pattern})([{_MEASURE_WORDS}]?)")
# Two digits in a row only occur after 零 (三百零五); otherwise the word is no numeral (一一 "one by one").
_ADJACENT_DIGITS = re.compile("[一二两三四五六七八九][零〇一二两三四五六七八九]")
# Digit by digit, as years are written (二〇二四 -> 2024): jieba cuts these into single characters, so they
# become Arabic digits before segmentation. Three or more, so that words like 一一 stay words.
_DIGIT_STRING = re.compile("[〇零一二三四五六七八九]{3,}")


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


ENTAILMENT, CONTRADICTION = "entailment", "contradiction"


@dataclass(frozen=True)
class LexicalMatch:
    """A near-verbatim match: `score` in [0, 1], `start`/`end` offsets of the window in the evidence text, and
    what it says of the claim: entailment, or contradiction (a changed number or a flipped negation)."""

    score: float
    start: int
    end: int
    label: str = ENTAILMENT


def tokens(text: str) -> list[str]:
    return _tokenize(_prepare(text))


def lexical_support(claim: str, evidence: str, settings: LexicalSettings = LexicalSettings()) -> LexicalMatch | None:
    """The best near-verbatim window of `evidence` for `claim`, or None when the fast path cannot decide."""
    return _support(tuple(tokens(claim)), evidence, settings)


def _support(claim_tokens: tuple[str, ...], evidence: str, settings: LexicalSettings) -> LexicalMatch | None:
    content = {t for t in claim_tokens if t not in STOPWORDS}
    if len(content) < settings.min_content_tokens:
        return None
    best: LexicalMatch | None = None
    for window in _windows(evidence, settings.max_window_sentences):
        score = _match_window(claim_tokens, content, window, settings)
        if score >= settings.min_score and (best is None or _better(score, window, best)):
            best = LexicalMatch(score, window.start, window.end)
    return best


def lexical_verdict(claim: str, evidence: str, settings: LexicalSettings = LexicalSettings()) -> LexicalMatch | None:
    """lexical_support; failing it, the best evidence sentence that says the claim but for one changed number or
    a flipped negation (a contradiction); None when the fast path cannot decide."""
    claim_tokens = tuple(tokens(claim))
    return _support(claim_tokens, evidence, settings) or _contradiction(claim_tokens, evidence, settings)


def _contradiction(claim_tokens: tuple[str, ...], evidence: str, settings: LexicalSettings) -> LexicalMatch | None:
    """The claim and one evidence sentence matched with every number read as the same number and every negator
    left out (_neutral); a contradiction when, within the matched stretch, the numbers at matched places differ
    or the negators' counts differ in parity, not both."""
    claim_tokens = _split_negations(claim_tokens)
    content = set(claim_tokens) - STOPWORDS - _ENGLISH_NEGATORS - _CHINESE_NEGATORS
    words = {t for t in content if not t[0].isdigit()}  # tokens start with a digit only as numbers (_TOKEN)
    n_content = len(words) + (len(words) < len(content))  # every number is one word ("0") here
    if n_content < settings.min_content_tokens:
        return None
    # a cheap bound before a sentence is neutralised: enough of the claim's words (numbers aside) are in it
    needed = settings.min_content_recall * n_content - (n_content - len(words))
    sentences = [
        w
        for w in _windows(evidence, settings.max_window_sentences)
        if w.n_sentences == 1 and len(words & w.split_set) >= needed
    ]
    if not sentences:
        return None
    neutral_claim, claim_negations = _neutral(claim_tokens)
    content = {t for t in neutral_claim if t not in STOPWORDS}
    best: LexicalMatch | None = None
    for window in sentences:
        window_tokens = _split_negations(window.tokens)
        neutral_window, window_negations = _neutral(window_tokens)
        neutral = _window_of(window.start, window.end, neutral_window)
        score = _match_window(neutral_claim, content, neutral, settings)
        if score < settings.min_score:
            continue
        aligned = _alignment(neutral_claim, neutral_window)
        lo, hi = min(aligned.values()), max(aligned.values())
        numbers_differ = any(
            _NUMBER.match(claim_tokens[claim_negations[i]])
            and window_tokens[window_negations[j]] != claim_tokens[claim_negations[i]]
            for i, j in aligned.items()
        )
        flipped = (
            _negations(claim_tokens) % 2
            != _negations(window_tokens[window_negations[lo] : window_negations[hi] + 1]) % 2
        )
        if numbers_differ != flipped and (best is None or _better(score, neutral, best)):
            best = LexicalMatch(score, window.start, window.end, CONTRADICTION)
    return best


def _split_negations(words: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Glued Chinese negations cut into the negator and the rest (不支持 -> 不, 支持); other words as they are."""
    out: list[str] = []
    for word in words:
        if (
            len(word) > 1
            and word[0] in _NEGATION_START
            and word not in _CHINESE_NEGATORS
            and not word.startswith(_NOT_NEGATIONS)
        ):
            out += [word[0], word[1:]]
        else:
            out.append(word)
    return tuple(out)


def _is_negator(word: str) -> bool:
    return word in _ENGLISH_NEGATORS or word in _CHINESE_NEGATORS


def _negations(words: tuple[str, ...]) -> int:
    return sum(map(_is_negator, words))


def _neutral(words: tuple[str, ...]) -> tuple[tuple[str, ...], list[int]]:
    """`words` without negators and with every number as "0", and for each kept word its index in `words`."""
    kept = [i for i, word in enumerate(words) if not _is_negator(word)]
    return tuple("0" if _NUMBER.match(words[i]) else words[i] for i in kept), kept


def _window_of(start: int, end: int, words: tuple[str, ...], n_sentences: int = 1) -> _Window:
    qualifiers = tuple(i for i, word in enumerate(words) if _is_qualifier(word))
    return _Window(start, end, words, frozenset(words), qualifiers, n_sentences)


def _better(score: float, window: _Window, best: LexicalMatch) -> bool:
    """A higher score, or the same score in a shorter window (the sentence itself, not it plus a neighbour)."""
    return score > best.score or (score == best.score and window.end - window.start < best.end - best.start)


def _prepare(text: str) -> str:
    """Normalised, lower-cased text with English negative contractions spelled out ("isn't" -> "is not") and
    Chinese digit strings in Arabic digits."""
    text = _CONTRACTION.sub(_expand_contraction, normalize_text(text).lower())
    return _DIGIT_STRING.sub(lambda m: "".join(str(_DIGITS[char]) for char in m.group()), text)


def _expand_contraction(match: re.Match) -> str:
    return f"{match.group(1)} not" if match.group(1) else _IRREGULAR_NOT[match.group()]


def _tokenize(text: str) -> list[str]:
    """Latin words and numbers by regex; each run of Han characters segmented by jieba."""
    out: list[str] = []
    position = 0
    for run in _HAN_RUN.finditer(text):
        out += _TOKEN.findall(text, position, run.start())
        words = _join_numerals(_segmenter().lcut(run.group(), HMM=False))
        out += [part for word in words for part in _chinese_numeral(word)]
        position = run.end()
    out += _TOKEN.findall(text, position)
    return out


@cache
def _segmenter() -> jieba.Tokenizer:
    """jieba's own dictionary, loaded once on first use (a second or so) and kept quiet."""
    jieba.setLogLevel(logging.WARNING)
    segmenter = jieba.Tokenizer()
    segmenter.initialize()
    return segmenter


def _join_numerals(words: list[str]) -> list[str]:
    """jieba cuts long numerals into pieces (两千 / 零 / 二十四年); put them back together."""
    out: list[str] = []
    for word in words:
        if out and _NUMERAL_CHARS.fullmatch(out[-1]) and _CHINESE_NUMERAL.fullmatch(word):
            out[-1] += word
        else:
            out.append(word)
    return out


def _chinese_numeral(word: str) -> list[str]:
    """A wholly numeral word as Arabic digits plus its measure word ("三百五十个" -> ["350", "个"]); any other
    word unchanged (一种 -> ["1", "种"], but 统一, 第一, 一些 stay words)."""
    match = _CHINESE_NUMERAL.fullmatch(word)
    if match is None or (value := _numeral_value(match.group(1))) is None:
        return [word]
    return [str(value), match.group(2)] if match.group(2) else [str(value)]


def _numeral_value(numeral: str) -> int | None:
    """十二 -> 12, 三百零五 -> 305, 两万 -> 20000; None for a word only made of numeral characters that is no
    numeral (千万 "by all means", 万一 "in case", 一一 "one by one")."""
    if numeral[0] in "百千万亿" or _ADJACENT_DIGITS.search(numeral):
        return None
    total = section = digit = 0
    for char in numeral:
        if char in _DIGITS:
            digit = _DIGITS[char]
        elif char in _UNITS:
            section += (digit or 1) * _UNITS[char]
            digit = 0
        else:
            total += (section + digit) * _MYRIADS[char]
            section = digit = 0
    return total + section + digit


def _is_qualifier(word: str) -> bool:
    return word in QUALIFIERS or (len(word) > 1 and word[0] in _NEGATION_START and not word.startswith(_NOT_NEGATIONS))


@dataclass(frozen=True)
class _Window:
    """One to `max_window_sentences` consecutive evidence sentences, tokenised."""

    start: int
    end: int
    tokens: tuple[str, ...]
    token_set: frozenset[str]
    qualifier_positions: tuple[int, ...]
    n_sentences: int = 1

    @property
    def split_set(self) -> frozenset[str]:
        """token_set with glued negations cut (不支持 -> 不, 支持): what the contradiction test aligns."""
        return frozenset(_split_negations(self.tokens)) if self.qualifier_positions else self.token_set


@lru_cache(maxsize=4096)
def _windows(evidence: str, max_sentences: int) -> tuple[_Window, ...]:
    """The windows of an evidence text; cached, because one evidence is judged against many claim sentences."""
    spans = sentence_spans(evidence)
    span_tokens = [tokens(evidence[start:end]) for start, end in spans]
    windows = []
    for first in range(len(spans)):
        for last in range(first, min(first + max_sentences, len(spans))):
            window = tuple(t for part in span_tokens[first : last + 1] for t in part)
            windows.append(_window_of(spans[first][0], spans[last][1], window, last - first + 1))
    return tuple(windows)


def _match_window(
    claim_tokens: tuple[str, ...], content: set[str], window: _Window, settings: LexicalSettings
) -> float:
    """Share of claim tokens matched in order in `window` (LCS); 0 when a guard fails. The guards work on the
    alignment, not on the window's bag of words: a word elsewhere in the window does not excuse a swap."""
    if len(content & window.token_set) < settings.min_content_recall * len(content):
        return 0.0  # cheap bag-of-words bound before aligning
    aligned = _alignment(claim_tokens, window.tokens)
    score = len(aligned) / len(claim_tokens)
    if score < settings.min_score or len(aligned) < _MIN_DENSITY * (max(aligned.values()) - min(aligned.values()) + 1):
        return 0.0
    matched = set(aligned.values())
    # A claim's numbers and qualifiers must match in context (with a neighbouring token), not just somewhere.
    if any((_NUMBER.match(w) or _is_qualifier(w)) and not _in_context(i, aligned) for i, w in enumerate(claim_tokens)):
        return 0.0
    if any(j not in matched for j in window.qualifier_positions):
        return 0.0
    content_at = [i for i, word in enumerate(claim_tokens) if word not in STOPWORDS]
    unmatched = [i for i in content_at if i not in aligned]
    if len(content_at) - len(unmatched) < settings.min_content_recall * len(content_at):
        return 0.0
    if not all(_is_variant(claim_tokens[i], _gap(i, aligned, window.tokens)) for i in unmatched):
        return 0.0
    return score


def _alignment(claim_tokens: tuple[str, ...], window_tokens: tuple[str, ...]) -> dict[int, int]:
    """claim token index -> window token index, for the tokens of one longest common subsequence."""
    blocks = LCSseq.editops(claim_tokens, window_tokens).as_matching_blocks()
    return {block.a + k: block.b + k for block in blocks for k in range(block.size)}


def _in_context(i: int, aligned: dict[int, int]) -> bool:
    j = aligned.get(i)
    return j is not None and (aligned.get(i - 1) == j - 1 or aligned.get(i + 1) == j + 1)


def _gap(i: int, aligned: dict[int, int], window_tokens: tuple[str, ...]) -> tuple[str, ...]:
    """The window tokens between the matches of the claim tokens around unmatched claim token `i`."""
    before = [j for c, j in aligned.items() if c < i]
    after = [j for c, j in aligned.items() if c > i]
    return window_tokens[max(before, default=-1) + 1 : min(after, default=len(window_tokens))]


def _is_variant(word: str, gap: tuple[str, ...]) -> bool:
    """An unmatched claim word the evidence says in another form at the same place: an inflection
    ("offers"/"offered") or a Chinese word segmented differently; never a number."""
    if _NUMBER.match(word):
        return False
    if _HAN_RUN.match(word):
        return word in "".join(gap)
    return _stem(word) in map(_stem, gap)


def _stem(word: str) -> str:
    return _SUFFIX.sub("", word) if len(word) > 4 else word
