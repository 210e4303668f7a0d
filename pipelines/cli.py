"""The `citekeeper` command line. Each group of subcommands lives in a module of its own."""
from __future__ import annotations

import click

from pipelines import cli_citations, cli_demo, cli_history, cli_ingest, cli_maintenance, cli_models, cli_verify


@click.group()
def main() -> None:
    """Keep the citations of a RAG / knowledge system honest while its corpus changes."""


for _module in (cli_ingest, cli_citations, cli_history, cli_verify, cli_demo, cli_models, cli_maintenance):
    for _command in _module.COMMANDS:
        main.add_command(_command)
