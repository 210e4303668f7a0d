"""The one Definitions of the citekeeper code location."""
from __future__ import annotations

import os

os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")

import dagster as dg  # noqa: E402

from assets import citations, ingest, verification  # noqa: E402
from pipelines import automation  # noqa: E402
from pipelines.resources import CitekeeperConfig  # noqa: E402

ASSET_MODULES = [ingest, citations, verification]

defs = dg.Definitions(
    assets=dg.load_assets_from_modules(ASSET_MODULES),
    asset_checks=dg.load_asset_checks_from_modules(ASSET_MODULES),
    jobs=automation.jobs,
    schedules=automation.schedules,
    sensors=automation.sensors,
    resources={
        "citekeeper": CitekeeperConfig(
            store_dir=os.environ.get("CITEKEEPER_STORE", ".citekeeper/store"),
            source_dir=os.environ.get("CITEKEEPER_SOURCE", "sample_corpus/v1"),
        )
    },
)
