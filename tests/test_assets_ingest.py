"""The ingest assets and their blocking checks, materialized by Dagster against a real store."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from assets import corpus as ingest_assets
from assets.partitions import corpus_versions
from citekeeper import schema
from citekeeper.store import STORED_SCHEMAS, CorpusStore
from citekeeper.tables import to_arrow
from tests.dagster_settings import settings

CHECKS = [ingest_assets.chunk_integrity_checks]


def materialize(
    instance: dg.DagsterInstance, source: Path, store_dir: Path, version: str, raise_on_error: bool = True
) -> dg.ExecuteInProcessResult:
    instance.add_dynamic_partitions(corpus_versions.name, [version])
    return dg.materialize(
        [ingest_assets.ingested_corpus, *CHECKS, downstream_of_chunks],
        instance=instance,
        partition_key=version,
        resources=settings(store_dir=str(store_dir), source_dir=str(source)).resources(),
        raise_on_error=raise_on_error,
    )


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    root.mkdir()
    for name in ("alpha", "beta", "gamma"):
        (root / f"{name}.md").write_text(f"# {name}\n\n## Usage\n\nHow to use {name}. It is simple.\n")
    (root / "empty.md").write_bytes(b"")
    return root


def test_materialize_ingest_assets_with_checks(source: Path, store_dir: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    result = materialize(instance, source, store_dir, "v1")

    store = CorpusStore(store_dir)
    assert [v.name for v in store.versions()] == ["v1"]
    chunks, documents = store.read_chunks("v1"), store.read_documents("v1")
    assert sorted(documents["doc_id"]) == ["alpha.md", "beta.md", "gamma.md"]
    assert chunks.height == store.manifest("v1").n_chunks > 0

    checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    assert checks == {"chunk_ids_unique": True, "text_hash_matches_text": True, "offsets_reproduce_text": True}
    by_key = {
        e.materialization.asset_key.path[-1]: e.materialization.metadata
        for e in result.get_asset_materialization_events()
    }
    assert by_key["documents"]["n_documents"].value == 3
    assert by_key["documents"]["n_quarantined"].value == 1
    assert "empty.md" in by_key["documents"]["quarantined"].value
    assert by_key["chunks"]["n_chunks"].value == chunks.height
    assert "downstream_of_chunks" in by_key  # the checks passed, so consumers ran

    (source / "delta.md").write_text("# delta\n\nNew.\n")
    materialize(instance, source, store_dir, "v2")
    assert store.manifest("v2").parent == "v1" and store.manifest("v2").n_reused == 3


def test_unchanged_tree_fails_the_new_partition(source: Path, store_dir: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    materialize(instance, source, store_dir, "v1")
    again = materialize(instance, source, store_dir, "v1")  # re-materializing the same version is idempotent
    assert again.success
    result = materialize(instance, source, store_dir, "v2", raise_on_error=False)
    assert not result.success
    assert [v.name for v in CorpusStore(store_dir).versions()] == ["v1"]


def test_checks_fail_on_a_version_with_broken_offsets(source: Path, store_dir: Path) -> None:
    instance = dg.DagsterInstance.ephemeral()
    materialize(instance, source, store_dir, "v1")
    store = CorpusStore(store_dir)
    alpha = pl.col("doc_id") == "alpha.md"
    chunks = store.read_chunks("v1").filter(alpha).with_columns(start_char=pl.col("start_char") + 1)
    with store.lock():  # a version written by a buggy writer: alpha's offsets are off by one
        store.commit_version(
            dataclasses.replace(store.manifest("v1"), name="broken", parent="v1"),
            replaced_doc_ids=["alpha.md"],
            chunks=to_arrow(chunks, STORED_SCHEMAS["chunks"]),
            documents=to_arrow(store.read_documents("v1").filter(alpha), STORED_SCHEMAS["documents"]),
            errors=to_arrow(store.read_errors("v1").head(0), schema.INGEST_ERRORS),
        )
    # the tree equals "broken" (same corpus hash), so the ingest step accepts it and the checks judge it
    result = materialize(instance, source, store_dir, "broken", raise_on_error=False)
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert not checks["offsets_reproduce_text"].passed
    assert checks["offsets_reproduce_text"].metadata["n_misplaced_chunks"].value == chunks.height
    misplaced = checks["offsets_reproduce_text"].metadata["misplaced_chunks"]
    assert [(c.name, c.type) for c in misplaced.schema.columns] == [
        ("chunk_id", "string"),
        ("doc_id", "string"),
        ("start_char", "int"),
        ("end_char", "int"),
    ]
    assert sorted(r.data["chunk_id"] for r in misplaced.records) == sorted(chunks["chunk_id"])
    assert {(r.data["doc_id"], r.data["start_char"]) for r in misplaced.records} == {
        ("alpha.md", s) for s in chunks["start_char"]
    }
    assert checks["chunk_ids_unique"].passed and checks["text_hash_matches_text"].passed
    no_duplicates = checks["chunk_ids_unique"].metadata["duplicate_chunk_ids"]  # a passing check: an empty table
    assert no_duplicates.records == [] and [c.name for c in no_duplicates.schema.columns] == ["chunk_id", "len"]
    # blocking: nothing downstream of the failed check ran
    materialized = {e.materialization.asset_key.path[-1] for e in result.get_asset_materialization_events()}
    assert materialized == {"documents", "chunks"}


@dg.asset(partitions_def=corpus_versions, deps=[ingest_assets.CHUNKS])
def downstream_of_chunks() -> None:
    """Stands for any consumer of the chunks (citations, verification)."""
