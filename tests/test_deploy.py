"""deploy/k8s/ configs validate against dagster-k8s's own config schemas (the `k8s` extra)."""
import yaml
import pytest

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
