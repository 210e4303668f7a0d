"""citekeeper ingest | versions | export."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import get_args, get_origin

import click
from tqdm import tqdm

from citekeeper.outputs import output_metadata
from citekeeper.scope import raw_text_metadata, redact_corpus
from citekeeper.store import READ_SCHEMAS, StoreError
from citekeeper.tables import write_parquet
from citekeeper.text import printable
from parsers.records import SETTINGS, ParseConfig, Setting
from pipelines.cli_common import (
    OutputCommand,
    OutputPath,
    authority_levels_option,
    corpus_store,
    force_option,
    include_internal_text_option,
    lock_timeout_option,
    store_option,
)


def parse_setting_options(command):
    """`command` with an option per parse setting (parsers.records.SETTINGS), named, typed, bounded, defaulted and
    explained as ParseConfig declares it; --authority-levels is the option verify shares."""
    for setting in reversed(SETTINGS):
        command = (authority_levels_option if setting.name == "authority_levels" else _option(setting))(command)
    return command


def given_parse_config(options: Mapping[str, object]) -> ParseConfig:
    """The ParseConfig of the parse setting options given; one not given keeps ParseConfig's default."""
    return ParseConfig.from_settings({s.name: options[s.name] for s in SETTINGS if options[s.name]})


def _option(setting: Setting):
    """A setting's option; a list or dict setting is a repeated option, a (name, values) pair as NAME=V[,V...]
    and a [glob, field, value] entry as GLOB FIELD=VALUE."""
    how: dict = {"metavar": setting.metavar, "default": None}
    kind = setting.type
    if get_origin(kind) is dict:
        how |= {"multiple": True, "callback": _pairs}
    elif kind == list[list[str]]:
        how |= {"multiple": True, "nargs": 2, "callback": _entries}
    elif get_origin(kind) is list:
        how["multiple"] = True
    elif kind is bool:
        how |= {"is_flag": True, "default": False}
    else:
        how["type"] = _bounded(kind, setting.minimum)
    shown = _shown(setting.default)
    text = setting.help + (" Repeatable." if how.get("multiple") else "") + (f" (default {shown})" if shown else "")
    return click.option(setting.option, setting.name, help=text, **how)


def _bounded(kind: object, minimum: float | None) -> click.ParamType | type:
    """The option type of an int, float or str setting (or one of them | None), bounded by `minimum`."""
    scalar = next(t for t in (int, float, str) if t == kind or t in get_args(kind))
    if scalar is int and minimum is not None:
        return click.IntRange(min=int(minimum))
    if scalar is float and minimum is not None:
        return click.FloatRange(min=minimum)
    return scalar


def _shown(default: object) -> str:
    """A default as the help shows it ('' for none)."""
    if isinstance(default, list):
        return ", ".join(map(str, default))
    if isinstance(default, int):
        return f"{default:,}"
    return f"{default:g}" if isinstance(default, float) else ""


def _assignment(param: click.Parameter, setting: str) -> tuple[str, str]:
    """`NAME=VALUE` as (NAME, VALUE)."""
    name, equals, value = setting.partition("=")
    if not equals or not name.strip():
        raise click.BadParameter(f"expected NAME=VALUE, got {setting!r}", param=param)
    return name.strip(), value.strip()


def _entries(ctx: click.Context, param: click.Parameter, given: tuple[tuple[str, str], ...]) -> list[list[str]]:
    """`GLOB FIELD=VALUE` options as [glob, field, value] entries."""
    return [[glob, *_assignment(param, setting)] for glob, setting in given]


def _pairs(ctx: click.Context, param: click.Parameter, given: tuple[str, ...]) -> dict[str, list[str]]:
    """`NAME=V,V` options as {name: [v, v]} ('NAME=': no values)."""
    pairs = (_assignment(param, setting) for setting in given)
    return {name: [v.strip() for v in values.split(",") if v.strip()] for name, values in pairs}


@click.command("ingest")
@click.argument("source")
@click.option("--version", "version", help="Name of the new corpus version (default: the next vNNNN).")
@click.option("--strict", is_flag=True, help="Fail (exit 1, commit nothing) if any file is quarantined.")
@lock_timeout_option("another ingest on the same store")
@parse_setting_options
@store_option
def ingest_command(
    source: str,
    version: str | None,
    strict: bool,
    lock_timeout: float,
    store_dir: Path,
    **settings: object,
) -> None:
    """Ingest SOURCE as a new immutable corpus version (only changed documents are re-parsed): a folder, an
    object-store URL (s3://bucket/prefix, gs://, az://) or a git ref (git:PATH@REF). A document over a limit is
    quarantined as LimitExceeded, naming the limit."""
    from parsers.ingest import ingest  # imports unstructured: keep `versions`/`export` fast
    from parsers.sources import missing, open_source

    store = corpus_store(store_dir)
    try:
        config = given_parse_config(settings)
        opened = open_source(source, store.storage_options)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if (why := missing(opened)) is not None:
        raise click.UsageError(why)
    # click 8.5 deprecates get_text_stream (reached through a module __getattr__, which mypy types as an object)
    stderr = click.get_text_stream("stderr")  # type: ignore[operator]
    with tqdm(desc="parsing", unit="doc", file=stderr, disable=None) as bar:

        def progress(source_path: str, done: int, total: int) -> None:
            bar.total = total
            bar.set_postfix_str(printable(source_path[-40:]), refresh=False)
            bar.update(done - bar.n)

        try:
            result = ingest(
                opened,
                store,
                version=version,
                config=config,
                strict=strict,
                progress=progress,
                lock_timeout=lock_timeout,
            )
        except StoreError as exc:
            raise click.ClickException(str(exc)) from None
    result, manifest = result.shared(), result.manifest
    if result.created:
        click.echo(
            f"created corpus version {manifest.name} (parent: {manifest.parent or 'none'}): "
            f"{manifest.n_documents} documents, {manifest.n_chunks} chunks"
        )
    else:
        click.echo(f"source tree unchanged: it equals corpus version {result.equals}; no new version created")
    if result.reparse_reason:
        click.echo(result.reparse_reason)
    click.echo(
        f"parsed {result.n_parsed}, reused {result.n_reused}, removed {result.n_removed}, "
        f"quarantined {result.n_quarantined}, skipped {result.n_skipped + len(result.no_text)}"
    )
    for source_path in result.no_text:
        click.echo(f"  skipped {printable(source_path)}: no_text (no body text to cite)")
    for error in result.errors:
        reason = printable(error.reason)
        click.echo(f"  quarantined {printable(error.source_path)}: {error.stage}: {error.error_type}: {reason}")


@click.command("versions")
@click.option("--json", "as_json", is_flag=True, help="Print the manifests as JSON.")
@store_option
def versions_command(as_json: bool, store_dir: Path) -> None:
    """List the corpus versions in the store, oldest first."""
    versions = corpus_store(store_dir).versions()
    if as_json:
        click.echo(json.dumps([asdict(v) for v in versions], indent=2))
        return
    if not versions:
        click.echo(f"no corpus versions in {store_dir}")
    for v in versions:
        click.echo(
            f"{v.name:<16} parent={v.parent or '-':<16} {v.created_at}  docs={v.n_documents} "
            f"chunks={v.n_chunks} errors={v.n_errors} parsed={v.n_parsed} reused={v.n_reused} "
            f"removed={v.n_removed}"
        )


@click.command("export", cls=OutputCommand)
@click.argument("table", type=click.Choice(["chunks", "documents", "errors"]))
@click.option("--version", "version", required=True, help="Corpus version to export.")
@click.option(
    "--out", "out", required=True, type=OutputPath(lambda params: params["table"]), help="Parquet file to write."
)
@force_option
@include_internal_text_option
@store_option
def export_command(
    table: str, version: str, out: Path, force: bool, include_internal_text: bool, store_dir: Path
) -> None:
    """Write one table of a corpus version to a Parquet file (citekeeper schema). Any committed version: its
    chunks and documents are read by name from LanceDB (time travel), its ingest errors from the store's export.
    The text of internal_only documents is withheld unless --include-internal-text."""
    store = corpus_store(store_dir)
    readers = {"chunks": store.read_chunks, "documents": store.read_documents, "errors": store.read_errors}
    try:
        rows = readers[table](version)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    shared = rows if include_internal_text else redact_corpus(rows)
    metadata = raw_text_metadata(include_internal_text) | output_metadata(table)
    write_parquet(shared, READ_SCHEMAS[table].with_metadata(metadata), out)
    click.echo(f"wrote {rows.height} {table} rows of corpus version {version} to {out}")


COMMANDS = [ingest_command, versions_command, export_command]
