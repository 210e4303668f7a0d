"""The product's packages, lowest layer first: imports run from each to those before it only."""

LAYERS = ("citekeeper", "parsers", "changes", "verifiers", "reports", "assets", "pipelines")
DAGSTER_FREE = frozenset(LAYERS[: LAYERS.index("assets")])
