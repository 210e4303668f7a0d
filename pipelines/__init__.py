"""Dagster Definitions, resources, schedules, sensors and the `citekeeper` CLI.

Both entry points (pipelines.cli, pipelines.definitions) import this package first, so its environment
defaults apply before unstructured or transformers are imported.
"""
import os

os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
# Batch runs never download models on the fly (no surprise network waits or weights); HF_HUB_OFFLINE=0
# lets a hub id be fetched on first use.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
