"""Every citekeeper asset is partitioned by corpus version."""
import dagster as dg

corpus_versions = dg.DynamicPartitionsDefinition(name="corpus_version")
