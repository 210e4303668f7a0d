"""Ingest assets: documents and chunks of a corpus version."""
