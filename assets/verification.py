"""NLI verification assets: every claim of the registered answers checked against a corpus version.

Writes <store>/verify/runs/corpus_version=<v>/run_id=<r>/{pairs,claims,answers,run}.parquet; the verdict
cache under <store>/verify/cache makes a re-run after a document update score only changed pairs.
"""

import hashlib
import os
from pathlib import Path

import dagster as dg
import polars as pl

from assets.partitions import corpus_versions
from pipelines.resources import CitekeeperConfig
from verifiers.verify import VerifySettings, latest_run_dir, verify_dir

VERIFICATION = dg.AssetKey("verification")
CITATION_STATUS = dg.AssetKey("citation_status")

# code_version: the thresholds/window settings and the model the Definitions configure (the same env vars as
# pipelines/definitions.py), so changing either marks the asset stale.
_MODEL_SETTING = f"{os.environ.get('CITEKEEPER_NLI_MODEL') or 'no-model'}|{os.environ.get('CITEKEEPER_NLI_BACKEND', 'torch')}"
CODE_VERSION = "verify-" + hashlib.sha256(f"{VerifySettings().key()}|{_MODEL_SETTING}".encode()).hexdigest()[:12]


def runs_dir(store_dir: Path | str) -> Path:
    """Where the verification asset writes its runs."""
    return verify_dir(store_dir) / "runs"


@dg.asset(
    partitions_def=corpus_versions,
    deps=[CITATION_STATUS],
    code_version=CODE_VERSION,
    group_name="verification",
    description="Claim-level NLI verification of every registered answer against the corpus version.",
)
def verification(context: dg.AssetExecutionContext, citekeeper: CitekeeperConfig) -> dg.MaterializeResult:
    from verifiers.nli import ModelUnavailable, load_scorer
    from verifiers.verify import verify_store

    version = context.partition_key
    scorer = None
    if citekeeper.nli_model:
        try:
            scorer = load_scorer(citekeeper.nli_model, citekeeper.nli_backend,
                                 onnx_cache_dir=verify_dir(citekeeper.store_path) / "onnx")  # fmt: skip
        except ModelUnavailable as exc:
            raise dg.Failure(str(exc)) from exc
    else:
        context.log.warning("event=no_nli_model tiers=anchoring,lexical reason='no NLI model configured (nli_model)'")
    result, paths = verify_store(citekeeper.corpus_store(), runs_dir(citekeeper.store_path), version=version, scorer=scorer)
    run = result.run.row(0, named=True)
    return dg.MaterializeResult(
        metadata={
            "corpus_version": version,
            "run_id": run["run_id"],
            "output_dir": str(paths["claims"].parent),
            "model": f"{run['model_id']}@{run['model_revision']} ({run['backend']})" if run["model_id"] else "none",
            "thresholds": run["thresholds"],
            "status_counts": dg.MetadataValue.json(result.status_counts()),
            "n_claims": run["n_claims"],
            "supported_rate": run["supported_rate"] if run["supported_rate"] is not None else "n/a",
            "traceability_rate": run["traceability_rate"] if run["traceability_rate"] is not None else "n/a",
            "model_calls": run["model_calls"],
            "cache_hits": run["cache_hits"],
            "lexical_decisions": run["lexical_decisions"],
            "duration_s": round(run["duration_s"], 3),
        }
    )


@dg.asset_check(asset=VERIFICATION, partitions_def=corpus_versions, blocking=True,
                description="Every current claim has exactly one status, from the known set.")  # fmt: skip
def every_claim_has_one_status(
    context: dg.AssetCheckExecutionContext, citekeeper: CitekeeperConfig
) -> dg.AssetCheckResult:
    from citekeeper.answer_store import AnswerStore
    from citekeeper.schema import CLAIM_STATUSES

    run_dir = latest_run_dir(runs_dir(citekeeper.store_path), context.partition_key)
    if run_dir is None:
        return dg.AssetCheckResult(passed=False, metadata={"reason": "no verification run for this version"})
    verdicts = pl.read_parquet(run_dir / "claims.parquet", columns=["answer_id", "claim_id", "status"])
    expected = AnswerStore(citekeeper.store_path).claims().select("answer_id", "claim_id")
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
