"""A checker that is not a transformers model, behind the scorer contract: a function from (premises, hypotheses)
to scores, whatever computes them (a Python callable: verifiers.checkers.python_callable; an HTTP endpoint:
verifiers.checkers.http_endpoint).

What the function returns for n pairs, in the pairs' order, is one of two forms:
- n support probabilities, each p in [0, 1]: recorded as p_entailment = p, p_neutral = 1 - p and no
  p_contradiction, as MiniCheck's one-score checkers are;
- n rows [p_entailment, p_neutral, p_contradiction], each in [0, 1] and summing to 1; p_contradiction may be None
  (NaN) for a two-way checker, whose p_neutral is then not-entailment.
Anything else is a CheckerError naming the checker. Its identity in the verdict cache is its spec (the callable's
`module:function`, the endpoint's URL) and the version its user gives (UNVERSIONED when none is): give a new
version when its verdicts change, or cached verdicts of the old one are reused."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from verifiers.checkers.base import UNTRUNCATED, CheckerError, support_columns
from verifiers.checkers.presets import Preset

UNVERSIONED = "unversioned"
DEFAULT_BATCH = 32  # pairs per call
EXPECTED = (
    "a support probability per pair, or a row [p_entailment, p_neutral, p_contradiction] per pair "
    "(each in [0, 1], a row summing to 1; p_contradiction may be null)"
)


@dataclass
class ExternalScorer:
    """The scorer of a pairs-to-scores function: pairs go to it `batch_size` at a time, whole (no windows, no
    tokens: the function reads the whole evidence and splits it if it must)."""

    model_id: str  # its spec: module:function, or the endpoint's URL
    revision: str  # the version its user gives, else UNVERSIONED
    backend: str  # python | http: how citekeeper reaches it
    checker: str  # its protocol's name in the registry
    where: str
    score_pairs: Callable[[list[str], list[str]], Any]
    batch_size: int = DEFAULT_BATCH
    model_calls: int = 0
    precision: str = "external"  # the checker's own
    max_tokens: int = UNTRUNCATED
    prompt_tokens: int = 0
    chunk_tokens: int | None = None
    preset: Preset | None = None

    @property
    def checker_key(self) -> str:
        return self.checker

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Words: the engine sizes windows by them, and with no token limit every evidence is one window."""
        return [len(text.split()) for text in texts]

    def score(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        rows = [np.empty((0, 3))]
        for start in range(0, len(premises), self.batch_size):
            batch = slice(start, start + self.batch_size)
            size = len(premises[batch])
            rows.append(self.canonical(self.score_pairs(premises[batch], hypotheses[batch]), size))
            self.model_calls += size
        return np.vstack(rows)

    def canonical(self, returned: Any, n_pairs: int) -> np.ndarray:
        """The (n_pairs, 3) canonical rows of what the function returned; CheckerError naming it when that is not
        one of the two forms."""
        name = f"{self.checker} checker {self.model_id!r}"
        try:
            scores = np.asarray(returned, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise CheckerError(f"{name}: returned {str(returned)[:200]}, expected {EXPECTED}") from exc
        if scores.shape == (n_pairs,):
            scores = support_columns(scores)
        elif scores.shape != (n_pairs, 3):
            shape = f"an array of shape {scores.shape}"
            raise CheckerError(f"{name}: returned {shape} for {n_pairs} pairs, expected {EXPECTED}")
        if np.isnan(scores[:, :2]).any() or ((scores < 0) | (scores > 1)).any():
            raise CheckerError(f"{name}: returned a probability that is missing or outside [0, 1], expected {EXPECTED}")
        if not np.allclose(np.nansum(scores, axis=1), 1.0, atol=1e-3):
            raise CheckerError(f"{name}: returned a row that does not sum to 1, expected {EXPECTED}")
        return scores
