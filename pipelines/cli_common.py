"""Options shared by every citekeeper subcommand."""
from __future__ import annotations

import os
from pathlib import Path

import click

DEFAULT_STORE = ".citekeeper/store"

store_option = click.option(
    "--store",
    "store_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=lambda: os.environ.get("CITEKEEPER_STORE", DEFAULT_STORE),
    show_default=f"$CITEKEEPER_STORE or {DEFAULT_STORE}",
    help="Store directory (manifests, writer lock; LanceDB tables and Parquet exports unless "
    "$CITEKEEPER_LANCE_URI / $CITEKEEPER_PARQUET_URI put them in an object store).",
)
