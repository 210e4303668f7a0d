"""Verification against the store: the current answers (or an answers file) checked against a corpus version,
a batch of answers at a time."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import reduce
from pathlib import Path

import polars as pl

from changes.evidence import (
    ANSWER_SOURCE_COLUMNS,
    EVIDENCE_CHUNK_COLUMNS,
    EVIDENCE_DOCUMENT_COLUMNS,
    answers_from_file,
    citation_evidence,
    read_citation_status,
)
from citekeeper.answers.store import ANSWER_BATCH, AnswerStore
from citekeeper.layout import run_table_files
from citekeeper.schema import ANSWERS, CITATIONS, CLAIMS
from citekeeper.scope import aggregate_documents, withhold_documents
from citekeeper.sharding import Shard
from citekeeper.store import CorpusStore
from citekeeper.tables import empty, read_parquet
from verifiers.checkers.base import Scorer
from verifiers.claim_metrics import status_counts
from verifiers.engine import TABLES, VerifySettings, model_values, verify_tables
from verifiers.run_tally import new_run_id, run_stats, run_table
from verifiers.verdict_cache import VerdictCache
from verifiers.verify_output import RunWriter


@dataclass(frozen=True)
class StoredRun:
    """A verification run (or a shard of one) written to Parquet: its run row in memory, its tables read on demand
    (at a million answers, scan the columns you need from the files instead)."""

    run: pl.DataFrame
    directory: Path  # the run's directory (the shard's, for a shard)

    @property
    def stats(self) -> dict[str, int]:
        return run_stats(self.run)

    def status_counts(self) -> dict[str, int]:
        return status_counts(self.run.row(0, named=True))

    def read(self, table: str) -> pl.DataFrame:
        return pl.concat([read_parquet(path, TABLES[table]) for path in run_table_files(self.directory, table)])

    @property
    def pairs(self) -> pl.DataFrame:
        return self.read("pairs")

    @property
    def claims(self) -> pl.DataFrame:
        return self.read("claims")

    @property
    def answers(self) -> pl.DataFrame:
        return self.read("answers")


def verify_store(
    store_root: Path | str | CorpusStore,
    out_dir: Path | str,
    version: str | None = None,
    answers_file: Path | str | None = None,
    scorer: Scorer | None = None,
    settings: VerifySettings = VerifySettings(),
    run_id: str | None = None,
    answers_per_batch: int = ANSWER_BATCH,
    shard: Shard | None = None,
) -> tuple[StoredRun, dict[str, Path]]:
    """Verify the current answers (or those of `answers_file`) against `version` (default: the latest) and
    write the Parquet tables; verdicts are cached under <store>/verify/cache. The answers are verified
    `answers_per_batch` at a time, each batch reading only the chunks its citations resolve to and written as it
    is done: memory is bounded by a batch.

    With `shard`, only the answers it owns (verifiers.verify_output.merge_shards makes the run row once every
    shard of the run_id has finished); the returned run row is the shard's own."""
    started_at, clock = datetime.now(UTC), time.perf_counter()
    store = store_root if isinstance(store_root, CorpusStore) else CorpusStore(store_root)
    with store.reading():  # gc waits until the run has read its version and written its tables (CLI and Dagster)
        version = store.version_or_latest(version)
        status = read_citation_status(store.root, version)
        cache = VerdictCache(store.layout.verdict_cache_dir) if scorer is not None else None
        run_id = run_id or new_run_id()

        def read_chunks(chunk_ids: list[str]) -> pl.DataFrame:
            return store.read_chunks(version, columns=EVIDENCE_CHUNK_COLUMNS, chunk_ids=chunk_ids)

        def read_documents(doc_ids: list[str]) -> pl.DataFrame:
            return store.read_documents(version, columns=EVIDENCE_DOCUMENT_COLUMNS, doc_ids=doc_ids)

        tallies, withheld = [], aggregate_documents(store, [version])  # aggregate_only: counted, never named
        with RunWriter(out_dir, version, run_id, shard) as out:
            for answers, claims, citations in _answer_batches(store, answers_file, answers_per_batch, shard):
                evidence = citation_evidence(citations, status, read_chunks, read_documents, answers)
                frames, tally = verify_tables(claims, evidence, version, scorer, settings, cache, run_id)
                out.write({**frames, "pairs": withhold_documents(frames["pairs"], withheld)})
                tallies.append(tally)
                if cache is not None:
                    cache.flush(run_id)  # a run stopped midway keeps the verdicts of its finished batches
            tally, model = reduce(lambda a, b: a + b, tallies), model_values(scorer, settings)
            run = run_table(tally, run_id, version, started_at, time.perf_counter() - clock, model)
            if shard is None:
                paths = out.finish(run)
            else:
                paths = out.finish_shard(tally.shard_row(run_id, version, shard, started_at, model), tally.pair_keys)
        return StoredRun(run, out.directory), paths


ANSWER_TABLES = ("answers", "claims", "citations")


def _answer_batches(
    store: CorpusStore, answers_file: Path | str | None, answers_per_batch: int, shard: Shard | None
) -> Iterator[tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]]:
    """(answers, claims, citations) of the current answers, a batch at a time, at least one (maybe empty); an
    answers file is one batch (it is read whole to report its bad lines before anything runs)."""
    if answers_file is not None:
        answers, claims, citations = answers_from_file(answers_file, store)
        if shard is not None:
            owned = shard.owned("answer_id")
            answers, claims, citations = answers.filter(owned), claims.filter(owned), citations.filter(owned)
        yield answers, claims, citations
        return
    # of the answers table only what the evidence reads (its source_record and texts would double a batch's memory)
    columns = {"answers": ["answer_id", "revision", *ANSWER_SOURCE_COLUMNS]}
    batches = AnswerStore(store.root).snapshot().current_batches(ANSWER_TABLES, answers_per_batch, shard, columns)
    first = next(
        batches,
        {"answers": empty(ANSWERS).select(columns["answers"]), "claims": empty(CLAIMS), "citations": empty(CITATIONS)},
    )
    for batch in itertools.chain([first], batches):
        yield batch["answers"], batch["claims"], batch["citations"]
