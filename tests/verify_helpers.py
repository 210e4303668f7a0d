"""Frames and scorers for the verification tests."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl

from citekeeper.identity import text_hash
from verifiers.checkers.base import Scorer
from verifiers.engine import VerifyResult, VerifySettings, model_values, verify_tables
from verifiers.run_tally import new_run_id, run_stats, run_table
from verifiers.verdict_cache import VerdictCache
from verifiers.verify_output import RunWriter


def claims_frame(rows: list[tuple[str, str, str, int]]) -> pl.DataFrame:
    """rows: (answer_id, claim_id, text, n_citations)."""
    return pl.DataFrame(
        {
            "answer_id": [r[0] for r in rows],
            "revision": [1] * len(rows),
            "claim_id": [r[1] for r in rows],
            "claim_index": list(range(len(rows))),
            "text": [r[2] for r in rows],
            "text_hash": [text_hash(r[2]) for r in rows],
            "n_citations": [r[3] for r in rows],
        },
        schema={
            "answer_id": pl.String,
            "revision": pl.Int32,
            "claim_id": pl.String,
            "claim_index": pl.Int32,
            "text": pl.String,
            "text_hash": pl.String,
            "n_citations": pl.Int32,
        },
    )


def citations_frame(rows: list[dict]) -> pl.DataFrame:
    """rows: dicts with answer_id, claim_id, citation_id, chunk_text and optionally quote, chunk_start_char,
    doc_id, citation_status, stored_start_char / stored_end_char. The cited chunk is the evidence chunk."""
    full = []
    for index, row in enumerate(rows):
        chunk_text = row.get("chunk_text")
        full.append(
            {
                "revision": 1,
                "citation_index": index,
                "chunk_id": row.get("chunk_id", f"chunk-{row['citation_id']}"),
                "quote": None,
                "doc_id": "doc-1" if chunk_text is not None else None,
                "chunk_start_char": 100 if chunk_text is not None else None,
                "citation_status": None,
                "stored_start_char": None,
                "stored_end_char": None,
                **row,
            }
        )
    for row in full:
        row.setdefault("evidence_chunk_id", row["chunk_id"] if row["chunk_text"] is not None else None)
    return pl.DataFrame(
        full,
        schema_overrides={
            "revision": pl.Int32,
            "citation_index": pl.Int32,
            "quote": pl.String,
            "chunk_text": pl.String,
            "doc_id": pl.String,
            "chunk_start_char": pl.Int64,
            "citation_status": pl.String,
            "stored_start_char": pl.Int64,
            "stored_end_char": pl.Int64,
            "evidence_chunk_id": pl.String,
        },
    )


@dataclass
class TableScorer:
    """Deterministic stand-in for an NLI model: probabilities looked up by (premise substring, hypothesis).

    `count_tokens` counts words, so windowing can be tested with a small `max_tokens`.
    """

    table: dict[tuple[str, str], tuple[float, float, float]]
    default: tuple[float, float, float] = (0.1, 0.8, 0.1)
    max_tokens: int = 512
    three_way: bool = True
    model_id: str = "table-scorer"
    revision: str = "1"
    backend: str = "torch"
    precision: str = "fp32"
    model_calls: int = 0
    checker: str = "nli"
    checker_key: str = "nli"
    prompt_tokens: int = 3  # [CLS] premise [SEP] hypothesis [SEP]
    chunk_tokens: int | None = None
    seen: list[tuple[str, str]] = field(default_factory=list)

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [len(text.split()) for text in texts]

    def score(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        self.model_calls += len(premises)
        self.seen.extend(zip(premises, hypotheses))
        rows = []
        for premise, hypothesis in zip(premises, hypotheses):
            probs = next(
                (p for (needle, hyp), p in self.table.items() if hyp == hypothesis and needle in premise),
                self.default,
            )
            rows.append(probs if self.three_way else (probs[0], 1 - probs[0], float("nan")))
        return np.array(rows, dtype=np.float64)


# ---------------------------------------------------------------- the engine over frames, without a store


def verify(
    claims: pl.DataFrame,
    citations: pl.DataFrame,
    corpus_version: str,
    scorer: Scorer | None = None,
    settings: VerifySettings = VerifySettings(),
    cache: VerdictCache | None = None,
    run_id: str | None = None,
) -> VerifyResult:
    started_at, clock = datetime.now(UTC), time.perf_counter()
    run_id = run_id or new_run_id()
    frames, tally = verify_tables(claims, citations, corpus_version, scorer, settings, cache, run_id)
    run = run_table(
        tally, run_id, corpus_version, started_at, time.perf_counter() - clock, model_values(scorer, settings)
    )
    return VerifyResult(frames["pairs"], frames["claims"], frames["answers"], run, run_stats(run))


def write_outputs(result: VerifyResult, out_dir: Path | str) -> dict[str, Path]:
    """Write pairs/claims/answers/run Parquet under <out>/corpus_version=<v>/run_id=<r>/."""
    run = result.run.row(0, named=True)
    with RunWriter(out_dir, run["corpus_version"], run["run_id"]) as out:
        out.write({"pairs": result.pairs, "claims": result.claims, "answers": result.answers})
    return out.finish(result.run)
