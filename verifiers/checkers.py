"""The fact-checker protocols behind verifiers.nli's one scorer contract (nli, binary, seq2seq, causal-lm; after
MiniCheck's inference code, Liyan06/MiniCheck minicheck/inference.py) and the presets of the known checkers
(docs/verification.md, "Checkers")."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from citekeeper.model_sources import pulled_spec

PROTOCOLS = ("nli", "binary", "seq2seq", "causal-lm")
MINICHECK_SYSTEM_PROMPT = (
    "Determine whether the provided claim is consistent with the corresponding document. Consistency in this "
    "context implies that all information presented in the claim is substantiated by the document. If not, it "
    "should be considered inconsistent. Please assess the claim's consistency with the document by responding "
    'with either "Yes" or "No".'
)
MINICHECK_USER_PROMPT = "Document: [DOCUMENT]\nClaim: [CLAIM]"
UNTRUNCATED = 1 << 30
_CLAIM_MARK = "\u2063CLAIM\u2063"  # where the claim goes in a rendered prompt (invisible separators around it)


ENTAILMENT, NEUTRAL, CONTRADICTION, NOT_ENTAILMENT = "entailment", "neutral", "contradiction", "not_entailment"

_LABEL_ALIASES = {
    "entailment": ENTAILMENT,
    "entail": ENTAILMENT,
    "entails": ENTAILMENT,
    "entailed": ENTAILMENT,
    "neutral": NEUTRAL,
    "contradiction": CONTRADICTION,
    "contradict": CONTRADICTION,
    "contradicts": CONTRADICTION,
    "contradicted": CONTRADICTION,
    "not_entailment": NOT_ENTAILMENT,
    "non_entailment": NOT_ENTAILMENT,
    "not_entailed": NOT_ENTAILMENT,
}
_THREE_WAY = {ENTAILMENT, NEUTRAL, CONTRADICTION}
_TWO_WAY = {ENTAILMENT, NOT_ENTAILMENT}


class LabelSetError(ValueError):
    """The model's config.id2label is not an NLI label set citekeeper understands."""


def canonical_columns(id2label: dict) -> tuple[int, int, int | None]:
    """Model output indices of (entailment, neutral-or-not-entailment, contradiction-or-None)."""
    names = {}
    for index, label in id2label.items():
        key = re.sub(r"[\s-]+", "_", str(label).strip().lower())
        names[_LABEL_ALIASES.get(key, f"?{label}")] = int(index)
    if set(names) == _THREE_WAY and len(id2label) == 3:
        return names[ENTAILMENT], names[NEUTRAL], names[CONTRADICTION]
    if set(names) == _TWO_WAY and len(id2label) == 2:
        return names[ENTAILMENT], names[NOT_ENTAILMENT], None
    raise LabelSetError(
        f"config.id2label {dict(id2label)} is not a known NLI label set: expected "
        "entailment/neutral/contradiction (3-way) or entailment/not_entailment (2-way), in any order. "
        "Fix id2label in the model's config.json."
    )


class CheckerError(ValueError):
    """The model cannot be run as a checker; the message names the model and what is missing."""


@dataclass(frozen=True)
class Preset:
    """What citekeeper knows of a published checker: how to run it, and on what terms."""

    protocol: str
    window: int  # tokens the model reads at once
    chunk: int | None  # evidence tokens per window (MiniCheck's chunk size); None: as many as fit
    licence: str
    commercial: bool  # may a company use it without a separate licence
    aggrefact_bacc: float | None = None  # LLM-AggreFact balanced accuracy, as published
    supported_label: int = 1


# LLM-AggreFact figures as the leaderboard publishes them; licences as the model cards state them.
PRESETS: dict[str, Preset] = {
    "bespokelabs/Bespoke-MiniCheck-7B": Preset("causal-lm", 32768, 32468, "CC BY-NC 4.0", False, 77.4),
    "yaxili96/FactCG-DeBERTa-v3-Large": Preset("binary", 2048, 400, "MIT", True, 75.6),
    "lytang/MiniCheck-Flan-T5-Large": Preset("seq2seq", 2048, 500, "MIT", True, 75.0),
    "lytang/MiniCheck-RoBERTa-Large": Preset("binary", 512, 400, "MIT", True, 73.5),
    "lytang/MiniCheck-DeBERTa-v3-Large": Preset("binary", 2048, 400, "MIT", True, 73.1),
    "cross-encoder/nli-deberta-v3-xsmall": Preset("nli", 512, None, "Apache-2.0", True),
    "MoritzLaurer/mDeBERTa-v3-base-xnli-multilingual-nli-2mil7": Preset("nli", 512, None, "MIT", True),
}


def preset_for(model: str, directory: Path | None = None) -> Preset | None:
    """The preset of a hub id, or of the hub id a directory `citekeeper models pull` saved was pulled from."""
    return PRESETS.get(model) or (PRESETS.get(pulled_spec(directory) or "") if directory is not None else None)


def licence_notice(model: str, preset: Preset | None) -> str | None:
    """What to tell whoever runs a preset whose licence forbids commercial use; None for the others."""
    if preset is None or preset.commercial:
        return None
    return f"{model} is licensed {preset.licence}: not for commercial use without the licensor's permission"


def detect_protocol(model: str, config) -> str:
    """The protocol a model's config implies: its architecture, and for a classifier its labels."""
    architectures = list(getattr(config, "architectures", None) or [])
    if any(a.endswith("ForCausalLM") for a in architectures):
        return "causal-lm"
    if any(a.endswith("ForConditionalGeneration") for a in architectures) and getattr(
        config, "is_encoder_decoder", False
    ):
        return "seq2seq"
    if any(a.endswith("ForSequenceClassification") for a in architectures):
        try:
            canonical_columns(config.id2label)
            return "nli"
        except LabelSetError:
            if len(config.id2label) == 2:  # generic LABEL_0 / LABEL_1: MiniCheck's binary classifiers
                return "binary"
            raise
    raise CheckerError(
        f"model {model!r}: architecture {architectures or 'unknown'} is not a checker citekeeper can run "
        "(a *ForSequenceClassification, a seq2seq *ForConditionalGeneration or a *ForCausalLM); "
        f"--checker {'|'.join(PROTOCOLS)} names the protocol of a model whose config does not say it"
    )


@dataclass
class Protocol:
    """How pairs become model inputs and logits become canonical probabilities: (entailment,
    neutral-or-not-entailment, contradiction), NaN where the model has no contradiction."""

    name: str
    tokenizer: object
    max_tokens: int
    forward_kwargs: dict = field(default_factory=dict)

    def texts(self, premises: list[str], hypotheses: list[str]):
        raise NotImplementedError

    def encode(
        self, premises: list[str], hypotheses: list[str], max_length: int | None = None
    ) -> dict[str, np.ndarray]:
        return dict(
            self.tokenizer(
                self.texts(premises, hypotheses),
                truncation=True,
                max_length=max_length or self.max_tokens,
                padding=True,
                return_tensors="np",
            )
        )

    def to_canonical(self, logits: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @property
    def key(self) -> str:
        """What the protocol adds to the verdict cache's model key (a binary checker's supported label too)."""
        return self.name

    def prompt_tokens(self) -> int:
        """Tokens the input has besides the evidence and the claim (specials, prompt), untruncated."""
        return len(self.encode([""], [""], max_length=UNTRUNCATED)["input_ids"][0])


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def _support(p_supported: np.ndarray) -> np.ndarray:
    """One support score as the canonical columns: entailment, not-entailment, no contradiction."""
    return np.stack([p_supported, 1.0 - p_supported, np.full(len(p_supported), np.nan)], axis=1)


@dataclass
class NLIProtocol(Protocol):
    columns: tuple[int, int, int | None] = (0, 1, 2)

    def encode(
        self, premises: list[str], hypotheses: list[str], max_length: int | None = None
    ) -> dict[str, np.ndarray]:
        return dict(
            self.tokenizer(
                premises,
                hypotheses,
                truncation="longest_first",
                max_length=max_length or self.max_tokens,
                padding=True,
                return_tensors="np",
            )
        )

    def to_canonical(self, logits: np.ndarray) -> np.ndarray:
        softmax = _softmax(logits)
        entail, middle, contra = self.columns
        contradiction = softmax[:, contra] if contra is not None else np.full(len(softmax), np.nan)
        return np.stack([softmax[:, entail], softmax[:, middle], contradiction], axis=1)


def _separator(model: str, tokenizer) -> str:
    separator = tokenizer.eos_token or tokenizer.sep_token
    if not separator:
        raise CheckerError(f"model {model!r}: its tokenizer has no eos (or sep) token to join evidence and claim with")
    return separator


@dataclass
class BinaryProtocol(Protocol):
    separator: str = "</s>"
    supported_label: int = 1

    def texts(self, premises: list[str], hypotheses: list[str]) -> list[str]:
        return [f"{p}{self.separator}{h}" for p, h in zip(premises, hypotheses)]

    def to_canonical(self, logits: np.ndarray) -> np.ndarray:
        return _support(_softmax(logits)[:, self.supported_label])

    @property
    def key(self) -> str:
        return f"binary:{self.supported_label}"


@dataclass
class Seq2SeqProtocol(Protocol):
    separator: str = "</s>"
    label_ids: tuple[int, int] = (0, 0)  # the first tokens of "0" and "1"
    decoder_start: int = 0

    def texts(self, premises: list[str], hypotheses: list[str]) -> list[str]:
        return [f"predict: {p}{self.separator}{h}" for p, h in zip(premises, hypotheses)]

    def encode(
        self, premises: list[str], hypotheses: list[str], max_length: int | None = None
    ) -> dict[str, np.ndarray]:
        encoded = super().encode(premises, hypotheses, max_length)
        encoded["decoder_input_ids"] = np.full((len(encoded["input_ids"]), 1), self.decoder_start, dtype=np.int64)
        return encoded

    def to_canonical(self, logits: np.ndarray) -> np.ndarray:
        return _support(_softmax(logits[:, -1, list(self.label_ids)])[:, 1])


@dataclass
class CausalLMProtocol(Protocol):
    yes_ids: tuple[int, ...] = ()
    no_ids: tuple[int, ...] = ()

    def texts(self, premises: list[str], hypotheses: list[str]) -> list[str]:
        return [self.prompt(p, h) for p, h in zip(premises, hypotheses)]

    def prompt(self, premise: str, hypothesis: str) -> str:
        user = MINICHECK_USER_PROMPT.replace("[DOCUMENT]", premise).replace("[CLAIM]", hypothesis)
        messages = [{"role": "system", "content": MINICHECK_SYSTEM_PROMPT}, {"role": "user", "content": user}]
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    def encode(
        self, premises: list[str], hypotheses: list[str], max_length: int | None = None
    ) -> dict[str, np.ndarray]:
        # The chat template writes its own special tokens; left padding puts every prompt's last token last.
        return dict(
            self.tokenizer(
                self.texts(premises, hypotheses),
                add_special_tokens=False,
                truncation=True,
                max_length=max_length or self.max_tokens,
                padding=True,
                padding_side="left",
                return_tensors="np",
            )
        )

    def split_prompt(self, premise: str, hypotheses: list[str]) -> tuple[list[int], list[list[int]]] | None:
        """The prompts' tokens as (the evidence prefix they share, each one's rest: claim and template tail), so
        claims that share evidence share the prefix's KV cache; None when for some claim the two halves do not
        tokenise as the whole does. The prefix is rendered and tokenised once."""
        text = self.prompt(premise, _CLAIM_MARK)
        at = text.index(_CLAIM_MARK)
        cut = len(text[:at].rstrip(" "))  # the space before the claim belongs to the claim's first token
        prefix, (before, after) = text[:cut], (text[cut:at], text[at + len(_CLAIM_MARK) :])

        def tokenize(part: str) -> list[int]:
            return self.tokenizer(part, add_special_tokens=False)["input_ids"]

        prefix_ids, rests = tokenize(prefix), []
        for hypothesis in hypotheses:
            rest = before + hypothesis + after
            rests.append(tokenize(rest))
            if prefix_ids + rests[-1] != tokenize(prefix + rest):
                return None
        return prefix_ids, rests

    def to_canonical(self, logits: np.ndarray) -> np.ndarray:
        probs = _softmax(logits[:, -1, :].astype(np.float64))
        yes, no = probs[:, list(self.yes_ids)].sum(axis=1), probs[:, list(self.no_ids)].sum(axis=1)
        return _support(yes / np.maximum(yes + no, np.finfo(np.float64).tiny))


def spelling_ids(model: str, tokenizer, word: str) -> tuple[int, ...]:
    """Every token that decodes to `word` in any case, with or without a leading space ("Yes", " yes", "YES"):
    MiniCheck sums the probability of each."""
    vocabulary = range(len(tokenizer))
    decoded = tokenizer.batch_decode([[i] for i in vocabulary])
    ids = tuple(i for i, text in zip(vocabulary, decoded) if text.strip().lower() == word)
    if not ids:
        raise CheckerError(
            f"model {model!r}: its tokenizer has no token {word!r}, which the protocol reads the verdict from"
        )
    return ids


def first_token(model: str, tokenizer, word: str) -> int:
    """The first token of `word` (MiniCheck-Flan-T5 compares the logits of the first tokens of "0" and "1")."""
    pieces = tokenizer(word, add_special_tokens=False)["input_ids"]
    if not pieces or pieces[0] == tokenizer.unk_token_id:
        raise CheckerError(
            f"model {model!r}: its tokenizer has no token {word!r}, which the protocol reads the verdict from"
        )
    return pieces[0]


def build_protocol(name: str, model: str, tokenizer, config, max_tokens: int, supported_label: int = 1) -> Protocol:
    """The protocol `name` for this model and tokenizer; CheckerError names what the model lacks for it."""
    if name == "nli":
        return NLIProtocol(name, tokenizer, max_tokens, columns=canonical_columns(config.id2label))
    if name == "binary":
        n_labels = len(config.id2label)
        if not 0 <= supported_label < n_labels:
            raise CheckerError(
                f"model {model!r}: --supported-label {supported_label} is not one of its {n_labels} labels"
            )
        return BinaryProtocol(
            name, tokenizer, max_tokens, separator=_separator(model, tokenizer), supported_label=supported_label
        )
    if name == "seq2seq":
        zero, one = (first_token(model, tokenizer, word) for word in ("0", "1"))
        if zero == one:
            raise CheckerError(f"model {model!r}: its tokenizer starts '0' and '1' with the same token")
        start = getattr(config, "decoder_start_token_id", None)
        return Seq2SeqProtocol(
            name,
            tokenizer,
            max_tokens,
            separator=_separator(model, tokenizer),
            label_ids=(zero, one),
            decoder_start=0 if start is None else start,
        )
    if name == "causal-lm":
        if not getattr(tokenizer, "chat_template", None):
            raise CheckerError(
                f"model {model!r}: its tokenizer has no chat template, which the causal-lm protocol writes the prompt with"
            )
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        yes, no = spelling_ids(model, tokenizer, "yes"), spelling_ids(model, tokenizer, "no")
        return CausalLMProtocol(
            name, tokenizer, max_tokens, forward_kwargs={"logits_to_keep": 1}, yes_ids=yes, no_ids=no
        )
    raise CheckerError(f"unknown checker protocol {name!r}: use one of {', '.join(PROTOCOLS)}")
