"""citekeeper history."""

from __future__ import annotations

import json
from pathlib import Path

import click

from pipelines.cli_common import corpus_store, store_option


@click.command("history")
@click.argument("answer_id")
@click.option("--json", "as_json", is_flag=True, help="Print the history as one JSON document.")
@store_option
def history_command(answer_id: str, as_json: bool, store_dir: Path) -> None:
    """Show ANSWER_ID's history: per claim and corpus version since the one it cites, its citation statuses,
    its verification status, and the document change (or new revision) behind each transition.

    Statuses come from the stored `stale` outputs where they exist and are judged here where they do not
    (nothing is written but cached diffs).
    """
    from changes.history import answer_history, shared_history
    from citekeeper.answers.store import UnknownAnswer
    from citekeeper.store import StoreError
    from reports.history import format_history

    try:
        store = corpus_store(store_dir)
        history = shared_history(answer_history(store, [answer_id]), store)
    except (UnknownAnswer, StoreError) as exc:
        raise click.ClickException(str(exc)) from None
    (document,) = history.documents()
    click.echo(json.dumps(document, indent=2, ensure_ascii=False) if as_json else format_history(document))


COMMANDS: list = [history_command]
