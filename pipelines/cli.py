"""The `citekeeper` command line. Each group of subcommands lives in a module of its own."""

from __future__ import annotations

import atexit
import errno
import gc

import click

from pipelines import (
    cli_backfill,
    cli_citations,
    cli_demo,
    cli_history,
    cli_ingest,
    cli_maintenance,
    cli_models,
    cli_verify,
)

# The interpreter's last garbage collections at exit walk every object the command loaded (spaCy and torch after a
# parse here, LanceDB, polars): ~1 s after a small reindex, for memory the OS takes back anyway. Frozen objects
# are skipped. Registered on import, it runs after the exit handlers registered later (the parse pool's, LanceDB's).
atexit.register(gc.freeze)


class _Commands(click.Group):
    def invoke(self, ctx: click.Context):
        """A full disk is one line, not a traceback: the store's writes are atomic, so nothing half-written
        stays, and the same command runs again once there is room."""
        try:
            return super().invoke(ctx)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT) and "No space left on device" not in str(exc):
                raise
            where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
            raise click.ClickException(
                f"no space left on device{where}: nothing was committed; free some space and run the command again"
            ) from None


@click.group(cls=_Commands)
def main() -> None:
    """Keep the citations of a RAG / knowledge system honest while its corpus changes."""


for _module in (
    cli_ingest,
    cli_backfill,
    cli_citations,
    cli_history,
    cli_verify,
    cli_demo,
    cli_models,
    cli_maintenance,
):
    for _command in _module.COMMANDS:
        main.add_command(_command)
