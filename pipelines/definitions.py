"""The one Definitions of the citekeeper code location."""
from __future__ import annotations

import os

import dagster as dg

from assets import citations, ingest, sharding, verification
from citekeeper.locations import locations_from_env
from pipelines import automation
from pipelines.resources import CitekeeperConfig

ASSET_MODULES = [ingest, citations, verification, sharding]


def _executor() -> dg.ExecutorDefinition:
    """multiprocess locally; CITEKEEPER_EXECUTOR=k8s runs each step in its own pod (deploy/k8s/)."""
    if os.environ.get("CITEKEEPER_EXECUTOR") == "k8s":
        from dagster_k8s import k8s_job_executor  # the k8s extra: pip install .[k8s]

        return k8s_job_executor
    return dg.multiprocess_executor


def build_definitions(config: CitekeeperConfig) -> dg.Definitions:
    """Everything in the code location, bound to one store/source configuration (tests pass tmp dirs)."""
    return dg.Definitions(
        assets=dg.load_assets_from_modules(ASSET_MODULES),
        asset_checks=dg.load_asset_checks_from_modules(ASSET_MODULES),
        jobs=automation.jobs,
        schedules=automation.schedules,
        sensors=automation.sensors,
        resources={"citekeeper": config},
        executor=_executor(),
    )


defs = build_definitions(
    CitekeeperConfig(
        store_dir=os.environ.get("CITEKEEPER_STORE", ".citekeeper/store"),
        source_dir=os.environ.get("CITEKEEPER_SOURCE", "sample_corpus/v1"),
        answers_path=os.environ.get("CITEKEEPER_ANSWERS") or None,  # registered before each citation check
        nli_model=os.environ.get("CITEKEEPER_NLI_MODEL") or None,
        nli_backend=os.environ.get("CITEKEEPER_NLI_BACKEND", "torch"),
        **locations_from_env(),  # CITEKEEPER_LANCE_URI, CITEKEEPER_PARQUET_URI, CITEKEEPER_STORAGE_OPTIONS
    )
)
