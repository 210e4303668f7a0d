"""citekeeper backfill: a corpus version per release tag of a git repository (parsers.backfill)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from citekeeper.store import StoreError
from citekeeper.text import printable
from pipelines.cli_common import corpus_store, lock_timeout_option, store_option
from pipelines.cli_ingest import given_parse_config, parse_setting_options

if TYPE_CHECKING:
    from parsers.backfill import BackfilledTag


@click.command("backfill")
@click.argument("repository", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--refs", required=True, help="Glob of the tags to make versions of, e.g. 'v*'.")
@lock_timeout_option("another ingest on the same store, for each tag")
@parse_setting_options
@store_option
def backfill_command(repository: Path, refs: str, lock_timeout: float, store_dir: Path, **settings: object) -> None:
    """A corpus version per tag of the git REPOSITORY (a clone or a bare repository) matching --refs, named after
    the tag, oldest commit first; documents a release did not change are reused. A tag whose version exists is
    skipped, so an interrupted backfill resumes where it stopped."""
    from parsers.backfill import iter_backfill  # imports unstructured: keep the CLI's start fast
    from parsers.sources.git import GitSourceError

    try:
        config = given_parse_config(settings)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        for done in iter_backfill(repository, corpus_store(store_dir), refs, config, lock_timeout=lock_timeout):
            click.echo(backfilled_line(done))
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    except GitSourceError as exc:  # no repository there, no tag matching
        raise click.UsageError(str(exc)) from None


def backfilled_line(done: BackfilledTag) -> str:
    """One tag's line: what became of its version, and the counts `citekeeper ingest` prints."""
    commit = done.tag.commit[:12]
    if done.result is None:
        return printable(f"{done.tag.name} ({commit}): corpus version exists already{_origin(done)}; skipped")
    result = done.result.shared()
    if result.created:
        manifest = result.manifest
        what = (
            f"created corpus version {manifest.name} (parent: {manifest.parent or 'none'}): "
            f"{manifest.n_documents} documents, {manifest.n_chunks} chunks"
        )
    else:
        what = f"tree unchanged: it equals corpus version {result.equals}; no new version created"
    counts = f"parsed {result.n_parsed}, reused {result.n_reused}, quarantined {result.n_quarantined}"
    return printable(f"{done.tag.name} ({commit}): {what}; {counts}")


def _origin(done: BackfilledTag) -> str:
    """Where an existing version came from, when not from the tag's commit (a folder, another repository)."""
    existing = done.existing
    if existing is None or existing.source_revision == done.tag.commit:
        return ""
    at = f" at {existing.source_revision[:12]}" if existing.source_revision else ""
    return f", made from {existing.source_dir or 'an unrecorded source'}{at}, not from this tag"


COMMANDS = [backfill_command]
