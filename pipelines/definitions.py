"""The one Definitions of the citekeeper code location, and the resources it builds from the settings."""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg

from assets import backfill, citations, corpus, sharding, verification
from assets.resources import AnswersResource, CitekeeperSettings, IngestResource, StoreResource, VerifierResource
from citekeeper.settings import read_settings, variable
from pipelines import automation

ASSET_MODULES = [corpus, citations, verification]


def build_definitions(settings: CitekeeperSettings) -> dg.Definitions:
    """Everything in the code location, built from one settings object (tests pass tmp dirs)."""
    sharded = sharding.sharded_ingest(settings.ingest_shards)
    assets = [*dg.load_assets_from_modules(ASSET_MODULES), *sharded.assets]
    return dg.Definitions(
        assets=verification.with_code_version(assets, settings.verifier),
        asset_checks=dg.load_asset_checks_from_modules(ASSET_MODULES),
        jobs=[*automation.jobs, backfill.backfill_job, *automation.sharded_jobs(sharded, settings.verify_shards)],
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


def settings_from_env(env: Mapping[str, str] | None = None) -> CitekeeperSettings:
    """The settings of the code location: the CITEKEEPER_* variables of `env` (default: this process's
    environment) read once, when it loads (citekeeper.settings); an unset or empty variable leaves the resource's
    own default. Paths and URIs stay dg.EnvVar (resolved by Dagster at run time, shown as such in the UI); the
    other values are validated here, so a bad setting fails the load."""
    read = read_settings(env)

    def path(field: str) -> dg.EnvVar | None:
        return dg.EnvVar(variable(field)) if getattr(read, field) is not None else None

    def given(**values) -> dict:
        return {name: list(v) if isinstance(v, tuple) else v for name, v in values.items() if v is not None}

    return CitekeeperSettings(
        store=StoreResource(
            **given(
                store_dir=path("store"),
                lance_uri=path("lance_uri"),
                parquet_uri=path("parquet_uri"),
                storage_options=read.storage_options,
                gc_keep_last=read.gc_keep_last,  # unset: the gc schedule skips
                gc_keep=read.gc_keep,
            )
        ),
        ingest=IngestResource(
            **given(
                source_dir=path("source"),
                source_url_template=read.source_url_template,
                authority_levels=read.authority_levels,
                source_fields_map=read.source_fields_map,
                source_defaults=read.source_defaults,
            )
        ),
        answers=AnswersResource(**given(answers_path=path("answers"), answers_format=read.answers_format)),
        verifier=VerifierResource(
            **given(
                nli_model=read.nli_model,
                nli_backend=read.nli_backend,
                nli_checker=read.nli_checker,
                nli_supported_label=read.nli_supported_label,
                nli_checker_version=read.nli_checker_version,
                nli_device=read.nli_device,
                nli_threads=read.nli_threads,
                language=read.language,
                embedding_model=read.embedding_model,
            )
        ),
        **given(ingest_shards=read.ingest_shards, verify_shards=read.verify_shards, executor=read.executor),
    )


defs = build_definitions(settings_from_env())
