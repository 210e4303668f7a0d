"""The one Definitions of the citekeeper code location."""
from __future__ import annotations

import os
from collections.abc import Mapping
from importlib.resources import files as package_files

import dagster as dg

from assets import citations, corpus, sharding, verification
from citekeeper.language import LANGUAGE_ENV
from citekeeper.locations import locations_from_env
from pipelines import automation
from assets.resources import CitekeeperConfig

ASSET_MODULES = [corpus, citations, verification, sharding]


def _executor() -> dg.ExecutorDefinition:
    """multiprocess locally; CITEKEEPER_EXECUTOR=k8s runs each step in its own pod (deploy/k8s/)."""
    if os.environ.get("CITEKEEPER_EXECUTOR") == "k8s":
        from dagster_k8s import k8s_job_executor  # the k8s extra: pip install .[k8s]

        return k8s_job_executor
    return dg.multiprocess_executor


def build_definitions(config: CitekeeperConfig) -> dg.Definitions:
    """Everything in the code location, bound to one store/source configuration (tests pass tmp dirs)."""
    return dg.Definitions(
        assets=verification.with_code_version(dg.load_assets_from_modules(ASSET_MODULES), config),
        asset_checks=dg.load_asset_checks_from_modules(ASSET_MODULES),
        jobs=automation.jobs,
        schedules=automation.schedules,
        sensors=automation.sensors,
        resources={"citekeeper": config},
        executor=_executor(),
    )


def config_from_env(env: Mapping[str, str] = os.environ) -> CitekeeperConfig:
    """The resource as the code location configures it from the environment (a bad setting fails the load)."""
    return CitekeeperConfig(
        store_dir=env.get("CITEKEEPER_STORE", ".citekeeper/store"),
        # default: the bundled sample corpus's v1, wherever the package is installed
        source_dir=env.get("CITEKEEPER_SOURCE", str(package_files("pipelines") / "sample_corpus" / "v1")),
        answers_path=env.get("CITEKEEPER_ANSWERS") or None,  # registered before each citation check
        answers_format=env.get("CITEKEEPER_ANSWERS_FORMAT") or None,  # --from of those answers
        nli_model=env.get("CITEKEEPER_NLI_MODEL") or None,  # "auto": the default model of the language
        nli_backend=env.get("CITEKEEPER_NLI_BACKEND", "torch"),
        nli_checker=env.get("CITEKEEPER_NLI_CHECKER") or None,  # nli | binary | seq2seq | causal-lm
        nli_supported_label=int(env["CITEKEEPER_NLI_SUPPORTED_LABEL"]) if env.get("CITEKEEPER_NLI_SUPPORTED_LABEL") else None,
        nli_device=env.get("CITEKEEPER_NLI_DEVICE", "auto"),  # auto | cpu | cuda | cuda:N
        nli_threads=int(env["CITEKEEPER_NLI_THREADS"]) if env.get("CITEKEEPER_NLI_THREADS") else None,
        language=env.get(LANGUAGE_ENV) or "auto",  # auto | en | zh | multi
        gc_keep_last=_gc_keep_last(env.get("CITEKEEPER_GC_KEEP_LAST", "")),  # unset: the gc schedule skips
        gc_keep=[v.strip() for v in env.get("CITEKEEPER_GC_KEEP", "").split(",") if v.strip()],
        **locations_from_env(env),  # CITEKEEPER_LANCE_URI, CITEKEEPER_PARQUET_URI, CITEKEEPER_STORAGE_OPTIONS
    )


def _gc_keep_last(raw: str) -> int | None:
    if not raw.strip():
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"CITEKEEPER_GC_KEEP_LAST must be a whole number of versions, got {raw!r}") from None


defs = build_definitions(config_from_env())
