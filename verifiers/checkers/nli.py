"""The nli protocol: a 3-way (entailment / neutral / contradiction) or 2-way (entailment / not_entailment)
sequence classifier reads the (evidence, claim) pair; its labels come from config.id2label, in any order."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from verifiers.checkers.base import BoundProtocol, TransformersProtocol, is_classifier, softmax

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


@dataclass
class NLIProtocol(BoundProtocol):
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
        probabilities = softmax(logits)
        entail, middle, contra = self.columns
        contradiction = probabilities[:, contra] if contra is not None else np.full(len(probabilities), np.nan)
        return np.stack([probabilities[:, entail], probabilities[:, middle], contradiction], axis=1)


def detects(config) -> bool:
    """A classifier with NLI labels. One with two other labels is binary's; with any other label set it is refused
    (LabelSetError), as no protocol could read it."""
    if not is_classifier(config):
        return False
    try:
        canonical_columns(config.id2label)
    except LabelSetError:
        if len(config.id2label) == 2:
            return False
        raise
    return True


def build(model: str, tokenizer, config, max_tokens: int, supported_label: int) -> NLIProtocol:
    return NLIProtocol("nli", tokenizer, max_tokens, columns=canonical_columns(config.id2label))


PROTOCOL = TransformersProtocol(
    name="nli",
    model_class="AutoModelForSequenceClassification",
    detected_from="a *ForSequenceClassification with NLI labels",
    detects=detects,
    build=build,
    onnx=True,
)
