"""Options shared by every citekeeper subcommand, and the settings a command reads from the environment."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from citekeeper.language import DEFAULT_LANGUAGE, LANGUAGES, language_setting
from citekeeper.outputs import DIRECTORY
from citekeeper.settings import DEFAULT_STORE, Settings, SettingsError, read_settings, variable
from citekeeper.store import DEFAULT_LOCK_TIMEOUT

if TYPE_CHECKING:
    from citekeeper.search_index import EmbeddingStore
    from citekeeper.store import CorpusStore

_SETTINGS = "citekeeper.settings"  # where a command keeps its settings: its context's meta


def cli_settings() -> Settings:
    """The running command's settings, read from the environment once, when it first needs one; a bad variable is
    a usage error naming it."""
    meta = click.get_current_context().meta
    if _SETTINGS not in meta:
        try:
            meta[_SETTINGS] = read_settings()
        except SettingsError as exc:
            raise click.UsageError(str(exc)) from None
    return meta[_SETTINGS]


def corpus_store(store_dir: Path | str) -> CorpusStore:
    """The store at `store_dir`, its tables where $CITEKEEPER_LANCE_URI & co put them."""
    from citekeeper.store import CorpusStore  # polars and pyarrow: keep the CLI's start fast

    return CorpusStore(store_dir, **cli_settings().store_locations())


def search_index(store: CorpusStore) -> EmbeddingStore:
    """The index re-anchoring searches in `store`, with $CITEKEEPER_EMBEDDING_MODEL for $CITEKEEPER_LANGUAGE."""
    from citekeeper.search_index import EmbeddingStore

    settings = cli_settings()
    return EmbeddingStore(store.root, model=settings.embedding_model, language=settings.language)


def store_option_defaulting_to(default: str, help: str):
    """`--store DIR`: the given directory, else $CITEKEEPER_STORE, else `default`."""
    return click.option(
        "--store",
        "store_dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=lambda: cli_settings().store or default,
        show_default=f"${variable('store')} or {default}",
        help=help,
    )


store_option = store_option_defaulting_to(
    DEFAULT_STORE,
    "Store directory (manifests, writer lock; LanceDB tables and Parquet exports unless "
    "$CITEKEEPER_LANCE_URI / $CITEKEEPER_PARQUET_URI put them in an object store).",
)


@contextmanager
def reading(store) -> Iterator[None]:
    """The command's reader lease on `store` (CorpusStore.reading) around the block: gc waits until it has read
    and written everything. A StoreError in it (a gc that outlasts the wait, a version gone) is its one error line."""
    from citekeeper.store import StoreError  # polars and pyarrow: keep the CLI's start fast

    try:
        with store.reading():
            yield
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None


include_internal_text_option = click.option(
    "--include-internal-text",
    is_flag=True,
    help="Write the text of internal_only chunks into the shared copy (withheld by default); the copy's "
    "metadata records that it holds raw internal text.",
)


def authority_levels_option(func):
    """--authority-levels L1,L2,... (else $CITEKEEPER_AUTHORITY_LEVELS, else citekeeper.sources' default), as a
    tuple, most authoritative first: what ingest checks documents against and verification ranks them by."""
    from citekeeper.sources import DEFAULT_AUTHORITY_LEVELS

    return click.option(
        "--authority-levels",
        "authority_levels",
        metavar="L1,L2,...",
        default=lambda: ",".join(cli_settings().authority_levels or DEFAULT_AUTHORITY_LEVELS),
        show_default=",".join(DEFAULT_AUTHORITY_LEVELS),
        callback=lambda ctx, param, value: tuple(v.strip() for v in value.split(",") if v.strip()),
        help=f"The authority vocabulary, most authoritative first (or ${variable('authority_levels')}).",
    )(func)


def language_option(help: str):
    """`--language auto|en|zh|multi`, else $CITEKEEPER_LANGUAGE, else auto: the command gets the checked setting."""
    return click.option(
        "--language",
        type=click.Choice(LANGUAGES, case_sensitive=False),
        default=None,
        show_default=f"${variable('language')} or {DEFAULT_LANGUAGE}",
        callback=lambda ctx, param, value: language_setting(value or cli_settings().language),
        help=help,
    )


class OutputPath(click.Path):
    """A path a command writes an output of `kind` to (citekeeper.outputs: FILE_KINDS or DIRECTORY); `kind` may
    be a function of the command's parameters (export: the table). OutputCommand checks it."""

    def __init__(self, kind: str | Callable[[dict], str]):
        directory = kind == DIRECTORY
        super().__init__(file_okay=not directory, dir_okay=directory, path_type=Path)
        self.kind = kind


force_option = click.option(
    "--force",
    is_flag=True,
    help="Replace an existing output file that is not an output of the same kind (never one inside the store).",
)


class OutputCommand(click.Command):
    """A command with OutputPath options: before it runs, each one given is checked against the store the command
    uses (its --store, else the default one) and --force, and refused with one line naming the path."""

    def invoke(self, ctx: click.Context):
        from citekeeper.outputs import OutputRefused, check_output

        store_dir = ctx.params.get("store_dir") or cli_settings().store or DEFAULT_STORE
        locations = corpus_store(store_dir).local_locations()
        for param in self.params:
            path = ctx.params.get(param.name)
            if isinstance(param.type, OutputPath) and path is not None:
                kind = param.type.kind(ctx.params) if callable(param.type.kind) else param.type.kind
                try:
                    check_output(path, kind, locations, ctx.params.get("force", False), param.opts[0])
                except OutputRefused as exc:
                    raise click.ClickException(str(exc)) from None
        return super().invoke(ctx)


def lock_timeout_option(waiting_for: str):
    """--lock-timeout: seconds to wait for `waiting_for` (the store's writer lock) before giving up."""
    return click.option(
        "--lock-timeout",
        type=float,
        default=DEFAULT_LOCK_TIMEOUT,
        show_default=True,
        help=f"Seconds to wait for {waiting_for} before giving up.",
    )
