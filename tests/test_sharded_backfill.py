"""The backfill of every `doc_shard` partition of a corpus version, run for real: one run of
`citekeeper_ingest_sharded` through Dagster's multiprocess executor on a persistent instance (a temporary
DAGSTER_HOME), each shard's stage step in its own process, all launched at once, then the commit step. The
committed version equals a single-process ingest of the same tree, row for row."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import polars as pl

from assets.sharding import COMMIT, STAGE, shard_partition_key
from citekeeper.store import CorpusStore
from parsers.ingest import Shard, ingest
from pipelines.automation import SHARDED_INGEST_JOB
from pipelines.definitions import build_definitions
from tests.dagster_settings import settings

STORE_ENV, SOURCE_ENV = "CITEKEEPER_STORE", "CITEKEEPER_SOURCE"
VOLATILE = ["ingested_at"]  # the wall-clock time of the ingest, the only column allowed to differ
PARSE_WORKERS = 1  # each step parses in its own process: the shards are the parallelism here


N_SHARDS = settings().ingest_shards


def backfill_job() -> dg.JobDefinition:
    """The job as each step process rebuilds it (dg.reconstructable): bound to the store and source the test
    put in the environment, which the step processes inherit."""
    configured = settings(
        store_dir=os.environ[STORE_ENV], source_dir=os.environ[SOURCE_ENV], parse_workers=PARSE_WORKERS
    )
    return build_definitions(configured).resolve_job_def(SHARDED_INGEST_JOB)


def _write_corpus(source: Path) -> None:
    """12 documents, a file of an unsupported type, and two files in different shards that claim one doc_id
    (the commit keeps the first path's rows and quarantines the other, as a single walk does)."""
    source.mkdir()
    for i in range(12):
        sections = "\n\n".join(
            f"## Part {j}\n\nDocument {i} covers topic {j}. It counts {i * j} items." for j in range(3)
        )
        (source / f"doc-{i:02d}.md").write_text(f"# Document {i}\n\n{sections}\n")
    (source / "notes.xyz").write_text("no parser for this")
    names = [f"claim-{c}.md" for c in "abcdefgh"]
    first = names[0]
    second = next(n for n in names[1:] if _shard_of(n) != _shard_of(first))
    for name in (first, second):
        (source / name).write_text(f"---\ndoc_id: shared-id\n---\n# {name}\n\nThis file claims the id shared-id.\n")


def _shard_of(source_path: str) -> int:
    return next(i for i in range(N_SHARDS) if Shard(i, N_SHARDS).owns(source_path))


def _rows(store: CorpusStore, version: str) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    return (
        store.read_chunks(version).drop(VOLATILE).sort("chunk_id"),
        store.read_documents(version).drop(VOLATILE).sort("doc_id"),
        store.read_errors(version).drop("occurred_at").sort("source_path"),
    )


def test_backfill_of_every_doc_shard_through_the_multiprocess_executor_equals_a_single_ingest(tmp_path, monkeypatch):
    source, home = tmp_path / "source", tmp_path / "dagster_home"
    _write_corpus(source)
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "sharded"))
    monkeypatch.setenv(SOURCE_ENV, str(source))
    # Spawned steps: a forkserver is one per process, and one started by an earlier test (the parse pool's)
    # would hand the steps the environment of before this test set it.
    run_config = {"execution": {"config": {"max_concurrent": N_SHARDS, "start_method": {"spawn": {}}}}}

    with dg.DagsterInstance.get() as instance:
        assert instance.is_persistent
        instance.add_dynamic_partitions("corpus_version", ["v1"])
        result = dg.execute_job(
            dg.reconstructable(backfill_job), instance, run_config=run_config, tags={"dagster/partition": "v1"}
        )
        assert result.success
        events = instance.all_logs(result.run_id)
        stage_keys = {shard_partition_key("v1", i) for i in range(N_SHARDS)}
        assert instance.get_materialized_partitions(STAGE) == stage_keys
        assert instance.get_materialized_partitions(COMMIT) == {"v1"}

    stages = [f"stage_doc_shard_{i}" for i in range(N_SHARDS)]

    def when(event_type: str, step: str) -> float:
        (record,) = [
            e
            for e in events
            if e.dagster_event and e.dagster_event.event_type_value == event_type and e.step_key == step
        ]
        return record.timestamp

    # Each shard's stage ran in a process of its own, none of them this one.
    pids = {
        e.dagster_event.pid
        for e in events
        if e.dagster_event and e.dagster_event.event_type_value == "STEP_START" and e.step_key in stages
    }
    assert len(pids) == N_SHARDS and os.getpid() not in pids
    # The executor launched every stage step before any of them was done (they ran side by side), and the
    # commit only after all of them.
    launched = [
        e.timestamp
        for e in events
        if e.dagster_event and e.dagster_event.event_type_value == "STEP_WORKER_STARTING" and e.step_key in stages
    ]
    assert len(launched) == N_SHARDS
    assert max(launched) < min(when("STEP_SUCCESS", step) for step in stages)
    assert when("STEP_START", "commit_doc_shards") > max(when("STEP_SUCCESS", step) for step in stages)

    sharded, single = CorpusStore(tmp_path / "sharded"), CorpusStore(tmp_path / "single")
    ingest(source, single, version="v1", config=settings(parse_workers=PARSE_WORKERS).ingest.parse_config())
    for a, b in zip(_rows(sharded, "v1"), _rows(single, "v1")):
        assert a.equals(b)
    chunks, documents, errors = _rows(sharded, "v1")
    assert documents.height == 13 and chunks.height > 13
    assert sorted(errors["error_type"]) == ["DuplicateDocId", "UnsupportedFileType"]
    a, b = sharded.manifest("v1"), single.manifest("v1")
    assert (a.parent, a.corpus_hash, a.n_documents, a.n_chunks, a.n_errors) == (
        b.parent,
        b.corpus_hash,
        b.n_documents,
        b.n_chunks,
        b.n_errors,
    )
    assert not any(sharded.layout.staging_dir.glob("*/shard-*"))
