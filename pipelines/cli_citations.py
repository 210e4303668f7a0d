"""citekeeper answers add | diff | stale."""

from __future__ import annotations

import json
from pathlib import Path

import click
import polars as pl

from changes.repair import DEFAULT_MIN_SCORE
from changes.statuses import NAMES
from citekeeper.answers.formats import RESPONSE_FORMATS, UnknownFormat
from citekeeper.answers.records import (
    MAX_CITATIONS_PER_ANSWER,
    MAX_CITATIONS_PER_CLAIM,
    MAX_CLAIMS_PER_ANSWER,
    AnswerLimits,
)
from citekeeper.schema import ANSWER_EXPORT
from citekeeper.scope import write_shared_status
from citekeeper.store import StoreError
from citekeeper.text import printable
from pipelines.cli_common import (
    OutputCommand,
    OutputPath,
    corpus_store,
    force_option,
    include_internal_text_option,
    reading,
    search_index,
    store_option,
)


@click.group("answers")
def answers_group() -> None:
    """Register answers whose citations citekeeper keeps honest."""


@answers_group.command("add")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--max-claims-per-answer",
    type=click.IntRange(min=1),
    default=MAX_CLAIMS_PER_ANSWER,
    show_default=True,
    help="An answer of more claims (sentences, in marker form) is refused as a bad line.",
)
@click.option(
    "--max-citations-per-claim",
    type=click.IntRange(min=1),
    default=MAX_CITATIONS_PER_CLAIM,
    show_default=True,
    help="An answer with a claim of more citations is refused as a bad line.",
)
@click.option(
    "--max-citations-per-answer",
    type=click.IntRange(min=1),
    default=MAX_CITATIONS_PER_ANSWER,
    show_default=True,
    help="An answer of more citations, all its claims together, is refused as a bad line.",
)
@click.option(
    "--from",
    "response_format",
    default=None,
    metavar="FORMAT",
    help="Each line is {answer_id, question, corpus_version, documents, response}, the response as this API or "
    f"framework returns it: {', '.join(RESPONSE_FORMATS)}.",
)
@click.option(
    "--audience",
    default=None,
    metavar="GROUP,...",
    callback=lambda _ctx, _param, value: _audience(value),
    help="The access groups the answers were given to: a record that names none gets these, one that names its "
    "own keeps only the groups both name (never wider). Citations of documents outside it are out_of_scope.",
)
@store_option
def answers_add(
    file: Path,
    max_claims_per_answer: int,
    max_citations_per_claim: int,
    max_citations_per_answer: int,
    response_format: str | None,
    audience: tuple[str, ...] | None,
    store_dir: Path,
) -> None:
    """Register the answers of FILE (JSONL or Parquet, structured or marker form, or --from FORMAT).

    Good lines register even when others are malformed; each bad line is reported with its line number
    and field, and the command then exits 1, as it does when a citation names a document its version does not
    hold (that answer registers, the citation invalid). Re-adding identical content is a no-op; changed content
    becomes a new revision.
    """
    from citekeeper.answers.store import AnswerStore, AnswerStoreLocked

    try:
        limits = AnswerLimits(max_claims_per_answer, max_citations_per_claim, max_citations_per_answer)
        answer_store = AnswerStore(store_dir, limits=limits, corpus=corpus_store(store_dir))
        result = answer_store.add(file, response_format=response_format, audience=audience)
    except (AnswerStoreLocked, UnknownFormat) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{file}: {result.summary()}")
    for answer_id, revision in result.revised:
        click.echo(f"  {printable(answer_id)}: new revision {revision}")
    for notice in result.repeated:
        click.echo(f"  {file}: {printable(str(notice))}", err=True)
    for error in [*result.errors, *result.unanchored]:
        click.echo(f"  {file}: {printable(str(error))}", err=True)
    if result.errors or result.unanchored:
        raise SystemExit(1)


def _audience(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    groups = [group.strip() for group in value.split(",")]
    if not all(groups):
        raise click.BadParameter(f"{value!r} names an empty group: give GROUP,GROUP,...")
    return tuple(sorted(set(groups)))


@answers_group.command("list")
@store_option
def answers_list(store_dir: Path) -> None:
    """The current answers: id, revision, claims and citations."""
    from citekeeper.answers.export import answer_list

    for row in answer_list(corpus_store(store_dir)).iter_rows(named=True):
        click.echo(
            f"{printable(row['answer_id'])}  revision {row['revision']}  "
            f"{row['n_claims']} claims  {row['n_citations']} citations"
        )


@answers_group.command("show")
@click.argument("answer_id")
@include_internal_text_option
@store_option
def answers_show(answer_id: str, include_internal_text: bool, store_dir: Path) -> None:
    """ANSWER_ID as registered: its claims, and each citation's document, locator and quote."""
    from citekeeper.answers.export import shown_answer
    from citekeeper.answers.store import UnknownAnswer
    from reports.terminal import source_line

    try:
        revision, rows = shown_answer(corpus_store(store_dir), answer_id, include_internal_text)
    except UnknownAnswer as exc:
        raise click.ClickException(exc.args[0]) from None
    click.echo(f"answer {printable(answer_id)} (revision {revision})")
    if rows.is_empty():
        click.echo("  no claims")
    for (claim_index,), claim in rows.partition_by("claim_index", as_dict=True, maintain_order=True).items():
        first = claim.row(0, named=True)
        click.echo(f"  claim {claim_index + 1} ({first['claim_status']}): {printable(first['claim_text'])}")
        for cite in claim.filter(pl.col("citation_id").is_not_null()).iter_rows(named=True):
            where = " · ".join(
                str(p)
                for p in (
                    cite["source_path"] or "chunk not in its version",
                    cite["locator"],
                    cite["chunk_id"],
                    f"chars {cite['start_char']}–{cite['end_char']}",
                    cite["cited_version"],
                )
                if p is not None
            )
            click.echo(f"    [{cite['citation_index'] + 1}] {printable(where)}")
            if source_line(cite):  # a redacted source shows this instead of its text
                click.echo(f"        {printable(source_line(cite))}")
            if cite["anchored_by"] not in (None, "chunk_id"):  # cited by document: how registration anchored it
                score = f" {cite['anchor_score']:.2f}" if cite["anchor_score"] is not None else ""
                review = ", needs review" if cite["needs_review"] else ""
                click.echo(
                    f"        anchored by {cite['anchored_by']}{score}{review}"
                    + (f": {printable(cite['anchor_note'])}" if cite["anchor_note"] else "")
                )
            if cite["quote"] is not None:
                click.echo(f"        “{printable(cite['quote'])}”")


@answers_group.command("export", cls=OutputCommand)
@click.option("--out", required=True, type=OutputPath("answers"), help="Parquet file to write.")
@force_option
@click.option("--answer", "answer_id", default=None, help="Only this answer.")
@include_internal_text_option
@store_option
def answers_export(out: Path, force: bool, answer_id: str | None, include_internal_text: bool, store_dir: Path) -> None:
    """One row per citation of every current answer (schema ANSWER_EXPORT): claim, document, chunk, quote and
    its span in the version cited."""
    from citekeeper.answers.export import citation_rows
    from citekeeper.answers.store import UnknownAnswer
    from citekeeper.outputs import output_metadata
    from citekeeper.scope import raw_text_metadata
    from citekeeper.tables import write_parquet

    try:
        rows = citation_rows(corpus_store(store_dir), answer_id, include_internal_text)
    except UnknownAnswer as exc:
        raise click.ClickException(exc.args[0]) from None
    write_parquet(
        rows, ANSWER_EXPORT.with_metadata(raw_text_metadata(include_internal_text) | output_metadata("answers")), out
    )
    click.echo(f"wrote {rows.height} rows of {rows['answer_id'].n_unique()} answers to {out}")


@click.command("diff", cls=OutputCommand)
@click.argument("old")
@click.argument("new")
@click.option("--out", type=OutputPath("chunk_diff"), help="Write the chunk diff to this Parquet file.")
@force_option
@click.option("--json", "as_json", is_flag=True, help="Print counts and changed documents as JSON.")
@store_option
def diff_command(old: str, new: str, out: Path | None, force: bool, as_json: bool, store_dir: Path) -> None:
    """Diff corpus versions OLD and NEW at document and chunk level."""
    from changes.diff import diff_versions
    from citekeeper.outputs import output_metadata
    from citekeeper.schema import CHUNK_DIFF
    from citekeeper.tables import write_parquet

    try:
        store = corpus_store(store_dir)
        diff = diff_versions(store, old, new).shared(store)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    if out is not None:
        write_parquet(diff.chunks, CHUNK_DIFF.with_metadata(output_metadata("chunk_diff")), out)
    changed = diff.changed_docs().select("change", "old_source_path", "new_source_path").to_dicts()
    if as_json:
        payload = {
            "old": old,
            "new": new,
            "documents": diff.doc_counts(),
            "chunks": diff.chunk_counts(),
            "changed_documents": changed,
        }
        click.echo(json.dumps(payload, indent=2))
        return
    click.echo(f"{old} -> {new}")
    click.echo("  documents: " + ", ".join(f"{k} {v}" for k, v in diff.doc_counts().items()))
    click.echo("  chunks of changed documents: " + ", ".join(f"{k} {v}" for k, v in diff.chunk_counts().items()))
    for doc in changed:
        paths = doc["old_source_path"] or doc["new_source_path"]
        if doc["change"] == "renamed":
            paths = f"{doc['old_source_path']} -> {doc['new_source_path']}"
        click.echo(f"  {doc['change']:<9} {paths}")
    if out is not None:
        click.echo(f"chunk diff written to {out}")


def _statuses(value: str | None) -> list[str]:
    wanted = [s.strip() for s in (value or "").split(",") if s.strip()]
    unknown = [s for s in wanted if s not in NAMES]
    if unknown:
        raise click.BadParameter(f"unknown status {unknown[0]!r}; choose from {', '.join(NAMES)}")
    return wanted


@click.command("stale", cls=OutputCommand)
@click.option("--against", "target", required=True, help="Corpus version to judge the citations against.")
@click.option("--out", type=OutputPath("citation_status"), help="Also write the statuses to this Parquet file.")
@click.option("--report", type=OutputPath("report"), help="Write the HTML report here.")
@force_option
@click.option(
    "--fail-on",
    "fail_on",
    callback=lambda _ctx, _param, value: _statuses(value),
    help="Comma-separated statuses (e.g. stale,removed,invalid) that make the command exit 1 (CI gate).",
)
@click.option("--no-reanchor", is_flag=True, help="Skip re-anchoring suggestions for stale/removed citations.")
@include_internal_text_option
@store_option
def stale_command(
    target: str,
    out: Path | None,
    report: Path | None,
    force: bool,
    fail_on: list[str],
    no_reanchor: bool,
    include_internal_text: bool,
    store_dir: Path,
) -> None:
    """Judge every registered citation against corpus version --against.

    Exits 0 unless a status listed in --fail-on occurs (then 1).
    """
    from changes.citation_status import check_citations
    from changes.report_inputs import report_inputs
    from reports.html import write_report
    from reports.terminal import terminal_summary

    store = corpus_store(store_dir)
    with reading(store):  # the statuses read back for --out and --report are the ones just written
        check = check_citations(store, target, suggest=not no_reanchor, embedding_store=search_index(store))
        click.echo(terminal_summary(check.outline, check.blast_radius, target))
        click.echo(f"statuses stored at {check.status_path}")
        if out is not None:
            click.echo(f"statuses written to {write_shared_status(check.read_status(), out, include_internal_text)}")
        if report is not None:
            shown = report_inputs(store, target, check.read_status())
            write_report(
                report,
                target,
                blast_radius=check.blast_radius,
                status=shown.status,
                answers=shown.answers,
                claims=shown.claims,
                versions=shown.versions,
                status_counts=shown.status_counts,
                history=shown.history,
            )
            click.echo(f"report written to {report}")
    failing = {s: n for s, n in check.counts().items() if s in fail_on and n}
    if failing:
        click.echo("failing: " + ", ".join(f"{n} {s}" for s, n in failing.items()), err=True)
        raise SystemExit(1)


@click.command("repair", cls=OutputCommand)
@click.option("--against", "target", required=True, help="Corpus version the repaired answers will cite.")
@click.option(
    "--min-score",
    type=click.FloatRange(0.0, 1.0),
    default=DEFAULT_MIN_SCORE,
    show_default=True,
    help="Lowest re-anchoring suggestion score a stale or removed citation is re-pointed at (marked needs_review).",
)
@click.option("--out", type=OutputPath("repaired_answers"), help="Also write the repaired answers (JSONL) here.")
@force_option
@click.option("--apply", is_flag=True, help="Register the repaired answers as new revisions in the answer store.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@include_internal_text_option
@store_option
def repair_command(
    target: str,
    min_score: float,
    out: Path | None,
    force: bool,
    apply: bool,
    as_json: bool,
    include_internal_text: bool,
    store_dir: Path,
) -> None:
    """Repair the registered citations against corpus version --against.

    Each answer with a citation that can be re-pointed is written as a new revision, in the form it was
    registered in, citing --against: relocated and drifted citations point at the successor chunk; stale and
    removed ones at the span re-anchoring found verbatim, or at its best suggestion when that scores at least
    --min-score (needs_review); the rest stay as they are (unresolved). Invalid and out_of_scope citations are never
    repaired, and nothing is re-pointed into a document outside its answer's audience.
    Without --apply nothing is registered.
    """
    from changes.repair import repair_citations

    try:
        store = corpus_store(store_dir)
        result = repair_citations(
            store,
            target,
            min_score=min_score,
            out=out,
            apply=apply,
            include_internal_text=include_internal_text,
            embedding_store=search_index(store),
        )
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    summary = result.summary()
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        click.echo(
            f"repair against {target}: {summary['n_citations']} citations, "
            f"{summary['n_answers_repaired']} answers to revise"
        )
        click.echo("  " + "  ".join(f"{kind} {n}" for kind, n in summary["repairs"].items()))
        click.echo(f"  {summary['n_needs_review']} citation(s) need review")
        click.echo(f"repaired answers at {result.paths['jsonl']}" + (f" and {out}" if out is not None else ""))
    if result.applied is not None:
        click.echo(f"applied: {result.applied.summary()}", err=as_json)
        for error in result.applied.errors:
            click.echo(f"  {error}", err=True)
        if result.applied.errors:
            raise SystemExit(1)
    elif not as_json:
        click.echo("not applied (use --apply to register them)")


COMMANDS: list = [answers_group, diff_command, stale_command, repair_command]
