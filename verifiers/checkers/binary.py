"""The binary protocol (MiniCheck's RoBERTa and DeBERTa checkers): a 2-label classifier reads
`evidence + eos + claim` as one sequence; the softmax of its supported label (index 1 unless set) is the support
score."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verifiers.checkers.base import (
    BoundProtocol,
    CheckerError,
    TransformersProtocol,
    is_classifier,
    separator,
    softmax,
    support_columns,
)


@dataclass
class BinaryProtocol(BoundProtocol):
    separator: str = "</s>"
    supported_label: int = 1

    def texts(self, premises: list[str], hypotheses: list[str]) -> list[str]:
        return [f"{p}{self.separator}{h}" for p, h in zip(premises, hypotheses)]

    def to_canonical(self, logits: np.ndarray) -> np.ndarray:
        return support_columns(softmax(logits)[:, self.supported_label])

    @property
    def key(self) -> str:
        return f"binary:{self.supported_label}"


def detects(config) -> bool:
    """A classifier of two labels that are not NLI's (generic LABEL_0 / LABEL_1: MiniCheck's); the nli entry,
    tried first, takes those that are."""
    return is_classifier(config) and len(config.id2label) == 2


def build(model: str, tokenizer, config, max_tokens: int, supported_label: int) -> BinaryProtocol:
    n_labels = len(config.id2label)
    if not 0 <= supported_label < n_labels:
        raise CheckerError(f"model {model!r}: --supported-label {supported_label} is not one of its {n_labels} labels")
    return BinaryProtocol(
        "binary", tokenizer, max_tokens, separator=separator(model, tokenizer), supported_label=supported_label
    )


PROTOCOL = TransformersProtocol(
    name="binary",
    model_class="AutoModelForSequenceClassification",
    detected_from="a *ForSequenceClassification with 2 other labels",
    detects=detects,
    build=build,
    onnx=True,
)
