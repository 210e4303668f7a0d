"""Claim statuses and answer metrics, aggregated from pair verdicts as polars expressions: one status per claim
with its deciding tier and reason, and per answer and run the four ratio metrics with their counts and
traceability (definitions: docs/verification.md)."""

from __future__ import annotations

from datetime import datetime

import polars as pl

from citekeeper.schema import CLAIM_STATUSES, SOURCE_MODEL_COUNTS
from verifiers.anchoring import ANCHOR_OUT_OF_SCOPE
from verifiers.lexical import STOPWORDS, tokens

CLAIM_KEY = ["answer_id", "revision", "claim_id"]


def citation_verdicts(pairs: pl.DataFrame) -> pl.DataFrame:
    """Per citation: does its evidence entail at least one sentence of its claim; is it locatable."""
    return pairs.group_by([*CLAIM_KEY, "citation_id"]).agg(
        (pl.col("label") == "entailment").any().alias("supports"),
        pl.col("locatable").first(),
        pl.col("evidence_text").is_not_null().first().alias("has_evidence"),
        pl.when(pl.col("anchor") == ANCHOR_OUT_OF_SCOPE)
        .then(pl.col("anchor"))
        .otherwise(pl.coalesce("citation_status", "anchor"))
        .first()
        .alias("evidence_finding"),
        (pl.col("anchor") == ANCHOR_OUT_OF_SCOPE).first().alias("out_of_scope"),
    )


def sentence_labels(pairs: pl.DataFrame, decisions: pl.DataFrame) -> pl.DataFrame:
    """Best support of each claim sentence over all its citations; a sentence one citation entails and another
    contradicts takes the side the ranking decided (verifiers.conflicts.decide_sentences), else is conflicted."""
    entail, contra = pl.col("label") == "entailment", pl.col("label") == "contradiction"
    per_sentence = pairs.group_by([*CLAIM_KEY, "sentence_index"]).agg(
        entail.any().alias("entailed"),
        (entail & pl.col("anchored")).any().alias("entailed_anchored"),
        contra.any().alias("contradicted"),
        (pl.col("label") == "unverified").any().alias("undecided"),
        (pl.col("tier") == "nli").any().alias("by_nli"),
        pl.col("score").max().alias("support"),
        pl.col("p_entailment").max(),
        pl.col("p_contradiction").max(),
    )
    decided = decisions.select(*CLAIM_KEY, "sentence_index", "decided_label")
    return per_sentence.join(decided, on=[*CLAIM_KEY, "sentence_index"], how="left").with_columns(
        pl.when(pl.col("entailed") & pl.col("contradicted"))
        .then(pl.coalesce("decided_label", pl.lit("conflicted")))
        .when(pl.col("entailed"))
        .then(pl.lit("entailed"))
        .when(pl.col("contradicted"))
        .then(pl.lit("contradicted"))
        .when(pl.col("undecided"))
        .then(pl.lit("unverified"))
        .otherwise(pl.lit("not_entailed"))
        .alias("sentence_label")
    )


def aggregate_claims(
    claims: pl.DataFrame, sentences: pl.DataFrame, pairs: pl.DataFrame, decisions: pl.DataFrame, conflicts: pl.DataFrame
) -> pl.DataFrame:
    """One status per claim, with its deciding tier, probabilities and reason. `decisions` and `conflicts`: the
    conflicting sentences' and claims' rows of verifiers.conflicts (decide_sentences, claim_conflicts)."""
    label = pl.col("sentence_label")
    per_claim = (
        sentence_labels(pairs, decisions)
        .group_by(CLAIM_KEY)
        .agg(
            *(
                (label == name).sum().cast(pl.Int32).alias(f"n_{name}")
                for name in ("entailed", "conflicted", "contradicted", "unverified")
            ),
            pl.col("entailed_anchored").sum().cast(pl.Int32).alias("n_traceable"),
            pl.col("by_nli").any(),
            pl.when(pl.col("support").is_null().any())
            .then(None)
            .otherwise(pl.col("support").min())
            .alias("support_score"),
            pl.col("p_entailment").min(),
            pl.col("p_contradiction").max(),
        )
    )
    per_citation = (
        citation_verdicts(pairs)
        .group_by(CLAIM_KEY)
        .agg(
            pl.len().cast(pl.Int32).alias("n_citations"),
            pl.col("supports").sum().cast(pl.Int32).alias("n_citations_supporting"),
            pl.col("locatable").sum().cast(pl.Int32).alias("n_citations_locatable"),
            pl.col("out_of_scope").sum().cast(pl.Int32).alias("n_citations_out_of_scope"),
            pl.col("has_evidence").any(),
            pl.col("evidence_finding").unique().sort().str.join(", ").alias("findings"),
        )
    )
    n_sentences = sentences.group_by(CLAIM_KEY).len("n_sentences")
    frame = (
        claims.select([*CLAIM_KEY, "claim_index", "text"])
        .join(n_sentences, on=CLAIM_KEY, how="left")
        .join(per_claim, on=CLAIM_KEY, how="left")
        .join(per_citation, on=CLAIM_KEY, how="left")
        .join(conflicts.select(*CLAIM_KEY, "conflict", "conflict_margin", "conflict_reason"), on=CLAIM_KEY, how="left")
        .with_columns(
            pl.col(
                "n_citations", "n_citations_supporting", "n_citations_locatable", "n_citations_out_of_scope"
            ).fill_null(0),
            pl.col("n_entailed").fill_null(0).alias("n_sentences_supported"),
            pl.col("has_evidence").fill_null(False),
            pl.col("text").map_elements(_needs_evidence, return_dtype=pl.Boolean).alias("needs_evidence"),
        )
    )
    return frame.with_columns(status=_status_expr(), tier=_tier_expr()).with_columns(
        reason=_reason_expr(),
        traceable=(pl.col("status") == "supported") & (pl.col("n_traceable") == pl.col("n_sentences")),
    )


def _needs_evidence(text: str) -> bool:
    return any(token not in STOPWORDS for token in tokens(text))


def _status_expr() -> pl.Expr:
    n = pl.col
    return (
        pl.when(n("n_citations") == 0)
        .then(pl.lit("uncited"))
        .when(~n("has_evidence"))
        .then(pl.lit("unsupported"))
        .when(n("n_conflicted") > 0)
        .then(pl.lit("conflicted"))
        .when(n("n_contradicted") > 0)
        .then(pl.lit("contradicted"))
        .when(n("n_unverified") > 0)
        .then(pl.lit("unverified"))
        .when(n("n_entailed") == n("n_sentences"))
        .then(pl.lit("supported"))
        .when(n("n_entailed") > 0)
        .then(pl.lit("partially_supported"))
        .otherwise(pl.lit("unsupported"))
    )


def _tier_expr() -> pl.Expr:
    return (
        pl.when(pl.col("n_citations") == 0)
        .then(pl.lit("none"))
        .when(~pl.col("has_evidence"))
        .then(pl.lit("anchoring"))
        .when(pl.col("by_nli"))
        .then(pl.lit("nli"))
        .otherwise(pl.lit("lexical"))
    )


def _reason_expr() -> pl.Expr:
    """The status's reason; a conflict the ranking decided adds who outranked whom."""
    decided = pl.col("conflict") == "decided"
    return (
        pl.when(decided)
        .then(pl.format("{}; {}", _status_reason(), pl.col("conflict_reason")))
        .otherwise(_status_reason())
    )


def _status_reason() -> pl.Expr:
    n, status = pl.col, pl.col("status")
    of_n = pl.format("{} of {} sentence(s)", n("n_entailed"), n("n_sentences"))
    p_entail = n("p_entailment").round(3).cast(pl.String).fill_null("n/a")
    p_contra = n("p_contradiction").round(3).cast(pl.String).fill_null("n/a")
    return (
        pl.when(status == "uncited")
        .then(pl.lit("the claim has no citations"))
        .when(~n("has_evidence"))
        .then(pl.format("none of its {} citation(s) resolves to evidence: {}", n("n_citations"), n("findings")))
        .when(status == "conflicted")
        .then(n("conflict_reason"))
        .when(status == "contradicted")
        .then(
            pl.format(
                "{} sentence(s) contradicted by cited evidence (p_contradiction {})", n("n_contradicted"), p_contra
            )
        )
        .when(status == "unverified")
        .then(
            pl.format("{} sentence(s) not decided by the lexical tier and no NLI model was loaded", n("n_unverified"))
        )
        .when(status == "supported")
        .then(
            pl.format(
                "all {} sentence(s) entailed by cited evidence ({} tier; weakest support {})",
                n("n_sentences"),
                n("tier"),
                n("support_score").round(3).cast(pl.String).fill_null("n/a"),
            )
        )
        .when(status == "partially_supported")
        .then(pl.format("{} entailed, the rest not supported", of_n))
        .otherwise(
            pl.format("no sentence entailed by its {} citation(s) (best p_entailment {})", n("n_citations"), p_entail)
        )
    )


# ------------------------------------------------------------------------------------------ metrics


def _ratio(numerator: str, denominator: str) -> pl.Expr:
    return pl.when(pl.col(denominator) > 0).then(pl.col(numerator) / pl.col(denominator)).otherwise(None)


METRICS = {
    "evidence_coverage": _ratio("n_covered", "n_needing_evidence"),
    "citation_precision": _ratio("n_citations_supporting", "n_citations"),
    "claim_completeness": _ratio("n_supported", "n_claims"),
    "locatability": _ratio("n_citations_locatable", "n_citations"),
    # the source model (issue 31): claims whose conflict the ranking decided, or left open; citations of documents
    # outside their answer's audience
    "decided_by_ranking_rate": _ratio("n_conflicts_decided", "n_claims"),
    "open_conflict_rate": _ratio("n_conflicts_open", "n_claims"),
    "out_of_scope_rate": _ratio("n_citations_out_of_scope", "n_citations"),
}
SOURCE_MODEL_RATES = ("decided_by_ranking_rate", "open_conflict_rate", "out_of_scope_rate")
_COUNTS = [
    "n_claims",
    "n_needing_evidence",
    "n_covered",
    "n_citations",
    "n_citations_supporting",
    "n_citations_locatable",
    *SOURCE_MODEL_COUNTS,
]


def answer_metrics(claims: pl.DataFrame) -> pl.DataFrame:
    """Per answer: status counts, the four ratio metrics (with their counts) and traceability."""
    status = pl.col("status")
    covered = pl.col("needs_evidence") & status.is_in(["supported", "partially_supported"])
    per_answer = claims.group_by("answer_id", "revision").agg(
        pl.len().alias("n_claims"),
        *((status == s).sum().cast(pl.Int64).alias(f"n_{s}") for s in CLAIM_STATUSES),
        pl.col("needs_evidence").sum().cast(pl.Int64).alias("n_needing_evidence"),
        covered.sum().cast(pl.Int64).alias("n_covered"),
        pl.col("n_citations").sum().cast(pl.Int64),
        pl.col("n_citations_supporting").sum().cast(pl.Int64),
        pl.col("n_citations_locatable").sum().cast(pl.Int64),
        (pl.col("conflict") == "decided").sum().cast(pl.Int64).alias("n_conflicts_decided"),
        (pl.col("conflict") == "open").sum().cast(pl.Int64).alias("n_conflicts_open"),
        pl.col("n_citations_out_of_scope").sum().cast(pl.Int64),
        pl.col("traceable").all(),
    )
    return per_answer.with_columns(**METRICS).sort("answer_id")


def status_counts(run: dict) -> dict[str, int]:
    """Claims per status, from a run row (NLI_RUNS, as a dict)."""
    return {status: run[f"n_{status}"] for status in CLAIM_STATUSES}


def run_totals_columns() -> list[str]:
    return [*_COUNTS, *(f"n_{s}" for s in CLAIM_STATUSES), "n_answers", "n_traceable"]


def run_totals(answers: pl.DataFrame) -> pl.DataFrame:
    """One row: the answer-level counts of answer_metrics summed. Totals of batches of answers add up."""
    return answers.select(
        *(pl.col(c).sum() for c in _COUNTS),
        *(pl.col(f"n_{s}").sum() for s in CLAIM_STATUSES),
        pl.len().alias("n_answers"),
        pl.col("traceable").sum().alias("n_traceable"),
    )


def run_summary(totals: pl.DataFrame, stats: dict, started_at: datetime, duration_s: float) -> pl.DataFrame:
    """The run's metrics from the run_totals rows of its batches: counts summed, the same ratio metrics over
    them, traceability rate."""
    totals = totals.sum().with_columns(
        pl.when(pl.col("n_answers") > 0).then(pl.col("n_traceable") / pl.col("n_answers")).alias("traceability_rate")
    )
    return totals.with_columns(
        **METRICS,
        supported_rate=_ratio("n_supported", "n_claims"),
        started_at=pl.lit(started_at),
        duration_s=pl.lit(duration_s),
        **{name: pl.lit(value, pl.Int64) for name, value in stats.items()},
    )
