"""What every checker keeps to, whatever runs it: the scorer contract the engine calls (pairs in, one row of
canonical probabilities per pair out), the verdict cache's model key, the two kinds of registry entry (a protocol
of transformers models, and a checker that is not one), and what the model protocols share
(docs/extending.md, "A checker protocol")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from verifiers.checkers.presets import Preset

UNTRUNCATED = 1 << 30


class CheckerError(ValueError):
    """The model cannot be run as a checker, or a checker answered out of contract; the message names it."""


class Scorer(Protocol):
    """score() gives one row per pair in the canonical order (entailment, neutral, contradiction); for a 2-way model
    or a one-score checker the middle column is not-entailment and contradiction is NaN, recorded as null."""

    model_id: str
    revision: str
    backend: str  # torch | onnx for a model; python | http for a checker that is not one
    max_tokens: int  # the longest premise + hypothesis the model accepts, in tokens
    model_calls: int  # sequences sent through the model so far
    chunk_tokens: int | None  # evidence tokens per window; None: as many as fit
    preset: Preset | None  # what citekeeper knows of a published checker (verifiers.checkers.presets)

    @property
    def precision(self) -> str:
        """fp32 | bf16 | fp16 (torch), int8 (onnx), external (a checker that is not a model: its own)."""
        ...

    @property
    def checker(self) -> str:
        """The protocol: its name in the registry (verifiers.checkers.PROTOCOLS)."""
        ...

    @property
    def checker_key(self) -> str:
        """What the protocol adds to the verdict cache's model key."""
        ...

    @property
    def prompt_tokens(self) -> int:
        """Tokens of each input besides evidence and claim."""
        ...

    @property
    def where(self) -> str:
        """Where it runs, in words, for the CLI and the log."""
        ...

    def count_tokens(self, texts: list[str]) -> list[int]: ...

    def score(self, premises: list[str], hypotheses: list[str]) -> np.ndarray: ...


def model_key(scorer: Scorer) -> str:
    """The verdict cache's model key: model, revision, backend, precision (verdicts at bf16 are not those at fp32)
    and checker protocol."""
    return f"{scorer.model_id}@{scorer.revision}/{scorer.backend}/{scorer.precision}/{scorer.checker_key}"


@dataclass
class BoundProtocol:
    """A protocol bound to one model's tokenizer: how pairs become model inputs and logits become canonical
    probabilities (entailment, neutral-or-not-entailment, contradiction), NaN where the model has no contradiction."""

    name: str
    tokenizer: Any
    max_tokens: int
    forward_kwargs: dict = field(default_factory=dict)
    shares_prefix = False  # claims citing one evidence can share its KV cache: split_prompt (not a field)

    def texts(self, premises: list[str], hypotheses: list[str]) -> list[str]:
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

    def split_prompt(self, premise: str, hypotheses: list[str]) -> tuple[list[int], list[list[int]]] | None:
        """The inputs' tokens as (the evidence prefix they share, each one's rest), where shares_prefix."""
        return None


@dataclass(frozen=True)
class TransformersProtocol:
    """A registry entry: a protocol of transformers models."""

    name: str
    model_class: str  # the transformers Auto class its models load with
    detected_from: str  # the configs that imply it, in words (the error for a model no protocol runs lists them)
    detects: Callable[[Any], bool]  # whether a model's config implies it (entries are tried in registry order)
    # (model, tokenizer, config, max_tokens, supported_label) -> the protocol bound to that model; CheckerError
    # names what the model lacks for it
    build: Callable[[str, Any, Any, int, int], BoundProtocol]
    onnx: bool = False  # the ONNX backend runs it (a sequence classifier: one logits output)


@dataclass(frozen=True)
class ExternalProtocol:
    """A registry entry: a checker that is not a transformers model (verifiers.checkers.external)."""

    name: str
    # (spec as --model gives it, user-given version or None, batch size or None) -> its scorer; CheckerError
    # names what is wrong with the spec
    load: Callable[[str, str | None, int | None], Scorer]


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def support_columns(p_supported: np.ndarray) -> np.ndarray:
    """One support score as the canonical columns: entailment, not-entailment, no contradiction."""
    return np.stack([p_supported, 1.0 - p_supported, np.full(len(p_supported), np.nan)], axis=1)


def is_classifier(config) -> bool:
    """Whether a model's config names a *ForSequenceClassification architecture."""
    return any(a.endswith("ForSequenceClassification") for a in getattr(config, "architectures", None) or [])


def separator(model: str, tokenizer) -> str:
    """The token one-sequence protocols join evidence and claim with (MiniCheck's: eos, else sep)."""
    token = tokenizer.eos_token or tokenizer.sep_token
    if not token:
        raise CheckerError(f"model {model!r}: its tokenizer has no eos (or sep) token to join evidence and claim with")
    return token
