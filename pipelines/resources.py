"""Dagster resources: where the store and the source documents live."""
from __future__ import annotations

from pathlib import Path

import dagster as dg


class CitekeeperConfig(dg.ConfigurableResource):
    """Paths and knobs shared by every citekeeper asset."""

    store_dir: str = ".citekeeper/store"
    source_dir: str = "sample_corpus/v1"
    answers_path: str | None = None  # JSONL/Parquet of answers to register before citation checks
    nli_model: str | None = None  # hub id or local dir; None runs the model-free tiers only
    nli_backend: str = "torch"
    max_chunk_chars: int = 1000

    @property
    def store_path(self) -> Path:
        return Path(self.store_dir)

    @property
    def source_path(self) -> Path:
        return Path(self.source_dir)
