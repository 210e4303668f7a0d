"""The `citekeeper` command line. Each group of subcommands lives in a module of its own."""
from __future__ import annotations

import os

os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
# Batch runs never download models on the fly (no surprise network waits or weights); HF_HUB_OFFLINE=0
# lets a hub id be fetched on first use.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import click  # noqa: E402

from pipelines import cli_citations, cli_demo, cli_ingest, cli_verify  # noqa: E402


@click.group()
def main() -> None:
    """Keep the citations of a RAG / knowledge system honest while its corpus changes."""


for _module in (cli_ingest, cli_citations, cli_verify, cli_demo):
    for _command in _module.COMMANDS:
        main.add_command(_command)
