"""The one test that loads the Definitions: the code location `dagster dev` would load, and dagster.yaml."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.instance.ref import InstanceRef

from tests.conftest import REPO


def test_code_location_loads_with_the_repo_instance_config(tmp_path: Path) -> None:
    # What `dagster dev` does from the repo root: [tool.dagster] names the module, and with DAGSTER_HOME
    # unset the instance is configured by ./dagster.yaml. Run from a tmp copy of those two files, so the
    # instance's relative storage (.dagster_home/, .tmp_dagster_home_*) lands under tmp, not in the repo.
    for name in ("pyproject.toml", "dagster.yaml"):
        shutil.copy(REPO / name, tmp_path / name)
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    dagster_cli = Path(sys.executable).parent / "dagster"
    validated = subprocess.run(
        [str(dagster_cli), "definitions", "validate"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "Validation successful for code location citekeeper" in validated.stderr + validated.stdout

    from pipelines.definitions import defs

    graph = defs.resolve_asset_graph()
    assert {dg.AssetKey("documents"), dg.AssetKey("chunks")} <= set(graph.get_all_asset_keys())
    assert {k.name for k in graph.asset_check_keys if k.asset_key == dg.AssetKey("chunks")} >= {
        "chunk_ids_unique",
        "text_hash_matches_text",
        "offsets_reproduce_text",
    }
    ingest_node = graph.get(dg.AssetKey("chunks")).assets_def.node_def
    assert ingest_node.pool == "citekeeper_store_writer"
    assert set(defs.resources) == {"store", "ingest", "answers", "verifier"}

    from pipelines.definitions import build_definitions
    from tests.dagster_settings import settings

    def verification_code_version(config) -> str:
        graph = build_definitions(config).resolve_asset_graph()
        return graph.get(dg.AssetKey("verification")).code_version

    default = verification_code_version(settings())
    assert verification_code_version(settings(language="zh")) != default  # from the definitions' own config
    assert verification_code_version(settings(nli_model="auto", nli_checker="binary")) != default
    assert verification_code_version(settings(store_dir="/elsewhere")) == default  # not a verdict setting

    # The shard counts are the settings' own: they shape the partitions and the sharded jobs' steps.
    shaped = build_definitions(settings(ingest_shards=3, verify_shards=5))
    stage = shaped.resolve_job_def("citekeeper_ingest_sharded")
    assert sorted(node.name for node in stage.nodes if node.name.startswith("stage_doc_shard_")) == [
        f"stage_doc_shard_{i}" for i in range(3)
    ]
    assert (
        len([n for n in shaped.resolve_job_def("citekeeper_verify_sharded").nodes if n.name.startswith("verify_")]) == 5
    )
    partitions = shaped.resolve_assets_def("ingest_shard_stage").partitions_def
    assert [d.partitions_def.get_partition_keys() for d in partitions.partitions_defs if d.name == "doc_shard"] == [
        ["0", "1", "2"]
    ]


def test_dagster_yaml_limits_store_writers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # dagster.yaml's storage paths are relative to the working directory
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path), config_dir=str(REPO))) as instance:
        config = instance.get_concurrency_config()
        assert config.pool_config.default_pool_limit == 1
        assert {"key": "citekeeper/store-writer", "limit": 1} in config.run_queue_config.tag_concurrency_limits
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
