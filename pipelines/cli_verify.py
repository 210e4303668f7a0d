"""citekeeper verify."""

from __future__ import annotations

from pathlib import Path

import click

from citekeeper.language import ENGLISH, MULTILINGUAL, ModelChoice
from citekeeper.outputs import DIRECTORY
from pipelines.cli_common import (
    OutputCommand,
    OutputPath,
    authority_levels_option,
    corpus_store,
    language_option,
    reading,
    store_option,
)
from verifiers.checkers import PROTOCOLS
from verifiers.conflicts import RankingSettings
from verifiers.devices import BACKENDS, DEFAULT_BACKEND, DEFAULT_BATCH, DEFAULT_DEVICE


@click.command("verify", cls=OutputCommand)
@store_option
@click.option("--version", help="Corpus version to verify against (default: the latest).")
@click.option(
    "--answers",
    "answers_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Verify the answers in this JSONL/Parquet file instead of the registered ones (nothing is registered).",
)
@click.option(
    "--model",
    default=None,
    help="Checker (an NLI model or a fact-checker): Hugging Face hub id or local directory. [default: the "
    f"--language default: {ENGLISH.nli} for en ({ENGLISH.gpu_nli} on a GPU), {MULTILINGUAL.nli} for zh "
    "and multi]",
)
@language_option(
    "Corpus language, which picks the default NLI model when --model is not given; auto detects it "
    "from a sample of the version's chunk texts."
)
@click.option(
    "--checker",
    type=click.Choice(PROTOCOLS),
    default=None,
    help='The checker\'s protocol (docs/verification.md, "Checkers"); callable: --model names a Python function '
    "module:function, http: --model is the URL of an endpoint scoring pairs. [default: the preset's for a known "
    "checker, else what the model's config implies: a 3-way (or entailment/not_entailment) classifier nli, another "
    "2-label classifier binary, a seq2seq model seq2seq, a causal LM causal-lm]",
)
@click.option(
    "--checker-version",
    default=None,
    help="callable, http: the checker's version, part of the verdict cache's key with its name or URL; give a new "
    "one when its verdicts change. [default: unversioned]",
)
@click.option(
    "--supported-label",
    type=click.IntRange(0),
    default=None,
    help="binary: the output index that means supported. [default: 1, as MiniCheck's]",
)
@click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default=DEFAULT_BACKEND,
    show_default=True,
    help="onnx: ONNX Runtime with int8 weights, exported once from the same model and cached.",
)
@click.option(
    "--no-model", is_flag=True, help="Run only the anchoring and lexical tiers; undecided claims are 'unverified'."
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=OutputPath(DIRECTORY),
    help="Output directory: <out>/corpus_version=<v>/run_id=<r>/{pairs,claims,answers,run}.parquet",
)
@click.option(
    "--fail-under",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="Exit 1 when the share of supported claims is below RATE.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1),
    default=None,
    help="Pairs per forward pass to start from (halved on out-of-memory). "
    f"[default: {DEFAULT_BATCH['cpu']} on the CPU, {DEFAULT_BATCH['cuda']} on a GPU]",
)
@click.option(
    "--device",
    default=DEFAULT_DEVICE,
    show_default=True,
    help="auto|cpu|cuda|cuda:N; auto takes a GPU when torch sees one (bf16 or fp16 there), else the CPU.",
)
@click.option(
    "--threads", type=click.IntRange(1), default=None, help="torch intra-op threads. [default: torch's, one per core]"
)
@click.option(
    "--shard",
    "shard_spec",
    default=None,
    metavar="I/N",
    help="Verify only answer shard I of N (a stable hash of answer_id); run every shard with the same "
    "--run-id, then `citekeeper verify-merge`.",
)
@click.option("--run-id", default=None, help="The run's id (default: a new timestamp); the shards of one run share it.")
@click.option(
    "--rank-weight",
    "rank_weights",
    multiple=True,
    metavar="TERM=W",
    help="A weight of the conflict ranking S = w_a*authority + w_t*time + w_s*scope + w_v*support - "
    "w_x*penalty, e.g. --rank-weight authority=2; repeat per term. [defaults: authority 1, the others 0.5]",
)
@click.option(
    "--conflict-margin",
    type=click.FloatRange(0.0),
    default=RankingSettings.margin,
    show_default=True,
    help="The lead in S by which the best evidence of one side decides a conflict; under it the claim stays "
    "conflicted.",
)
@click.option(
    "--half-life-days",
    type=click.FloatRange(0.0, min_open=True),
    default=RankingSettings.half_life_days,
    show_default=True,
    help="Time term of a dated source without a version to match: it halves every this many days "
    "before the answer was given.",
)
@authority_levels_option
def verify_command(
    store_dir: Path,
    version: str | None,
    answers_file: Path | None,
    model: str | None,
    language: str | None,
    checker: str | None,
    checker_version: str | None,
    supported_label: int | None,
    backend: str,
    no_model: bool,
    out_dir: Path,
    fail_under: float | None,
    batch_size: int | None,
    device: str,
    threads: int | None,
    shard_spec: str | None,
    run_id: str | None,
    rank_weights: tuple[str, ...],
    conflict_margin: float,
    half_life_days: float,
    authority_levels: tuple[str, ...],
) -> None:
    """Check every claim against its cited evidence (anchoring, lexical fast path, NLI) and write Parquet."""
    from changes.evidence import AnswersFileError
    from citekeeper.language import sample_store_texts
    from citekeeper.sharding import Shard
    from citekeeper.store import StoreError
    from verifiers.checkers.loading import ScorerUnavailable, chosen_scorer
    from verifiers.checkers.presets import licence_notice
    from verifiers.verify_store import verify_store

    if no_model and model:
        raise click.UsageError("--model and --no-model exclude each other")
    try:
        shard = Shard.parse(shard_spec) if shard_spec else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--shard") from None
    if shard is not None and run_id is None:
        raise click.UsageError("--shard needs --run-id: every shard of one run writes under the same run id")
    settings = _verify_settings(rank_weights, conflict_margin, half_life_days, authority_levels)
    store = corpus_store(store_dir)
    with reading(store):  # gc waits until the run has read its version and written its tables
        try:
            version = store.version_or_latest(version)
        except (StoreError, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc
        scorer = choice = None
        if not no_model:
            try:
                choice, scorer = chosen_scorer(
                    model,
                    language,
                    lambda: sample_store_texts(store, version),
                    f"corpus version {version}",
                    device=device,
                    backend=backend,
                    onnx_cache_dir=store.layout.onnx_dir,
                    batch_size=batch_size,
                    progress=True,
                    threads=threads,
                    checker=checker,
                    supported_label=supported_label,
                    checker_version=checker_version,
                )
            except ScorerUnavailable as exc:
                hint = (
                    ""
                    if model
                    else (
                        f"\n(chosen as the {exc.choice.reason}; --language en|zh|multi or --model overrides the choice)"
                    )
                )
                raise click.ClickException(f"NLI model: {exc.choice.describe()}\n{exc}{hint}") from exc
            click.echo(f"NLI model: {choice.describe()}")
            click.echo(f"{scorer.where}; checker: {scorer.checker}")
            if notice := licence_notice(choice.model, scorer.preset):
                click.echo(f"licence: {notice}", err=True)
        try:
            result, _ = verify_store(
                store,
                out_dir,
                version=version,
                answers_file=answers_file,
                scorer=scorer,
                settings=settings,
                run_id=run_id,
                shard=shard,
            )
        except (StoreError, AnswersFileError, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc
    run = result.run.row(0, named=True)
    click.echo(_summary(run, result.directory, choice))
    if shard is not None:
        click.echo(
            f"shard {shard.index}/{shard.count} of run {run['run_id']}: merge with `citekeeper verify-merge "
            f"--out {out_dir} --version {version} --run-id {run['run_id']}` once every shard has run"
        )
        return
    _fail_under(run, fail_under)


def _verify_settings(rank_weights: tuple[str, ...], margin: float, half_life_days: float, levels: tuple[str, ...]):
    """VerifySettings of the ranking options; a malformed --rank-weight or an unknown term is a usage error."""
    from verifiers.conflicts import ranking_settings
    from verifiers.engine import VerifySettings

    weights = {}
    for given in rank_weights:
        term, _, value = given.partition("=")
        try:
            weights[term.strip()] = float(value)
        except ValueError:
            raise click.BadParameter(
                f"{given!r} is not TERM=WEIGHT (e.g. authority=2)", param_hint="--rank-weight"
            ) from None
    try:
        return VerifySettings(ranking=ranking_settings(weights, margin, half_life_days, levels))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def _fail_under(run: dict, fail_under: float | None) -> None:
    rate = run["supported_rate"]
    if fail_under is not None and rate is not None and rate < fail_under:
        click.echo(f"FAIL: supported-claim rate {rate:.3f} is below --fail-under {fail_under}", err=True)
        raise SystemExit(1)


def _summary(run: dict, output_dir: Path, choice: ModelChoice | None = None) -> str:
    from verifiers.claim_metrics import status_counts

    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.1%}"

    model = (
        f"{run['model_id']} @ {run['model_revision']} ({run['backend']}, {run['checker']})"
        if run["model_id"]
        else "none (--no-model)"
    )
    lines = [
        f"verified {run['n_claims']} claim(s) of {run['n_answers']} answer(s) against corpus version "
        f"{run['corpus_version']}",
        f"model: {model}",
        *([f"  chosen: {choice.reason}"] if choice is not None else []),
        "statuses: " + ", ".join(f"{status} {n}" for status, n in status_counts(run).items()),
        f"supported rate {pct(run['supported_rate'])} | evidence coverage {pct(run['evidence_coverage'])} | "
        f"citation precision {pct(run['citation_precision'])} | locatability {pct(run['locatability'])} | "
        f"traceability {pct(run['traceability_rate'])}",
        f"conflicts decided by ranking {run['n_conflicts_decided']} ({pct(run['decided_by_ranking_rate'])}), "
        f"open {run['n_conflicts_open']} ({pct(run['open_conflict_rate'])}) | citations out of scope "
        f"{run['n_citations_out_of_scope']} ({pct(run['out_of_scope_rate'])})",
        f"pairs {run['n_pairs']} ({run['n_unique_pairs']} distinct): lexical {run['lexical_decisions']}, "
        f"cache hits {run['cache_hits']}, model calls {run['model_calls']}",
        f"output: {output_dir}",
    ]
    return "\n".join(lines)


@click.command("verify-merge", cls=OutputCommand)
@click.option("--out", "out_dir", required=True, type=OutputPath(DIRECTORY), help="The shards' --out.")
@click.option("--version", required=True, help="The shards' corpus version.")
@click.option("--run-id", required=True, help="The shards' --run-id.")
@click.option(
    "--fail-under",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="Exit 1 when the share of supported claims is below RATE.",
)
def verify_merge_command(out_dir: Path, version: str, run_id: str, fail_under: float | None) -> None:
    """Merge the shards of a sharded `verify` run into its run row (run.parquet), once every shard has run."""
    from citekeeper.layout import run_dir
    from verifiers.verify_output import ShardsMissing, merge_shards

    try:
        run = merge_shards(out_dir, version, run_id).row(0, named=True)
    except ShardsMissing as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(_summary(run, run_dir(out_dir, version, run_id)))
    _fail_under(run, fail_under)


COMMANDS = [verify_command, verify_merge_command]
