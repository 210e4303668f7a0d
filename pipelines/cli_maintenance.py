"""citekeeper gc: prune old corpus versions and compact the store (citekeeper.retention)."""

from __future__ import annotations

from pathlib import Path

import click

from citekeeper.store import StoreError
from pipelines.cli_common import corpus_store, lock_timeout_option, store_option


@click.command("gc")
@click.option(
    "--keep-last",
    "keep_last",
    type=click.IntRange(min=0),
    required=True,
    metavar="N",
    help="Keep the N newest corpus versions (the latest is always kept).",
)
@click.option(
    "--keep",
    "keep",
    multiple=True,
    metavar="VERSION",
    help="Also keep this version (repeatable). Versions a current answer revision cites are always kept.",
)
@click.option("--dry-run", is_flag=True, help="Change nothing; say what would be pruned and freed.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@lock_timeout_option("a running ingest (the store's writer lock)")
@store_option
def gc_command(
    keep_last: int, keep: tuple[str, ...], dry_run: bool, as_json: bool, lock_timeout: float, store_dir: Path
) -> None:
    """Prune corpus versions that are neither among the last N, named by --keep, nor cited by a current answer,
    with their exports, diffs, citation statuses, repairs and verification runs; then rewrite the kept versions'
    LanceDB data compactly and clean up the table versions no kept version needs. Kept versions stay readable by
    name."""
    from citekeeper.retention import gc  # imports the answer store and polars: keep the CLI's start fast

    store = corpus_store(store_dir)
    try:
        summary = gc(store, keep_last, keep, dry_run=dry_run, lock_timeout=lock_timeout)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(summary.to_json() if as_json else summary.text())


COMMANDS = [gc_command]
