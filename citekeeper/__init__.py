"""Core shared by every layer: table schemas and the versioned corpus store. Imports no Dagster."""
