"""citekeeper verify."""
from __future__ import annotations

from pathlib import Path

import click

from citekeeper.language import ENGLISH, MULTILINGUAL, ModelChoice
from pipelines.cli_common import language_option, store_option


@click.command("verify")
@store_option
@click.option("--version", help="Corpus version to verify against (default: the latest).")
@click.option(
    "--answers",
    "answers_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Verify the answers in this JSONL/Parquet file instead of the registered ones (nothing is registered).",
)
@click.option("--model", default=None,
              help="NLI model: Hugging Face hub id or local directory. [default: the --language default: "
                   f"{ENGLISH.nli} for en, {MULTILINGUAL.nli} for zh and multi]")  # fmt: skip
@language_option("Corpus language, which picks the default NLI model when --model is not given; auto detects it "
                 "from a sample of the version's chunk texts.")
@click.option("--backend", type=click.Choice(["torch", "onnx"]), default="torch", show_default=True,
              help="onnx: ONNX Runtime with int8 weights, exported once from the same model and cached.")  # fmt: skip
@click.option("--no-model", is_flag=True, help="Run only the anchoring and lexical tiers; undecided claims are 'unverified'.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Output directory: <out>/corpus_version=<v>/run_id=<r>/{pairs,claims,answers,run}.parquet")  # fmt: skip
@click.option("--fail-under", type=click.FloatRange(0.0, 1.0), default=None,
              help="Exit 1 when the share of supported claims is below RATE.")  # fmt: skip
@click.option("--batch-size", type=click.IntRange(1), default=32, show_default=True)
def verify_command(
    store_dir: Path,
    version: str | None,
    answers_file: Path | None,
    model: str | None,
    language: str | None,
    backend: str,
    no_model: bool,
    out_dir: Path,
    fail_under: float | None,
    batch_size: int,
) -> None:
    """Check every claim against its cited evidence (anchoring, lexical fast path, NLI) and write Parquet."""
    from citekeeper.language import choose_nli_model, sample_store_texts
    from citekeeper.store import CorpusStore, StoreError
    from verifiers.evidence import AnswersFileError
    from verifiers.nli import LabelSetError, ModelUnavailable, load_scorer
    from verifiers.verify_store import verify_store

    if no_model and model:
        raise click.UsageError("--model and --no-model exclude each other")
    store = CorpusStore.from_env(store_dir)
    try:
        version = store.version_or_latest(version)
    except (StoreError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    scorer = choice = None
    if not no_model:
        choice = choose_nli_model(model, language, lambda: sample_store_texts(store, version),
                                  source=f"corpus version {version}")  # fmt: skip
        click.echo(f"NLI model: {choice.describe()}")
        try:
            scorer = load_scorer(choice.model, backend, onnx_cache_dir=store.layout.onnx_dir,
                                 batch_size=batch_size, progress=True)  # fmt: skip
        except (ModelUnavailable, LabelSetError) as exc:
            hint = "" if model else (
                f"\n(chosen as the {choice.reason}; --language en|zh|multi or --model overrides the choice)"
            )
            raise click.ClickException(f"{exc}{hint}") from exc
    try:
        result, paths = verify_store(store, out_dir, version=version, answers_file=answers_file, scorer=scorer)
    except (StoreError, AnswersFileError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    run = result.run.row(0, named=True)
    click.echo(_summary(run, result.status_counts(), paths, choice))
    rate = run["supported_rate"]
    if fail_under is not None and rate is not None and rate < fail_under:
        click.echo(f"FAIL: supported-claim rate {rate:.3f} is below --fail-under {fail_under}", err=True)
        raise SystemExit(1)


def _summary(run: dict, counts: dict[str, int], paths: dict[str, Path], choice: ModelChoice | None = None) -> str:
    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.1%}"

    model = f"{run['model_id']} @ {run['model_revision']} ({run['backend']})" if run["model_id"] else "none (--no-model)"
    lines = [
        f"verified {run['n_claims']} claim(s) of {run['n_answers']} answer(s) against corpus version {run['corpus_version']}",
        f"model: {model}",
        *([f"  chosen: {choice.reason}"] if choice is not None else []),
        "statuses: " + ", ".join(f"{status} {n}" for status, n in counts.items()),
        f"supported rate {pct(run['supported_rate'])} | evidence coverage {pct(run['evidence_coverage'])} | "
        f"citation precision {pct(run['citation_precision'])} | locatability {pct(run['locatability'])} | "
        f"traceability {pct(run['traceability_rate'])}",
        f"pairs {run['n_pairs']} ({run['n_unique_pairs']} distinct): lexical {run['lexical_decisions']}, "
        f"cache hits {run['cache_hits']}, model calls {run['model_calls']}",
        f"output: {paths['claims'].parent}",
    ]
    return "\n".join(lines)


COMMANDS = [verify_command]
