"""`citekeeper demo`: the whole pipeline on the bundled sample corpus (package data, only read), through the real
Dagster job; running it again gives the same results (docs/demo.md)."""

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from citekeeper.settings import SAMPLE_CORPUS
from pipelines.cli_common import cli_settings, corpus_store, language_option, store_option_defaulting_to

if TYPE_CHECKING:  # dagster is imported when the demo runs, not when the CLI starts
    from dagster import DagsterEvent

DEMO_STORE = ".citekeeper/demo"
VERSIONS = ("v1", "v2")
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def nli_model_or_reason(
    model: str | None, no_model: bool, language: str | None = None, corpus: Path | None = None
) -> tuple[str | None, str]:
    """The NLI model to use, or None with the plain reason why only the model-free tiers run.

    Without `model`, the default of the `language` setting (None: $CITEKEEPER_LANGUAGE, else auto); auto
    detects the language from the first version's documents under `corpus`."""
    from verifiers.checkers.loading import ScorerUnavailable, chosen_scorer

    if no_model:
        return None, "NLI: --no-model given; running the anchoring and lexical tiers only."
    first = (corpus or SAMPLE_CORPUS) / VERSIONS[0]
    try:
        choice, _ = chosen_scorer(model, language, lambda: source_texts(first), f"the documents of {first}")
    except ScorerUnavailable as exc:
        first_line = str(exc).splitlines()[0]
        return None, (
            f"NLI: model {exc.choice.model} could not be loaded ({first_line}).\n"
            f"     It was chosen as the {exc.choice.reason}.\n"
            "     Running the anchoring and lexical tiers only: claims they cannot decide are reported as "
            "'unverified', never guessed. Pass --model /local/dir to use a local NLI model."
        )
    return choice.model, f"NLI: model {choice.describe()}"


def source_texts(source_dir: Path, max_docs: int | None = None) -> list[str]:
    """Canonical texts of at most `max_docs` documents under `source_dir` (spread over the sorted paths),
    parsed as ingest parses them; text formats are preferred over PDF/DOCX; unparseable ones are skipped."""
    from citekeeper.language import SAMPLE_DOCS, sample_of
    from parsers.discover import discover_sources
    from parsers.document import extract_blocks
    from parsers.records import DocumentError, ParseConfig

    config = ParseConfig()
    sources, _ = discover_sources(source_dir, config)
    sources = [s for s in sources if s.filetype in ("md", "txt", "html", "rst")] or sources
    texts = []
    for source in sample_of(sources, max_docs or SAMPLE_DOCS):
        try:
            texts.append(extract_blocks(source, config)[0])
        except DocumentError:
            continue
    return texts


def run_version(
    instance, store_dir: Path, version: str, source: Path, answers: Path, nli_model: str | None, language: str
) -> None:
    """Materialize every asset of one corpus version with the pipeline job; raise with the failing steps."""
    from assets.resources import AnswersResource, CitekeeperSettings, IngestResource, StoreResource, VerifierResource
    from pipelines.definitions import build_definitions

    if not instance.has_dynamic_partition("corpus_version", version):
        instance.add_dynamic_partitions("corpus_version", [version])
    settings = CitekeeperSettings(
        store=StoreResource(store_dir=str(store_dir), **cli_settings().store_locations()),
        ingest=IngestResource(source_dir=str(source)),
        answers=AnswersResource(answers_path=str(answers)),
        verifier=VerifierResource(
            nli_model=nli_model, language=language, embedding_model=cli_settings().embedding_model
        ),
    )
    job = build_definitions(settings).resolve_job_def("citekeeper_pipeline")
    result = job.execute_in_process(
        partition_key=version, instance=instance, run_config=QUIET_RUN_CONFIG, raise_on_error=False
    )
    if not result.success:
        failures = [
            f"  {event.step_key}: {_failure_message(event)}" for event in result.all_events if event.is_step_failure
        ]
        raise click.ClickException(f"pipeline run for {version} failed:\n" + "\n".join(failures))


def _failure_message(event: "DagsterEvent") -> str:
    error = event.step_failure_data.error
    return error.message.strip() if error is not None else "failed, no error recorded"


def _chunks_file(store, version: str) -> str:
    """The latest version's chunk export; any other version is exported on demand (from LanceDB time travel)."""
    if store.has_export("chunks", version):
        return str(store.parquet_path("chunks", version))
    return f"citekeeper export chunks --version {version} --out {version}-chunks.parquet"


def summary(store_dir: Path, nli_note: str) -> str:
    """Where everything went, and what the v1 -> v2 update did to the sample answers."""
    import polars as pl

    from citekeeper.layout import latest_run_dir
    from citekeeper.schema import BLAST_RADIUS, CITATION_STATUS
    from citekeeper.tables import read_parquet
    from reports.terminal import terminal_summary

    store = corpus_store(store_dir)
    old, new = VERSIONS
    layout = store.layout
    status = read_parquet(layout.citation_status_file(new), CITATION_STATUS)
    radius = read_parquet(layout.blast_radius_file(new), BLAST_RADIUS)
    run_dir = latest_run_dir(layout.runs_dir, new)
    assert run_dir is not None, f"the pipeline verified {new}"
    claims = pl.read_parquet(run_dir / "claims.parquet")
    run = pl.read_parquet(run_dir / "run.parquet").row(0, named=True)
    claim_counts = dict(sorted(claims.group_by("status").len().iter_rows()))
    repairs = json.loads(layout.repair_summary_file(new).read_text(encoding="utf-8"))
    lines = [
        "",
        f"citekeeper demo: sample corpus {old} -> {new}, store {store.root}",
        "",
        *(
            f"  corpus {m.name}: {m.n_documents} documents, {m.n_chunks} chunks, {m.n_errors} quarantined "
            f"-> {_chunks_file(store, m.name)}"
            for m in store.versions()
        ),
        f"  diff {old} -> {new}:        {layout.diff_dir(old, new)}",
        f"  citation status:       {layout.citation_status_file(new)}",
        f"  blast radius:          {layout.blast_radius_file(new)}",
        f"  stale report (HTML):   {layout.report_file(new)}",
        f"  repaired answers:      {layout.repaired_answers_file(new)} (not applied)",
        f"  verification:          {run_dir}",
        "",
        terminal_summary(status, radius, new),
        f"  repair plan: {repairs['n_answers_repaired']} answers to revise; "
        + ", ".join(f"{kind} {n}" for kind, n in repairs["repairs"].items() if n)
        + f"; {repairs['n_needs_review']} need review",
        f"  apply it: citekeeper repair --against {new} --apply --store {store.root}",
        "",
        nli_note,
        f"claims against {new}: "
        + ", ".join(f"{s} {n}" for s, n in claim_counts.items())
        + f" (model calls {run['model_calls']}, cache hits {run['cache_hits']}, "
        f"lexical decisions {run['lexical_decisions']})",
        *_source_model_lines(claims, status),
    ]
    return "\n".join(lines)


def _source_model_lines(claims, status) -> list[str]:
    """The conflicts the ranking decided or left open, and the citations outside their answer's audience."""
    import polars as pl

    conflicts = claims.filter(pl.col("conflict").is_not_null()).sort("conflict", "answer_id")
    out_of_scope = status.filter(pl.col("status") == "out_of_scope").sort("answer_id")
    return [
        *(
            f"  {row['conflict']} conflict ({row['answer_id']}): {row['reason']}"
            for row in conflicts.iter_rows(named=True)
        ),
        *(f"  out of scope ({row['answer_id']}): {row['reason']}" for row in out_of_scope.iter_rows(named=True)),
    ]


@click.command("demo")
@store_option_defaulting_to(DEMO_STORE, "Where the demo's store (and its Dagster run history) goes.")
@click.option(
    "--corpus",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=SAMPLE_CORPUS,
    show_default="the bundled sample corpus",
    help="A corpus dir with v1/, v2/ and answers.jsonl.",
)
@click.option(
    "--model", default=None, help="NLI model (hub id or local dir); default: try the default model of --language."
)
@language_option("Corpus language, which picks the default NLI model; auto detects it from the v1 documents.")
@click.option("--no-model", is_flag=True, help="Skip NLI; run the anchoring and lexical tiers only.")
def demo_command(store_dir: Path, corpus: Path, model: str | None, language: str, no_model: bool) -> None:
    """Run the whole pipeline on the sample corpus: ingest v1, register answers, ingest v2, diff,
    repair plan, stale report, re-verify. Idempotent."""
    import dagster as dg

    nli_model, nli_note = nli_model_or_reason(model, no_model, language, corpus)
    click.echo(nli_note)
    dagster_home = store_dir / "dagster_home"  # DAGSTER_HOME=<this> dagster dev shows the demo's runs
    dagster_home.mkdir(parents=True, exist_ok=True)
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        for version in VERSIONS:
            click.echo(f"running the pipeline for corpus version {version} ({corpus / version}) ...")
            run_version(instance, store_dir, version, corpus / version, corpus / "answers.jsonl", nli_model, language)
    click.echo(summary(store_dir, nli_note))


COMMANDS = [demo_command]
