"""Static shards: a stable hash of a key (a document's source_path, an answer's answer_id) mod n, so a key always
lands in the same shard, across runs, processes and machines (unlike hash())."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import polars as pl


@dataclass(frozen=True)
class Shard:
    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"shard index must be in [0, {self.count}), got {self.index}")

    def owns(self, key: str) -> bool:
        return int(hashlib.sha256(key.encode()).hexdigest()[:16], 16) % self.count == self.index

    def owned(self, column: str) -> pl.Expr:
        """The rows of a frame whose `column` this shard owns (a filter)."""
        return pl.col(column).map_elements(self.owns, return_dtype=pl.Boolean)

    @property
    def dirname(self) -> str:
        return f"shard-{self.index:04d}-of-{self.count:04d}"

    @classmethod
    def parse(cls, text: str) -> Shard:
        """'I/N' (shard I of N, counted from 0), as the CLI takes it."""
        index, _, count = text.partition("/")
        try:
            return cls(int(index), int(count))
        except ValueError:
            raise ValueError(f"a shard is I/N with 0 <= I < N, got {text!r}") from None
