"""Instance and deployment configs: valid for dagster-k8s, and every one of them keeps the one-writer rule."""

import dagster as dg
import pytest
import yaml

from assets.resources import STORE_WRITER_TAG
from tests.conftest import REPO

K8S = REPO / "deploy" / "k8s"


def test_k8s_run_launcher_and_executor_configs_are_valid():
    dagster_k8s = pytest.importorskip("dagster_k8s", reason="the k8s extra (pip install .[k8s]) is not installed")
    from dagster._config import process_config

    instance = yaml.safe_load((K8S / "dagster-instance.yaml").read_text())
    assert instance["run_launcher"]["class"] == "K8sRunLauncher"
    launcher = process_config(dagster_k8s.K8sRunLauncher.config_type(), instance["run_launcher"]["config"])
    assert launcher.success, launcher.errors
    executor = yaml.safe_load((K8S / "run-config-k8s-executor.yaml").read_text())["execution"]["config"]
    checked = process_config(dagster_k8s.k8s_job_executor.config_schema.config_type, executor)
    assert checked.success, checked.errors


def _writer_limits(instance_yaml: dict) -> list[dict]:
    """tag_concurrency_limits from either config style (run_coordinator config or concurrency.runs)."""
    runs = instance_yaml.get("concurrency", {}).get("runs") or instance_yaml.get("run_coordinator", {}).get(
        "config", {}
    )
    return [limit for limit in runs.get("tag_concurrency_limits", []) if limit["key"] == STORE_WRITER_TAG]


@pytest.mark.parametrize("path", ["dagster.yaml", "deploy/dagster-postgres.yaml", "deploy/k8s/dagster-instance.yaml"])
def test_every_instance_config_allows_one_store_writer_run_and_retries(path: str):
    instance = yaml.safe_load((REPO / path).read_text())
    assert [limit["limit"] for limit in _writer_limits(instance)] == [1]
    assert instance["run_retries"]["enabled"] is True  # the jobs' dagster/max_retries tag needs it


def test_store_writing_jobs_carry_the_writer_tag_and_pool():
    from pipelines.definitions import defs

    for name in ("citekeeper_pipeline", "citekeeper_ingest", "citekeeper_ingest_shard_commit"):
        assert defs.resolve_job_def(name).tags[STORE_WRITER_TAG] == "1", name
    assert STORE_WRITER_TAG not in defs.resolve_job_def("citekeeper_ingest_shard_stage").tags  # staging takes no lock
    graph = defs.resolve_asset_graph()
    for key in ("chunks", "ingest_shard_commit"):
        assert graph.get(dg.AssetKey(key)).pools == {"citekeeper_store_writer"}, key
