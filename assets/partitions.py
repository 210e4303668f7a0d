"""Every citekeeper asset is partitioned by corpus version."""

import warnings

import dagster as dg

CORPUS_VERSIONS = "corpus_version"  # the dynamic partitions' name, as the instance stores them
corpus_versions = dg.DynamicPartitionsDefinition(name=CORPUS_VERSIONS)
# Partitioned asset checks are a Dagster preview feature; they are what lets a check judge one version.
warnings.filterwarnings(
    "ignore", message="Specifying a partitions_def on an AssetCheckSpec", category=dg.PreviewWarning
)
