"""Sharded ingest (doc shard x corpus version stage partitions, then one commit) commits exactly the corpus
version a single-process ingest commits, for a first and an incremental version, whether the shards run
as Dagster runs in any order or side by side."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dagster as dg
import polars as pl

from citekeeper.store import CorpusStore
from parsers.ingest import Shard, ingest, stage
from parsers.records import ParseConfig
from pipelines.definitions import build_definitions
from tests.dagster_settings import settings

N_SHARDS = settings().ingest_shards

N_DOCS = 12
VOLATILE = ["ingested_at"]  # the wall-clock time of the ingest, the only column allowed to differ


def _write_corpus(source: Path) -> None:
    source.mkdir(exist_ok=True)
    for i in range(N_DOCS):
        sections = "\n\n".join(
            f"## Section {j}\n\nDocument {i} explains topic {j}. It has a second sentence about {i * j} items."
            for j in range(3)
        )
        (source / f"doc-{i:02d}.md").write_text(f"# Document {i}\n\n{sections}\n")


def _table(read, version: str, key: list[str]) -> pl.DataFrame:
    return read(version).drop(VOLATILE).sort(key)


def _assert_same_version(sharded: CorpusStore, single: CorpusStore, version: str) -> None:
    assert _table(sharded.read_chunks, version, ["chunk_id"]).equals(_table(single.read_chunks, version, ["chunk_id"]))
    assert _table(sharded.read_documents, version, ["doc_id"]).equals(
        _table(single.read_documents, version, ["doc_id"])
    )
    a, b = sharded.manifest(version), single.manifest(version)
    assert (a.parent, a.corpus_hash, a.n_documents, a.n_chunks) == (b.parent, b.corpus_hash, b.n_documents, b.n_chunks)


def _stage_through_dagster(defs: dg.Definitions, instance: dg.DagsterInstance, version: str) -> list[dict]:
    """One stage run per shard partition, last shard first: a shard's output does not depend on order."""
    stage_job = defs.resolve_job_def("citekeeper_ingest_shard_stage")
    staged = []
    for shard in reversed(range(N_SHARDS)):
        key = dg.MultiPartitionKey({"corpus_version": version, "doc_shard": str(shard)})
        result = stage_job.execute_in_process(partition_key=key, instance=instance)
        assert result.success
        (materialization,) = result.asset_materializations_for_node("ingest_shard_stage")
        staged.append({k: v.value for k, v in materialization.metadata.items()})
    return staged


def _stage_side_by_side(source: Path, store: CorpusStore, version: str, parse_config: ParseConfig) -> list[dict]:
    """All shards at once in threads (Dagster's in-process executor is not thread-safe, its runs are
    separate processes or pods in deployment): staging takes no lock and writes disjoint directories."""
    with ThreadPoolExecutor(max_workers=N_SHARDS) as pool:
        results = list(
            pool.map(
                lambda i: stage(source, store, version, shard=Shard(i, N_SHARDS), config=parse_config), range(N_SHARDS)
            )
        )
    return [{"n_parsed": r.n_parsed, "n_reused": r.n_reused} for r in results]


def _commit(defs: dg.Definitions, instance: dg.DagsterInstance, version: str) -> None:
    job = defs.resolve_job_def("citekeeper_ingest_shard_commit")
    assert job.execute_in_process(partition_key=version, instance=instance).success


def test_sharded_ingest_equals_single_ingest(tmp_path: Path):
    source = tmp_path / "source"
    _write_corpus(source)
    config = settings(store_dir=str(tmp_path / "sharded"), source_dir=str(source))
    defs = build_definitions(config)
    sharded, single = CorpusStore(tmp_path / "sharded"), CorpusStore(tmp_path / "single")
    parse_config = config.ingest.parse_config()

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("corpus_version", ["v1", "v2"])
        staged = _stage_through_dagster(defs, instance, "v1")
        _commit(defs, instance, "v1")
        parsed_per_shard = [s["n_parsed"] for s in staged]
        assert sum(parsed_per_shard) == N_DOCS and max(parsed_per_shard) < N_DOCS  # the work was split
        ingest(source, single, version="v1", config=parse_config)
        _assert_same_version(sharded, single, "v1")

        (source / "doc-03.md").write_text("# Document 3\n\n## Section 0\n\nRewritten text for version two.\n")
        (source / "doc-07.md").unlink()
        staged = _stage_side_by_side(source, sharded, "v2", parse_config)
        _commit(defs, instance, "v2")
        assert sum(s["n_parsed"] for s in staged) == 1 and sum(s["n_reused"] for s in staged) == N_DOCS - 2
        ingest(source, single, version="v2", config=parse_config)
        _assert_same_version(sharded, single, "v2")

        # The regular pipeline's ingest of the same version finds it committed and lets downstream run.
        assert (
            defs.resolve_job_def("citekeeper_ingest").execute_in_process(partition_key="v2", instance=instance).success
        )
    assert [m.name for m in sharded.versions()] == ["v1", "v2"]
    assert not any((sharded.layout.staging_dir).glob("*/shard-*"))


def test_blocking_checks_stop_a_corrupted_shard_before_anything_downstream(tmp_path: Path):
    """A staged shard whose chunk text no longer matches its text_hash commits, but the pipeline's blocking
    chunk checks fail and no diff, citation status, report or verification runs for that version."""
    source = tmp_path / "source"
    _write_corpus(source)
    config = settings(store_dir=str(tmp_path / "store"), source_dir=str(source))
    defs = build_definitions(config)
    store = CorpusStore(tmp_path / "store")
    parse_config = config.ingest.parse_config()
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("corpus_version", ["v1"])
        _stage_side_by_side(source, store, "v1", parse_config)
        staged = next(
            p for p in store.layout.staging_dir.glob("v1/shard-*/chunks.parquet") if pl.read_parquet(p).height
        )
        chunks = pl.read_parquet(staged)
        chunks.with_columns(pl.col("text").str.replace("explains", "EXPLAINS")).write_parquet(staged)
        _commit(defs, instance, "v1")

        result = defs.resolve_job_def("citekeeper_pipeline").execute_in_process(
            partition_key="v1", instance=instance, raise_on_error=False
        )
        assert not result.success
        checks = {e.asset_check_key.name: e.passed for e in result.get_asset_check_evaluations()}
        assert checks["text_hash_matches_text"] is False
        downstream = ["chunk_diff", "citation_status", "stale_report", "verification"]
        assert not [k for k in downstream if result.asset_materializations_for_node(k)]
        started = {e.step_key for e in result.all_events if e.event_type_value == "STEP_START"}
        assert "ingested_corpus" in started and not started & set(downstream)
