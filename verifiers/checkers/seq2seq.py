"""The seq2seq protocol (MiniCheck-Flan-T5): an encoder-decoder reads `"predict: " + evidence + eos + claim`; one
decoder step, P("1") against P("0") of the first tokens of each, is the support score."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verifiers.checkers.base import (
    BoundProtocol,
    CheckerError,
    TransformersProtocol,
    separator,
    softmax,
    support_columns,
)


@dataclass
class Seq2SeqProtocol(BoundProtocol):
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
        return support_columns(softmax(logits[:, -1, list(self.label_ids)])[:, 1])


def first_token(model: str, tokenizer, word: str) -> int:
    """The first token of `word` (MiniCheck-Flan-T5 compares the logits of the first tokens of "0" and "1")."""
    pieces = tokenizer(word, add_special_tokens=False)["input_ids"]
    if not pieces or pieces[0] == tokenizer.unk_token_id:
        raise CheckerError(
            f"model {model!r}: its tokenizer has no token {word!r}, which the protocol reads the verdict from"
        )
    return pieces[0]


def detects(config) -> bool:
    architectures = getattr(config, "architectures", None) or []
    return any(a.endswith("ForConditionalGeneration") for a in architectures) and bool(
        getattr(config, "is_encoder_decoder", False)
    )


def build(model: str, tokenizer, config, max_tokens: int, supported_label: int) -> Seq2SeqProtocol:
    zero, one = (first_token(model, tokenizer, word) for word in ("0", "1"))
    if zero == one:
        raise CheckerError(f"model {model!r}: its tokenizer starts '0' and '1' with the same token")
    start = getattr(config, "decoder_start_token_id", None)
    return Seq2SeqProtocol(
        "seq2seq",
        tokenizer,
        max_tokens,
        separator=separator(model, tokenizer),
        label_ids=(zero, one),
        decoder_start=0 if start is None else start,
    )


PROTOCOL = TransformersProtocol(
    name="seq2seq",
    model_class="AutoModelForSeq2SeqLM",
    detected_from="an encoder-decoder *ForConditionalGeneration",
    detects=detects,
    build=build,
)
