"""The `citekeeper` command line. Each group of subcommands lives in a module of its own (its COMMANDS), imported
when one of its commands runs or is listed: a command loads only what it needs (all of them: ~0.15 s more a run)."""

from __future__ import annotations

import atexit
import errno
import gc
import importlib

import click

# Each command's module, under pipelines. tests/test_cli_commands.py checks this against the modules' COMMANDS.
COMMAND_MODULES = {
    "ingest": "cli_ingest",
    "versions": "cli_ingest",
    "export": "cli_ingest",
    "backfill": "cli_backfill",
    "answers": "cli_citations",
    "diff": "cli_citations",
    "stale": "cli_citations",
    "repair": "cli_citations",
    "history": "cli_history",
    "verify": "cli_verify",
    "verify-merge": "cli_verify",
    "demo": "cli_demo",
    "models": "cli_models",
    "gc": "cli_maintenance",
}

# The interpreter's last garbage collections at exit walk every object the command loaded (spaCy and torch after a
# parse here, LanceDB, polars): ~1 s after a small reindex, for memory the OS takes back anyway. Frozen objects
# are skipped. Registered on import, it runs after the exit handlers registered later (the parse pool's, LanceDB's).
atexit.register(gc.freeze)


class _Commands(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMAND_MODULES:
            return None
        module = importlib.import_module(f"pipelines.{COMMAND_MODULES[cmd_name]}")
        return next(command for command in module.COMMANDS if command.name == cmd_name)

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
