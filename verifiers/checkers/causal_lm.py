"""The causal-lm protocol (Bespoke-MiniCheck-7B): MiniCheck's system and user prompts in the model's chat
template; P(Yes) against P(No) of the next token, each summed over every token spelling it, is the support score.
Claims that share evidence share the evidence prefix's KV cache (verifiers.checkers.backends.TorchScorer)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verifiers.checkers.base import BoundProtocol, CheckerError, TransformersProtocol, softmax, support_columns

MINICHECK_SYSTEM_PROMPT = (
    "Determine whether the provided claim is consistent with the corresponding document. Consistency in this "
    "context implies that all information presented in the claim is substantiated by the document. If not, it "
    "should be considered inconsistent. Please assess the claim's consistency with the document by responding "
    'with either "Yes" or "No".'
)
MINICHECK_USER_PROMPT = "Document: [DOCUMENT]\nClaim: [CLAIM]"
_CLAIM_MARK = "\u2063CLAIM\u2063"  # where the claim goes in a rendered prompt (invisible separators around it)


@dataclass
class CausalLMProtocol(BoundProtocol):
    yes_ids: tuple[int, ...] = ()
    no_ids: tuple[int, ...] = ()
    shares_prefix = True

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
        probs = softmax(logits[:, -1, :].astype(np.float64))
        yes, no = probs[:, list(self.yes_ids)].sum(axis=1), probs[:, list(self.no_ids)].sum(axis=1)
        return support_columns(yes / np.maximum(yes + no, np.finfo(np.float64).tiny))


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


def detects(config) -> bool:
    return any(a.endswith("ForCausalLM") for a in getattr(config, "architectures", None) or [])


def build(model: str, tokenizer, config, max_tokens: int, supported_label: int) -> CausalLMProtocol:
    if not getattr(tokenizer, "chat_template", None):
        raise CheckerError(
            f"model {model!r}: its tokenizer has no chat template, which the causal-lm protocol writes the prompt with"
        )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    yes, no = spelling_ids(model, tokenizer, "yes"), spelling_ids(model, tokenizer, "no")
    return CausalLMProtocol(
        "causal-lm", tokenizer, max_tokens, forward_kwargs={"logits_to_keep": 1}, yes_ids=yes, no_ids=no
    )


PROTOCOL = TransformersProtocol(
    name="causal-lm",
    model_class="AutoModelForCausalLM",
    detected_from="a *ForCausalLM",
    detects=detects,
    build=build,
)
