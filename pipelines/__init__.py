"""Dagster Definitions, resources, schedules, sensors and the `citekeeper` CLI."""
