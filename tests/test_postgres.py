"""The production instance config (deploy/dagster-postgres.yaml) against a real PostgreSQL: runs, events
and dynamic partitions land in Postgres, the corpus version in the store. .ci/run starts the server."""

import os
import shutil
import uuid
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa

from citekeeper.store import CorpusStore
from pipelines.definitions import build_definitions
from tests.conftest import REPO, require_service
from tests.dagster_settings import settings

PG_URL = os.environ.get("CITEKEEPER_TEST_PG_URL")


@pytest.fixture
def postgres_instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    require_service(bool(PG_URL), "PostgreSQL (CITEKEEPER_TEST_PG_URL)")
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    shutil.copy(REPO / "deploy" / "dagster-postgres.yaml", dagster_home / "dagster.yaml")
    url = sa.engine.make_url(PG_URL)
    for name, value in {
        "HOST": url.host,
        "PORT": url.port,
        "DB": url.database,
        "USER": url.username,
        "PASSWORD": url.password or "unused-with-trust-auth",
    }.items():
        monkeypatch.setenv(f"DAGSTER_PG_{name}", str(value))
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        yield instance


def test_pipeline_with_postgres_run_and_event_storage(postgres_instance: dg.DagsterInstance, tmp_path: Path):
    source = tmp_path / "source"
    source.mkdir()
    (source / "guide.md").write_text("# Guide\n\nInstall the client with pip.\n")
    defs = build_definitions(settings(store_dir=str(tmp_path / "store"), source_dir=str(source)))
    version = f"pg-{uuid.uuid4().hex[:10]}"  # the database outlives one test run
    postgres_instance.add_dynamic_partitions("corpus_version", [version])

    result = defs.resolve_job_def("citekeeper_ingest").execute_in_process(
        partition_key=version, instance=postgres_instance
    )
    assert result.success
    assert type(postgres_instance.run_storage).__name__ == "PostgresRunStorage"
    assert type(postgres_instance.event_log_storage).__name__ == "PostgresEventLogStorage"

    engine = sa.create_engine(sa.engine.make_url(PG_URL).set(drivername="postgresql+psycopg2"))
    try:
        with engine.connect() as db:
            run_status = db.execute(sa.text("SELECT status FROM runs WHERE run_id = :r"), {"r": result.run_id}).scalar()
            materialized = db.execute(
                sa.text(
                    "SELECT count(*) FROM event_logs WHERE run_id = :r AND dagster_event_type = 'ASSET_MATERIALIZATION'"
                ),
                {"r": result.run_id},
            ).scalar()
            partitions = (
                db.execute(
                    sa.text("SELECT partition FROM dynamic_partitions WHERE partitions_def_name = 'corpus_version'")
                )
                .scalars()
                .all()
            )
    finally:
        engine.dispose()
    assert run_status == "SUCCESS"
    assert materialized == 2  # documents and chunks
    assert version in partitions

    store = CorpusStore(tmp_path / "store")
    chunks = store.read_export("chunks", version)  # the run's Parquet export
    assert chunks["text"].to_list() and (chunks["corpus_version"] == version).all()
    assert store.manifest(version).n_documents == 1
