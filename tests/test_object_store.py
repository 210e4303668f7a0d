"""LanceDB tables and Parquet exports in an S3 bucket: a real S3-compatible HTTP server (moto) on loopback.

The same corpus ingested into a local store is the reference: the bucket-backed store must read back the
same chunks and documents for every version, and leave only manifests (and the lock) under its root.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import dagster as dg
import polars as pl
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from assets import corpus as ingest_assets
from assets.partitions import corpus_versions
from citekeeper.locations import parquet_filesystem
from citekeeper.settings import read_settings
from citekeeper.store import STORED_SCHEMAS, CorpusStore, UnknownVersion
from parsers.ingest import ingest
from pipelines.cli import main
from tests.conftest import SAMPLE_CORPUS
from tests.dagster_settings import settings
from tests.s3_server import moto_server, s3_client, storage_options

BUCKET = "citekeeper-test"
VERSIONS = ("v1", "v2")


@pytest.fixture(scope="module")
def endpoint():
    with moto_server(BUCKET) as url:
        yield url


@pytest.fixture
def locations(endpoint: str) -> dict:
    """A fresh prefix in the bucket per test; credentials passed as storage options, not taken from env."""
    prefix = f"s3://{BUCKET}/{uuid.uuid4().hex}"
    options = storage_options(endpoint)
    return {"lance_uri": f"{prefix}/lance", "parquet_uri": f"{prefix}/parquet", "storage_options": options}


@pytest.fixture(scope="module")
def local_reference(tmp_path_factory) -> CorpusStore:
    store = CorpusStore(tmp_path_factory.mktemp("local") / "store")
    for version in VERSIONS:
        ingest(SAMPLE_CORPUS / version, store, version=version)
    return store


def bucket_keys(endpoint: str, uri: str) -> list[str]:
    prefix = uri.removeprefix(f"s3://{BUCKET}/") + "/"
    pages = s3_client(endpoint).get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return sorted(item["Key"].removeprefix(prefix) for page in pages for item in page.get("Contents", []))


def comparable(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.drop("ingested_at")  # the only column that depends on when a store ingested


def assert_nothing_big_under(root: Path) -> None:
    """Manifests, lock, the (emptied) staging area and discovery's cache of what it read of each document (a row
    of hashes per document, under cache/) only: no LanceDB or Parquet data on the local root."""
    assert not (root / "lance").exists() and not (root / "parquet").exists()
    cache = root / "cache"
    data = [p for p in root.rglob("*") if p.suffix in (".lance", ".parquet") and not p.is_relative_to(cache)]
    assert data == []
    assert sorted(p.name for p in (root / "versions").iterdir()) == [f"{v}.json" for v in VERSIONS]


def test_cli_ingest_and_export_against_s3(endpoint, locations, local_reference, tmp_path, monkeypatch) -> None:
    root = tmp_path / "store"
    env = {
        "CITEKEEPER_LANCE_URI": locations["lance_uri"],
        "CITEKEEPER_PARQUET_URI": locations["parquet_uri"],
        "CITEKEEPER_STORAGE_OPTIONS": json.dumps(locations["storage_options"]),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    runner = CliRunner()
    for version in VERSIONS:
        result = runner.invoke(
            main, ["ingest", str(SAMPLE_CORPUS / version), "--store", str(root), "--version", version]
        )
        assert result.exit_code == 0, result.output
        assert f"created corpus version {version}" in result.output

    # A fresh store object, configured only by the environment: time travel by version name.
    store = CorpusStore(root, **read_settings().store_locations())
    assert (store.lance_uri, store.parquet_uri) == (locations["lance_uri"], locations["parquet_uri"])
    for version in VERSIONS:
        for read in ("read_chunks", "read_documents"):
            got, want = getattr(store, read)(version), getattr(local_reference, read)(version)
            assert comparable(got).equals(comparable(want)), f"{read}({version}) differs from the local store"
    assert set(store.read_documents("v2")["doc_id"]) - set(store.read_documents("v1")["doc_id"])  # v2 adds docs

    # Parquet exports are objects in the bucket, with the citekeeper schemas: chunks and documents of the latest
    # version, errors of every version (the older version's chunks are read from LanceDB time travel). A key ending
    # in "/" is the empty folder marker pyarrow's S3 filesystem leaves when it deletes the older export.
    keys = [k for k in bucket_keys(endpoint, locations["parquet_uri"]) if not k.endswith("/")]
    assert keys == sorted(
        [f"{t}/corpus_version={VERSIONS[-1]}/part-00000.parquet" for t in ("chunks", "documents")]
        + [f"errors/corpus_version={v}/errors.parquet" for v in VERSIONS]
    )
    part = store.export_folder("chunks", VERSIONS[-1]).file("part-00000.parquet")
    filesystem, path = parquet_filesystem(part, store.storage_options)
    assert pq.read_schema(path, filesystem=filesystem).equals(STORED_SCHEMAS["chunks"])
    for version in VERSIONS:
        exported = store.read_export("chunks", version)
        assert exported.sort("chunk_id").equals(store.read_chunks(version).sort("chunk_id"))
    assert store.exported_versions("chunks") == {VERSIONS[-1]} and store.exported_versions("errors") == set(VERSIONS)
    lance_keys = bucket_keys(endpoint, locations["lance_uri"])
    assert any(k.startswith("chunks.lance/_refs/tags/v1") for k in lance_keys)
    assert any(k.startswith("documents.lance/data/") for k in lance_keys)

    out = tmp_path / "v1_chunks.parquet"
    exported = runner.invoke(
        main,
        ["export", "chunks", "--version", "v1", "--out", str(out), "--store", str(root), "--include-internal-text"],
    )
    assert exported.exit_code == 0, exported.output
    assert pl.read_parquet(out).sort("chunk_id").equals(store.read_chunks("v1").sort("chunk_id"))
    listed = runner.invoke(main, ["versions", "--store", str(root)])
    assert "v1" in listed.output and "v2" in listed.output

    assert_nothing_big_under(root)


def test_dagster_ingest_asset_writes_to_s3(endpoint, locations, local_reference, tmp_path) -> None:
    root = tmp_path / "store"
    config = settings(store_dir=str(root), source_dir=str(SAMPLE_CORPUS / "v1"), **locations)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(corpus_versions.name, ["v1"])
    result = dg.materialize(
        [ingest_assets.ingested_corpus, ingest_assets.chunk_integrity_checks],
        instance=instance,
        partition_key="v1",
        resources=config.resources(),
    )
    assert all(c.passed for c in result.get_asset_check_evaluations())
    store = config.store.corpus_store()
    assert comparable(store.read_chunks("v1")).equals(comparable(local_reference.read_chunks("v1")))
    assert "chunks/corpus_version=v1/part-00000.parquet" in bucket_keys(endpoint, locations["parquet_uri"])
    assert not (root / "lance").exists() and not (root / "parquet").exists()
    with pytest.raises(UnknownVersion, match="known: v1"):
        store.read_export("errors", "v2")


def test_demo_pipeline_on_s3_matches_local(endpoint, locations, tmp_path, monkeypatch) -> None:
    """The whole Dagster pipeline (ingest, diff, citation status, re-verification) reads the corpus from the
    bucket and produces exactly what it produces on a local store."""
    from tests.test_demo import _results

    runner = CliRunner()
    local = runner.invoke(main, ["demo", "--store", str(tmp_path / "local"), "--no-model"])
    assert local.exit_code == 0, local.output
    monkeypatch.setenv("CITEKEEPER_LANCE_URI", locations["lance_uri"])
    monkeypatch.setenv("CITEKEEPER_PARQUET_URI", locations["parquet_uri"])
    monkeypatch.setenv("CITEKEEPER_STORAGE_OPTIONS", json.dumps(locations["storage_options"]))
    remote = runner.invoke(main, ["demo", "--store", str(tmp_path / "s3"), "--no-model"])
    assert remote.exit_code == 0, remote.output
    assert f"{locations['parquet_uri']}/chunks/corpus_version=v2/part-*.parquet" in remote.output

    expected, got = _results(tmp_path / "local"), _results(tmp_path / "s3")
    for name, frame in expected.items():
        assert got[name].equals(frame), name
    assert not (tmp_path / "s3" / "lance").exists() and not (tmp_path / "s3" / "parquet").exists()


def test_gc_against_s3(locations, endpoint, tmp_path) -> None:
    """gc on a store whose LanceDB tables and Parquet exports are in the bucket: the pruned version's objects go,
    the kept versions read back the same, and the freed bytes count the bucket."""
    from citekeeper.retention import gc

    store = CorpusStore(tmp_path / "store", **locations)
    for version, tree in (("v1", "v1"), ("v2", "v2"), ("v3", "v1")):
        ingest(SAMPLE_CORPUS / tree, store, version=version)
    before = {v: (store.read_chunks(v), store.read_documents(v)) for v in ("v2", "v3")}
    assert "errors/corpus_version=v1/errors.parquet" in bucket_keys(endpoint, locations["parquet_uri"])

    summary = gc(store, keep_last=2)
    assert summary.pruned == ["v1"] and list(summary.kept) == ["v2", "v3"]
    for version, (chunks, documents) in before.items():
        assert store.read_chunks(version).equals(chunks) and store.read_documents(version).equals(documents)
    assert [k for k in bucket_keys(endpoint, locations["parquet_uri"]) if not k.endswith("/")] == sorted(
        [f"{t}/corpus_version=v3/part-00000.parquet" for t in ("chunks", "documents")]
        + [f"errors/corpus_version={v}/errors.parquet" for v in ("v2", "v3")]
    )
    lance_keys = bucket_keys(endpoint, locations["lance_uri"])
    assert not any(k.startswith("chunks.lance/_refs/tags/v1") for k in lance_keys)
    assert summary.bytes_before > summary.bytes_after > 0 and summary.lance_rewritten
    assert not (store.root / "lance").exists() and not (store.root / "parquet").exists()


def test_a_commit_copies_the_unchanged_export_parts_inside_the_bucket(locations, endpoint, tmp_path) -> None:
    """Parts of one document each: v2 rewrites the parts of what changed and has the bucket copy the others; the
    export reads back as the version's rows, and only v2's parts remain."""
    store = CorpusStore(tmp_path / "store", docs_per_part=1, **locations)
    for version in ("v1", "v2"):
        ingest(SAMPLE_CORPUS / version, store, version=version)
    layout = store.export_folder("chunks", "v2").layout()
    assert layout is not None and len(layout.lows) == store.manifest("v2").n_documents > 2
    for table, read in (("chunks", store.read_chunks), ("documents", store.read_documents)):
        assert store.read_export(table, "v2").equals(read("v2")), table
    keys = [k for k in bucket_keys(endpoint, locations["parquet_uri"]) if not k.endswith("/")]
    assert [k for k in keys if k.startswith("chunks/")] == [
        f"chunks/corpus_version=v2/part-{i:05d}.parquet" for i in range(len(layout.lows))
    ]
