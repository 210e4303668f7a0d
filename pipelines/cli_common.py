"""Options shared by every citekeeper subcommand."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from citekeeper.language import LANGUAGE_ENV, LANGUAGES, LanguageError, language_setting
from citekeeper.outputs import DIRECTORY

STORE_ENV = "CITEKEEPER_STORE"
DEFAULT_STORE = ".citekeeper/store"


def store_option_defaulting_to(default: str, help: str):
    """`--store DIR`: the given directory, else $CITEKEEPER_STORE, else `default`."""
    return click.option(
        "--store",
        "store_dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=lambda: os.environ.get(STORE_ENV) or default,
        show_default=f"${STORE_ENV} or {default}",
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
    from citekeeper.sources import AUTHORITY_LEVELS_ENV, DEFAULT_AUTHORITY_LEVELS

    return click.option(
        "--authority-levels",
        "authority_levels",
        envvar=AUTHORITY_LEVELS_ENV,
        metavar="L1,L2,...",
        default=",".join(DEFAULT_AUTHORITY_LEVELS),
        show_default=True,
        callback=lambda ctx, param, value: tuple(v.strip() for v in value.split(",") if v.strip()),
        help=f"The authority vocabulary, most authoritative first (or ${AUTHORITY_LEVELS_ENV}).",
    )(func)


def language_option(help: str):
    """`--language auto|en|zh|multi`, else $CITEKEEPER_LANGUAGE, else auto: the command gets the checked setting."""
    return click.option(
        "--language",
        type=click.Choice(LANGUAGES, case_sensitive=False),
        default=None,
        show_default=f"${LANGUAGE_ENV} or auto",
        callback=_checked_language,
        help=help,
    )


def _checked_language(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    try:
        return language_setting(value)
    except LanguageError as exc:  # only $CITEKEEPER_LANGUAGE can be bad: click checks --language
        raise click.UsageError(f"${LANGUAGE_ENV}: {exc}") from exc


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
        from citekeeper.locations import LocationError  # polars and pyarrow: keep the CLI's start fast
        from citekeeper.outputs import OutputRefused, check_output
        from citekeeper.store import CorpusStore

        store_dir = ctx.params.get("store_dir") or os.environ.get(STORE_ENV) or DEFAULT_STORE
        try:
            locations = CorpusStore.from_env(store_dir).local_locations()
        except LocationError as exc:
            raise click.ClickException(str(exc)) from None
        for param in self.params:
            path = ctx.params.get(param.name)
            if isinstance(param.type, OutputPath) and path is not None:
                kind = param.type.kind(ctx.params) if callable(param.type.kind) else param.type.kind
                try:
                    check_output(path, kind, locations, ctx.params.get("force", False), param.opts[0])
                except OutputRefused as exc:
                    raise click.ClickException(str(exc)) from None
        return super().invoke(ctx)
