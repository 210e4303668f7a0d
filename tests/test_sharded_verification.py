"""Verification sharded by answer, run for real: one run of `citekeeper_verify_sharded` through Dagster's
multiprocess executor on a persistent instance (a temporary DAGSTER_HOME), each answer shard's step in its own
spawned process with its own copy of a tiny random-weight NLI model, all sharing one verdict cache, then the
merge. On the bundled sample corpus (v1 -> v2, its answers), the result equals an unsharded run row for row."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import polars as pl

from changes.citation_status import check_citations
from citekeeper.answers.store import AnswerStore
from citekeeper.layout import latest_run_dir
from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from pipelines.automation import SHARDED_VERIFY_JOB
from pipelines.definitions import build_definitions
from tests.dagster_settings import settings
from tests.random_models import save_random_nli_model
from verifiers.checkers.loading import load_scorer
from verifiers.verify_store import StoredRun, verify_store

SAMPLE = Path(__file__).resolve().parent.parent / "pipelines" / "sample_corpus"
N_VERIFY_SHARDS = settings().verify_shards
STORE_ENV, MODEL_ENV = "CITEKEEPER_STORE", "CITEKEEPER_TEST_NLI_MODEL"


def sharded_job() -> dg.JobDefinition:
    """The job as each step process rebuilds it (dg.reconstructable), bound to what the test put in the environment."""
    config = settings(store_dir=os.environ[STORE_ENV], nli_model=os.environ[MODEL_ENV], nli_device="cpu", nli_threads=1)
    return build_definitions(config).resolve_job_def(SHARDED_VERIFY_JOB)


def test_sharded_verification_through_the_multiprocess_executor_equals_one_run(tmp_path, monkeypatch):
    store = CorpusStore(tmp_path / "store")
    for version in ("v1", "v2"):
        ingest(SAMPLE / version, store, version=version)
    assert AnswerStore(store.root).add(SAMPLE / "answers.jsonl").n_registered > N_VERIFY_SHARDS
    check_citations(store, "v2", suggest=False)
    texts = store.read_chunks("v2", columns=["text"])["text"].to_list()
    model = save_random_nli_model(tmp_path / "model", texts)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv(STORE_ENV, str(store.root))
    monkeypatch.setenv(MODEL_ENV, str(model))
    run_config = {"execution": {"config": {"max_concurrent": N_VERIFY_SHARDS, "start_method": {"spawn": {}}}}}

    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions("corpus_version", ["v2"])
        result = dg.execute_job(
            dg.reconstructable(sharded_job), instance, run_config=run_config, tags={"dagster/partition": "v2"}
        )
        assert result.success
        events = instance.all_logs(result.run_id)
        assert instance.get_materialized_partitions(dg.AssetKey("verification")) == {"v2"}
    steps = {f"verify_answer_shard_{i}" for i in range(N_VERIFY_SHARDS)}
    pids = {
        e.dagster_event.pid
        for e in events
        if e.dagster_event and e.dagster_event.event_type_value == "STEP_START" and e.step_key in steps
    }
    assert len(pids) == N_VERIFY_SHARDS and os.getpid() not in pids  # each shard in a process of its own

    run_dir = latest_run_dir(store.layout.runs_dir, "v2")
    sharded = StoredRun(pl.read_parquet(run_dir / "run.parquet"), run_dir)
    whole, _ = verify_store(store, tmp_path / "one", version="v2", scorer=load_scorer(str(model), device="cpu"))
    keys = {
        "pairs": ["answer_id", "claim_id", "sentence_index", "citation_id"],
        "claims": ["answer_id", "claim_id"],
        "answers": ["answer_id"],
    }
    for table, order in keys.items():
        a, b = (r.read(table).drop("run_id", "from_cache", strict=False).sort(order) for r in (sharded, whole))
        assert a.equals(b), table
    varying = ["run_id", "started_at", "duration_s", "cache_hits", "model_calls"]
    assert sharded.run.drop(varying).equals(whole.run.drop(varying))
    assert sharded.run["model_calls"].item() > 0  # the NLI tier ran in the shard processes
    assert whole.run["cache_hits"].item() == whole.run["n_unique_pairs"].item() - whole.run["lexical_decisions"].item()
