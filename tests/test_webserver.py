"""The real dagster-webserver on a loopback port: the UI's GraphQL API lists every definition and
launches an ingest run for a new corpus-version partition, which writes Parquet."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from citekeeper.store import CorpusStore
from tests.conftest import REPO

STARTUP_TIMEOUT_S = 300
RUN_TIMEOUT_S = 400  # a subprocess per step on a loaded 2-core CI machine
SHUTDOWN_TIMEOUT_S = 30

DEFINITIONS_QUERY = """
{
  repositoriesOrError {
    ... on RepositoryConnection {
      nodes { name location { name } jobs { name } schedules { name } sensors { name } }
    }
    ... on PythonError { message }
  }
  assetNodes { assetKey { path } assetChecksOrError { ... on AssetChecks { checks { name } } } }
}
"""

ADD_PARTITION = """
mutation Add($repo: RepositorySelector!, $key: String!) {
  addDynamicPartition(repositorySelector: $repo, partitionsDefName: "corpus_version", partitionKey: $key) {
    __typename
    ... on PythonError { message }
  }
}
"""

LAUNCH_RUN = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message stack }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""

RUN_STATUS = """
query Status($runId: ID!) {
  runOrError(runId: $runId) { ... on Run { status } ... on PythonError { message } }
}
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Webserver:
    def __init__(self, port: int, process: subprocess.Popen, log_path: Path):
        self.port = port
        self.url = f"http://127.0.0.1:{port}/graphql"
        self.process = process
        self.log_path = log_path

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(self.url, body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            payload = json.load(response)
        assert "errors" not in payload, payload["errors"]
        return payload["data"]

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"dagster-webserver exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                urllib.request.urlopen(self.url.replace("/graphql", "/server_info"), timeout=5).read()
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(1)
        pytest.fail(f"dagster-webserver not ready after {STARTUP_TIMEOUT_S}s:\n{self.log_tail()}")

    def stop(self) -> int:
        """SIGTERM the whole process group (webserver + code server), bounded; SIGKILL as a last resort."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(SHUTDOWN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
                pytest.fail(f"dagster-webserver ignored SIGTERM for {SHUTDOWN_TIMEOUT_S}s")
        return self.process.returncode


@pytest.fixture
def webserver(tmp_path: Path, sample_source: Path):
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    # Runs launch straight away: no daemon runs here to dequeue the default QueuedRunCoordinator.
    (dagster_home / "dagster.yaml").write_text(
        "run_coordinator:\n  module: dagster._core.run_coordinator\n  class: DefaultRunCoordinator\n"
        "telemetry:\n  enabled: false\n"
    )
    env = {
        **os.environ,
        "DAGSTER_HOME": str(dagster_home),
        "CITEKEEPER_STORE": str(tmp_path / "store"),
        "CITEKEEPER_SOURCE": str(sample_source),
    }
    port = _free_port()
    log_path = tmp_path / "webserver.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "dagster-webserver"),
                "-m",
                "pipelines.definitions",
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Webserver(port, process, log_path)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture
def sample_source(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    source.mkdir()
    (source / "guide.md").write_text("# Guide\n\nInstall the client with pip.\n\n## Usage\n\nCall get() with a URL.\n")
    (source / "faq.md").write_text("# FAQ\n\nTimeouts default to five seconds.\n")
    return source


def _wait_for_run(server: Webserver, run_id: str) -> str:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    status = "UNKNOWN"
    while time.monotonic() < deadline:
        status = server.graphql(RUN_STATUS, {"runId": run_id})["runOrError"]["status"]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            return status
        time.sleep(1)
    pytest.fail(f"run {run_id} still {status} after {RUN_TIMEOUT_S}s:\n{server.log_tail()}")


def test_webserver_lists_definitions_and_launches_partitioned_ingest(webserver: Webserver, tmp_path: Path):
    from pipelines.definitions import defs

    data = webserver.graphql(DEFINITIONS_QUERY)
    (repository,) = data["repositoriesOrError"]["nodes"]
    asset_keys = {"/".join(node["assetKey"]["path"]) for node in data["assetNodes"]}
    check_names = {c["name"] for node in data["assetNodes"] for c in node["assetChecksOrError"].get("checks", [])}
    repo_def = defs.get_repository_def()
    assert asset_keys == {key.to_user_string() for key in repo_def.asset_graph.get_all_asset_keys()}
    assert check_names == {key.name for key in repo_def.asset_graph.asset_check_keys}
    assert {s["name"] for s in repository["schedules"]} == {"nightly_reindex_schedule", "weekly_gc_schedule"}
    assert {s["name"] for s in repository["sensors"]} == {"source_change_sensor"}
    assert {"citekeeper_pipeline", "citekeeper_ingest"} <= {j["name"] for j in repository["jobs"]}

    selector = {"repositoryLocationName": repository["location"]["name"], "repositoryName": repository["name"]}
    added = webserver.graphql(ADD_PARTITION, {"repo": selector, "key": "ui-v1"})["addDynamicPartition"]
    assert added["__typename"] == "AddDynamicPartitionSuccess", added
    launched = webserver.graphql(
        LAUNCH_RUN,
        {
            "params": {
                "selector": {**selector, "jobName": "citekeeper_ingest"},
                "runConfigData": {},
                "executionMetadata": {"tags": [{"key": "dagster/partition", "value": "ui-v1"}]},
            }
        },
    )["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    assert _wait_for_run(webserver, launched["run"]["runId"]) == "SUCCESS", webserver.log_tail()

    store = CorpusStore(tmp_path / "store")
    assert [m.name for m in store.versions()] == ["ui-v1"]
    chunks = store.read_export("chunks", "ui-v1")  # the run's Parquet export
    assert set(chunks["source_path"]) == {"guide.md", "faq.md"}
    assert (chunks["corpus_version"] == "ui-v1").all()

    assert webserver.stop() == 0  # SIGTERM handled: a clean exit, not a kill
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", webserver.port), timeout=5)
