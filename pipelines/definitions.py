"""The one Definitions of the citekeeper code location, and the settings it reads from the environment."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from importlib.resources import files as package_files

import dagster as dg

from assets import citations, corpus, sharding, verification
from assets.resources import AnswersResource, CitekeeperSettings, IngestResource, StoreResource, VerifierResource
from citekeeper.language import LANGUAGE_ENV
from citekeeper.locations import LANCE_URI_ENV, PARQUET_URI_ENV, locations_from_env
from citekeeper.sources import AUTHORITY_LEVELS_ENV
from pipelines import automation

ASSET_MODULES = [corpus, citations, verification]


def build_definitions(settings: CitekeeperSettings) -> dg.Definitions:
    """Everything in the code location, built from one settings object (tests pass tmp dirs)."""
    sharded = sharding.sharded_ingest(settings.ingest_shards)
    assets = [*dg.load_assets_from_modules(ASSET_MODULES), *sharded.assets]
    return dg.Definitions(
        assets=verification.with_code_version(assets, settings.verifier),
        asset_checks=dg.load_asset_checks_from_modules(ASSET_MODULES),
        jobs=[*automation.jobs, *automation.sharded_jobs(sharded, settings.verify_shards)],
        schedules=automation.schedules,
        sensors=automation.sensors,
        resources=settings.resources(),
        executor=_executor(settings.executor),
    )


def _executor(name: str) -> dg.ExecutorDefinition:
    """multiprocess locally; k8s runs each step in its own pod (deploy/k8s/)."""
    if name == "k8s":
        from dagster_k8s import k8s_job_executor  # the k8s extra: pip install .[k8s]

        return k8s_job_executor
    return dg.multiprocess_executor


def settings_from_env(env: Mapping[str, str] = os.environ) -> CitekeeperSettings:
    """The settings as the code location reads them from the environment, once, when it loads; an unset or
    empty variable leaves the resource's own default. Paths and URIs stay dg.EnvVar (resolved by Dagster at run
    time, shown as such in the UI); the other values are validated here, so a bad setting fails the load."""

    def path(name: str) -> dg.EnvVar | None:
        return dg.EnvVar(name) if env.get(name) else None

    def text(name: str) -> str | None:
        return env.get(name) or None

    def number(name: str) -> int | None:
        raw = env.get(name, "").strip()
        try:
            return int(raw) if raw else None
        except ValueError:
            raise ValueError(f"{name} must be a whole number, got {raw!r}") from None

    def names(name: str) -> list[str] | None:
        listed = [v.strip() for v in env.get(name, "").split(",") if v.strip()]
        return listed or None

    def json_value(name: str) -> object | None:
        raw = env.get(name, "").strip()
        try:
            return json.loads(raw) if raw else None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{name} must be JSON: {exc}") from None

    def given(**values) -> dict:
        return {name: value for name, value in values.items() if value is not None}

    return CitekeeperSettings(
        store=StoreResource(
            **given(
                store_dir=path("CITEKEEPER_STORE"),
                lance_uri=path(LANCE_URI_ENV),
                parquet_uri=path(PARQUET_URI_ENV),
                gc_keep_last=number("CITEKEEPER_GC_KEEP_LAST"),
            ),  # gc_keep_last unset: the gc schedule skips
            storage_options=locations_from_env(env)["storage_options"],  # CITEKEEPER_STORAGE_OPTIONS (JSON)
            gc_keep=[v.strip() for v in env.get("CITEKEEPER_GC_KEEP", "").split(",") if v.strip()],
        ),
        # default: the bundled sample corpus's v1, wherever the package is installed
        ingest=IngestResource(
            source_dir=path("CITEKEEPER_SOURCE") or str(package_files("pipelines") / "sample_corpus" / "v1"),
            **given(
                source_url_template=text("CITEKEEPER_SOURCE_URL_TEMPLATE"),  # "https://site/{path_without_ext}/"
                authority_levels=names(AUTHORITY_LEVELS_ENV),  # comma-separated, most authoritative first
                source_fields_map=json_value("CITEKEEPER_SOURCE_FIELDS_MAP"),  # {"updated_at": ["modified"]}
                source_defaults=json_value("CITEKEEPER_SOURCE_DEFAULTS"),
            ),  # [["api/**", "authority", "official_spec"]]
        ),
        answers=AnswersResource(
            **given(
                answers_path=path("CITEKEEPER_ANSWERS"),  # registered before each citation check
                answers_format=text("CITEKEEPER_ANSWERS_FORMAT"),  # --from of those answers
            )
        ),
        verifier=VerifierResource(
            **given(
                nli_model=text("CITEKEEPER_NLI_MODEL"),  # "auto": the default model of the language
                nli_backend=text("CITEKEEPER_NLI_BACKEND"),
                nli_checker=text("CITEKEEPER_NLI_CHECKER"),  # nli | binary | seq2seq | causal-lm
                nli_supported_label=number("CITEKEEPER_NLI_SUPPORTED_LABEL"),
                nli_device=text("CITEKEEPER_NLI_DEVICE"),  # auto | cpu | cuda | cuda:N
                nli_threads=number("CITEKEEPER_NLI_THREADS"),
                language=text(LANGUAGE_ENV),  # auto | en | zh | multi
            )
        ),
        **given(
            ingest_shards=number("CITEKEEPER_INGEST_SHARDS"),
            verify_shards=number("CITEKEEPER_VERIFY_SHARDS"),
            executor=text("CITEKEEPER_EXECUTOR"),
        ),
    )


defs = build_definitions(settings_from_env())
