"""Every citekeeper asset is partitioned by corpus version."""

import warnings

import dagster as dg

corpus_versions = dg.DynamicPartitionsDefinition(name="corpus_version")
# Partitioned asset checks are a Dagster preview feature; they are what lets a check judge one version.
warnings.filterwarnings(
    "ignore", message="Specifying a partitions_def on an AssetCheckSpec", category=dg.PreviewWarning
)
