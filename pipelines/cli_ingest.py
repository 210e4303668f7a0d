"""citekeeper ingest | versions | export."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click
from tqdm import tqdm

from citekeeper.outputs import output_metadata
from citekeeper.scope import raw_text_metadata, redact_corpus
from citekeeper.store import DEFAULT_LOCK_TIMEOUT, READ_SCHEMAS, StoreError
from citekeeper.tables import write_parquet
from citekeeper.text import printable
from parsers.records import ParseConfig
from pipelines.cli_common import (
    OutputCommand,
    OutputPath,
    authority_levels_option,
    corpus_store,
    force_option,
    include_internal_text_option,
    store_option,
)


@click.command("ingest")
@click.argument("source_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--version", "version", help="Name of the new corpus version (default: the next vNNNN).")
@click.option("--strict", is_flag=True, help="Fail (exit 1, commit nothing) if any file is quarantined.")
@click.option("--max-chunk-chars", type=click.IntRange(min=50), default=None, help="Chunk size limit.")
@click.option(
    "--include",
    "include",
    multiple=True,
    metavar="GLOB",
    help="Ingest only files whose path under SOURCE_DIR matches a GLOB (repeatable). `*` stays within "
    "a folder, `**/` spans any depth: '**/*.md'. Files left out are counted as skipped.",
)
@click.option(
    "--exclude",
    "exclude",
    multiple=True,
    metavar="GLOB",
    help="Never ingest files matching GLOB (repeatable), e.g. 'drafts/**'; counted as skipped, not "
    "quarantined, so --strict still holds.",
)
@click.option(
    "--ocr-lang",
    "ocr_languages",
    multiple=True,
    metavar="CODE",
    help="Tesseract language for OCR of images and scanned pages (repeatable; default: eng and chi_sim).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Processes parsing documents at once (default: one per CPU; 1: parse in this process).",
)
@click.option(
    "--lock-timeout",
    type=float,
    default=DEFAULT_LOCK_TIMEOUT,
    show_default=True,
    help="Seconds to wait for another ingest on the same store before giving up.",
)
@click.option(
    "--parse-timeout",
    "parse_timeout_s",
    type=click.FloatRange(min=1),
    default=None,
    help=f"Seconds one document may take to parse (default {ParseConfig.parse_timeout_s:g}).",
)
@click.option(
    "--max-file-bytes",
    type=click.IntRange(min=1),
    default=None,
    help=f"Largest file read (default {ParseConfig.max_file_bytes:,}).",
)
@click.option(
    "--max-decompressed-bytes",
    type=click.IntRange(min=1),
    default=None,
    help=f"Most a ZIP-based document (docx, xlsx, pptx, ...) may unpack to (default {ParseConfig.max_decompressed_bytes:,}).",
)
@click.option(
    "--max-rows-per-sheet",
    type=click.IntRange(min=1),
    default=None,
    help=f"Most rows of one sheet or CSV (default {ParseConfig.max_rows_per_sheet:,}).",
)
@click.option(
    "--max-chunks-per-document",
    type=click.IntRange(min=1),
    default=None,
    help=f"Most chunks of one document (default {ParseConfig.max_chunks_per_document:,}).",
)
@click.option(
    "--worker-memory-bytes",
    type=click.IntRange(min=64 * 1024 * 1024),
    default=None,
    help=f"Address space a parse worker may add (RLIMIT_AS; default {ParseConfig.worker_memory_bytes:,}).",
)
@click.option(
    "--source-url-template",
    metavar="TEMPLATE",
    default=None,
    help="Every document's source_url where its sidecar or front matter gives none, e.g. "
    "'https://docs.example.com/{path_without_ext}/'; placeholders: {path}, {path_without_ext}, "
    "{stem}, {dir}, {doc_id}. A relative URL a page gives (url: /about/) is resolved against it.",
)
@click.option(
    "--source-default",
    "source_defaults",
    multiple=True,
    nargs=2,
    metavar="GLOB FIELD=VALUE",
    help="source_type, authority or source_version of the documents matching GLOB (fnmatch) that do "
    "not give one (repeatable; the first matching GLOB per field wins).",
)
@click.option(
    "--source-field",
    "source_fields_map",
    multiple=True,
    metavar="FIELD=KEY[,KEY...]",
    help="Front matter keys FIELD is read from, first present first, replacing the default list "
    "(repeatable; 'FIELD=' reads it from no key). E.g. updated_at=modified,lastmod.",
)
@authority_levels_option
@store_option
def ingest_command(
    source_dir: Path,
    version: str | None,
    strict: bool,
    max_chunk_chars: int | None,
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    ocr_languages: tuple[str, ...],
    workers: int | None,
    lock_timeout: float,
    store_dir: Path,
    source_url_template: str | None,
    source_defaults: tuple[tuple[str, str], ...],
    source_fields_map: tuple[str, ...],
    authority_levels: tuple[str, ...],
    **limits: float | int | None,
) -> None:
    """Ingest SOURCE_DIR as a new immutable corpus version (only changed documents are re-parsed). A document
    over a limit is quarantined as LimitExceeded, naming the limit."""
    from parsers.ingest import ingest  # imports unstructured: keep `versions`/`export` fast

    given = {
        "max_chunk_chars": max_chunk_chars,
        "ocr_languages": ocr_languages,
        **limits,
        "source_url_template": source_url_template,
        "authority_levels": authority_levels,
        "source_defaults": tuple(
            (glob, *_assignment("--source-default", setting)) for glob, setting in source_defaults
        ),
        "source_fields_map": tuple(_source_keys(setting) for setting in source_fields_map),
    }
    try:
        config = ParseConfig(**{k: v for k, v in given.items() if v}, include=include, exclude=exclude, workers=workers)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    with tqdm(desc="parsing", unit="doc", file=click.get_text_stream("stderr"), disable=None) as bar:

        def progress(source_path: str, done: int, total: int) -> None:
            bar.total = total
            bar.set_postfix_str(printable(source_path[-40:]), refresh=False)
            bar.update(done - bar.n)

        try:
            result = ingest(
                source_dir,
                corpus_store(store_dir),
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
        click.echo(
            f"  quarantined {printable(error.source_path)}: {error.stage}: {error.error_type}: {printable(error.reason)}"
        )


def _assignment(option: str, setting: str) -> tuple[str, str]:
    """`NAME=VALUE` as (NAME, VALUE)."""
    name, equals, value = setting.partition("=")
    if not equals or not name.strip():
        raise click.BadParameter(f"expected NAME=VALUE, got {setting!r}", param_hint=option)
    return name.strip(), value.strip()


def _source_keys(setting: str) -> tuple[str, tuple[str, ...]]:
    """`FIELD=KEY,KEY` as (FIELD, (KEY, KEY))."""
    name, keys = _assignment("--source-field", setting)
    return name, tuple(key.strip() for key in keys.split(",") if key.strip())


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
