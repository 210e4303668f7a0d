"""NLI verification assets: every claim of the registered answers checked against a corpus version.

Writes <store>/verify/runs/corpus_version=<v>/run_id=<r>/{pairs,claims,answers,run}.parquet; the verdict
cache under <store>/verify/cache makes a re-run after a document update score only changed pairs.
"""

import hashlib
from datetime import UTC
from pathlib import Path

import dagster as dg
import polars as pl

from assets.partitions import corpus_versions
from assets.resources import IngestResource, StoreResource, VerifierResource
from citekeeper.layout import StoreLayout, latest_run_dir, run_dir, run_table_files

VERIFICATION = dg.AssetKey("verification")
CITATION_STATUS = dg.AssetKey("citation_status")
REPAIRED_ANSWERS = dg.AssetKey("repaired_answers")  # applied repairs are verified, their unchanged pairs from cache


def code_version(verifier: VerifierResource) -> str:
    """The thresholds/window settings and the checker settings the Definitions are built with, so changing any
    of them marks the asset stale."""
    setting = "|".join(
        [
            verifier.nli_model or "no-model",
            verifier.nli_backend,
            verifier.language,
            verifier.nli_checker or "detected",
            str(verifier.nli_supported_label),
            *([verifier.nli_checker_version] if verifier.nli_checker_version else []),  # unset: the hash stays
        ]
    )
    return "verify-" + hashlib.sha256(f"{verifier.verify_settings().thresholds()}|{setting}".encode()).hexdigest()[:12]


def with_code_version(assets: list, verifier: VerifierResource) -> list:
    """`assets` with the verification asset's code_version that of `verifier` (build_definitions' own)."""
    version = code_version(verifier)
    return [
        asset.map_asset_specs(lambda spec: spec.replace_attributes(code_version=version))
        if isinstance(asset, dg.AssetsDefinition) and VERIFICATION in asset.keys
        else asset
        for asset in assets
    ]


@dg.asset(
    name=VERIFICATION.path[-1],
    partitions_def=corpus_versions,
    deps=[CITATION_STATUS, REPAIRED_ANSWERS],
    code_version=code_version(VerifierResource()),  # the defaults'; build_definitions sets the configured one
    group_name="verification",
    description="Claim-level NLI verification of every registered answer against the corpus version.",
)
def verification(
    context: dg.AssetExecutionContext, store: StoreResource, verifier: VerifierResource, ingest: IngestResource
) -> dg.MaterializeResult:
    from verifiers.verify_store import verify_store

    corpus = store.corpus_store()
    scorer, choice = configured_scorer(context.log, verifier, corpus, context.partition_key)
    result, _ = verify_store(
        corpus,
        corpus.layout.runs_dir,
        version=context.partition_key,
        scorer=scorer,
        settings=verify_settings(verifier, ingest),
    )
    return dg.MaterializeResult(metadata=run_metadata(result.run, result.directory, verifier, choice))


def verify_settings(verifier: VerifierResource, ingest: IngestResource):
    """The verifier's settings, ranking authority by the vocabulary the documents were ingested with."""
    return verifier.verify_settings(ingest.parse_config().authority_levels)


def configured_scorer(log: dg.DagsterLogManager, verifier: VerifierResource, store, version: str):
    """(scorer, model choice) of the resource's NLI settings for `version`; (None, None) without a model."""
    from citekeeper.language import sample_store_texts
    from verifiers.checkers.loading import ScorerUnavailable, chosen_scorer
    from verifiers.checkers.presets import licence_notice

    if not verifier.nli_model:
        log.warning("event=no_nli_model tiers=anchoring,lexical reason='no NLI model configured (nli_model)'")
        return None, None
    # "auto": the default model of the language setting, or of the language detected from the version
    explicit = None if verifier.nli_model.strip().lower() == "auto" else verifier.nli_model
    try:
        choice, scorer = chosen_scorer(
            explicit,
            verifier.language,
            lambda: sample_store_texts(store, version),
            f"corpus version {version}",
            explicit="nli_model",
            device=verifier.nli_device,
            backend=verifier.nli_backend,
            onnx_cache_dir=store.layout.onnx_dir,
            threads=verifier.nli_threads,
            checker=verifier.nli_checker,
            supported_label=verifier.nli_supported_label,
            checker_version=verifier.nli_checker_version,
        )
    except ScorerUnavailable as exc:
        raise dg.Failure(f"{exc}\n(NLI model chosen: {exc.choice.reason})") from exc
    log.info(
        f"event=nli_model_chosen model={choice.model!r} language={choice.language} "
        f"setting={choice.setting} reason={choice.reason!r}"
    )
    if notice := licence_notice(choice.model, scorer.preset):
        log.warning(f"event=checker_licence notice={notice!r}")
    log.info(f"event=nli_device checker={scorer.checker} runs={scorer.where!r}")
    return scorer, choice


def run_metadata(run_row: pl.DataFrame, directory: Path, verifier: VerifierResource, choice) -> dict:
    """The materialization metadata of a verification run (its run row, unsharded or merged)."""
    from citekeeper.schema import SOURCE_MODEL_COUNTS
    from verifiers.claim_metrics import SOURCE_MODEL_RATES, status_counts

    run = run_row.row(0, named=True)
    return {
        "corpus_version": run["corpus_version"],
        "run_id": run["run_id"],
        "output_dir": str(directory),
        "model": f"{run['model_id']}@{run['model_revision']} ({run['backend']}, {run['precision']}, {run['checker']})"
        if run["model_id"]
        else "none",
        "model_choice": choice.reason if choice else "no NLI model configured (nli_model unset)",
        "language_setting": verifier.language,
        "language": (choice.language if choice else None) or "n/a",
        "thresholds": run["thresholds"],
        "status_counts": dg.MetadataValue.json(status_counts(run)),
        "n_claims": run["n_claims"],
        "supported_rate": run["supported_rate"] if run["supported_rate"] is not None else "n/a",
        "traceability_rate": run["traceability_rate"] if run["traceability_rate"] is not None else "n/a",
        # the source model: conflicts the ranking decided or left open, citations outside their answer's audience
        **{name: run[name] for name in SOURCE_MODEL_COUNTS},
        **{name: run[name] if run[name] is not None else "n/a" for name in SOURCE_MODEL_RATES},
        "model_calls": run["model_calls"],
        "cache_hits": run["cache_hits"],
        "lexical_decisions": run["lexical_decisions"],
        "duration_s": round(run["duration_s"], 3),
    }


@dg.asset_check(
    asset=VERIFICATION,
    partitions_def=corpus_versions,
    blocking=True,
    description="Every current claim has exactly one status, from the known set.",
)
def every_claim_has_one_status(context: dg.AssetCheckExecutionContext, store: StoreResource) -> dg.AssetCheckResult:
    from citekeeper.answers.store import AnswerStore
    from citekeeper.schema import CLAIM_STATUSES

    run_dir = latest_run_dir(StoreLayout(store.store_path).runs_dir, context.partition_key)
    if run_dir is None:
        return dg.AssetCheckResult(passed=False, metadata={"reason": "no verification run for this version"})
    verdicts = pl.scan_parquet(run_table_files(run_dir, "claims")).select("answer_id", "claim_id", "status").collect()
    expected = AnswerStore(store.store_path).claims().select("answer_id", "claim_id")
    counts = expected.join(
        verdicts.filter(pl.col("status").is_in(CLAIM_STATUSES)).group_by("answer_id", "claim_id").len(),
        on=["answer_id", "claim_id"],
        how="left",
    ).with_columns(pl.col("len").fill_null(0))
    bad = counts.filter(pl.col("len") != 1)
    unknown = verdicts.filter(~pl.col("status").is_in(CLAIM_STATUSES)).height
    return dg.AssetCheckResult(
        passed=bad.is_empty() and unknown == 0,
        metadata={
            "n_claims": expected.height,
            "n_without_exactly_one_status": bad.height,
            "n_unknown_status": unknown,
            "run_dir": str(run_dir),
        },
    )


# ---------------------------------------------------------------------- verification sharded by answer


def sharded_run_id(context: dg.OpExecutionContext) -> str:
    """One verification run id for every step of a Dagster run (each shard step may be its own process or pod):
    the run's creation time, in the form of verifiers.run_tally.new_run_id, so runs sort by time."""
    record = context.instance.get_run_record_by_id(context.run_id)
    assert record is not None, "the step runs in this run"
    created = record.create_timestamp
    return f"{created.astimezone(UTC):%Y%m%dT%H%M%S%f}Z-{context.run_id[:8]}"


def verify_shard_op(index: int, n_shards: int) -> dg.OpDefinition:
    """The step verifying answer shard `index` of `n_shards` (static: an answer's shard is a hash of its id mod n)."""

    @dg.op(
        name=f"verify_answer_shard_{index}",
        out=dg.Out(dg.Nothing),
        description=f"Verify answer shard {index} of {n_shards} against the partition's corpus version.",
    )
    def verify_answer_shard(
        context: dg.OpExecutionContext, store: StoreResource, verifier: VerifierResource, ingest: IngestResource
    ) -> None:
        from citekeeper.sharding import Shard
        from verifiers.verify_store import verify_store

        corpus, version = store.corpus_store(), context.partition_key
        scorer, _ = configured_scorer(context.log, verifier, corpus, version)
        result, _ = verify_store(
            corpus,
            corpus.layout.runs_dir,
            version=version,
            scorer=scorer,
            settings=verify_settings(verifier, ingest),
            run_id=sharded_run_id(context),
            shard=Shard(index, n_shards),
        )
        run = result.run.row(0, named=True)
        context.log.info(
            f"event=verify_shard_done version={version} shard={index}/{n_shards} "
            f"answers={run['n_answers']} claims={run['n_claims']} model_calls={run['model_calls']}"
        )

    return verify_answer_shard


def merge_shards_op(n_shards: int) -> dg.OpDefinition:
    @dg.op(
        name="merge_verification_shards",
        ins={f"shard_{index}": dg.In(dg.Nothing) for index in range(n_shards)},
        description="Merge the shards' run metrics into the run row: the partition verification[version].",
    )
    def merge_verification_shards(
        context: dg.OpExecutionContext, store: StoreResource, verifier: VerifierResource
    ) -> None:
        from verifiers.verify_output import merge_shards

        runs_dir, run_id = StoreLayout(store.store_path).runs_dir, sharded_run_id(context)
        run = merge_shards(runs_dir, context.partition_key, run_id)
        directory = run_dir(runs_dir, context.partition_key, run_id)
        context.log_event(
            dg.AssetMaterialization(
                VERIFICATION, partition=context.partition_key, metadata=run_metadata(run, directory, verifier, None)
            )
        )

    return merge_verification_shards
