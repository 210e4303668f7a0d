"""Persistent cache of NLI verdicts, keyed by (model, settings, claim text hash, evidence text hash).

One Parquet file per run under the cache directory (`part-<run_id>.parquet`, schema NLI_CACHE): runs never
rewrite each other's files, and a re-run after a corpus update only scores the pairs whose evidence changed.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from citekeeper.schema import NLI_CACHE
from citekeeper.tables import empty, write_parquet

KEY = ["model_key", "settings_key", "claim_hash", "evidence_hash"]
VALUES = ["p_entailment", "p_neutral", "p_contradiction", "window_start", "window_end", "n_windows"]


def no_hits() -> pl.DataFrame:
    """What a lookup returns when nothing is cached."""
    return empty(NLI_CACHE).select(KEY[2:] + VALUES)


class VerdictCache:
    def __init__(self, directory: Path | str):
        self.directory = Path(directory)
        self._new: list[pl.DataFrame] = []

    def lookup(self, model_key: str, settings_key: str, keys: pl.DataFrame) -> pl.DataFrame:
        """Cached verdicts for the (claim_hash, evidence_hash) rows of `keys` (misses are absent)."""
        parts = sorted(self.directory.glob("part-*.parquet"))
        if not parts or keys.is_empty():
            return no_hits()
        stored = (
            pl.scan_parquet(parts)
            .filter((pl.col("model_key") == model_key) & (pl.col("settings_key") == settings_key))
            .join(keys.lazy().select(KEY[2:]).unique(), on=KEY[2:], how="semi")
            .unique(subset=KEY[2:], keep="last")
            .select(KEY[2:] + VALUES)
            .collect()
        )
        return stored

    def add(self, model_key: str, settings_key: str, verdicts: pl.DataFrame) -> None:
        if verdicts.is_empty():
            return
        self._new.append(
            verdicts.select(KEY[2:] + VALUES).with_columns(
                pl.lit(model_key).alias("model_key"),
                pl.lit(settings_key).alias("settings_key"),
                pl.lit(datetime.now(timezone.utc)).alias("created_at"),
            )
        )

    def flush(self, run_id: str) -> Path | None:
        if not self._new:
            return None
        path = write_parquet(pl.concat(self._new, how="diagonal_relaxed"), NLI_CACHE, self.directory / f"part-{run_id}.parquet")
        self._new = []
        return path
