"""Conflicts decided as the source model says (issue 31; docs/verification.md, "Conflicts"): each evidence that
takes a side on a claim sentence is ranked by S(e,c) = w_a*A + w_t*T + w_s*G + w_v*V - w_x*X; a sentence one
citation entails and another contradicts takes the side whose best evidence leads by the margin, else its
conflict stays open. Reasons name the sources (never an aggregate_only one) and never quote their text."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

from citekeeper.scope import aggregate
from citekeeper.sources import DEFAULT_AUTHORITY_LEVELS, authority_weight
from verifiers.claim_metrics import CLAIM_KEY

SENTENCE_KEY = [*CLAIM_KEY, "sentence_index"]
STANCES = ("entailment", "contradiction")  # the labels that take a side, and so are ranked
# The ranking terms as NLI_PAIRS records them, with the weight each is multiplied by (the penalty subtracted).
TERMS = {
    "authority": "w_authority",
    "time": "w_time",
    "scope": "w_scope",
    "support": "w_support",
    "penalty": "w_penalty",
}
_DAY_US = 86_400_000_000
# A lead equal to the margin decides; float sums of the weighted terms are exact to far less than this.
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class RankingSettings:
    """The weights of S(e,c), the lead that decides a conflict, the half-life of a dated source without a
    version to match, and the authority vocabulary (most authoritative first)."""

    w_authority: float = 1.0
    w_time: float = 0.5
    w_scope: float = 0.5
    w_support: float = 0.5
    w_penalty: float = 0.5
    margin: float = 0.1
    half_life_days: float = 365.0
    authority_levels: tuple[str, ...] = DEFAULT_AUTHORITY_LEVELS

    def __post_init__(self) -> None:
        if self.half_life_days <= 0:
            raise ValueError(f"half_life_days must be more than 0, not {self.half_life_days}")
        if self.margin < 0:
            raise ValueError(f"the conflict margin must be 0 or more, not {self.margin}")
        if not self.authority_levels or len(set(self.authority_levels)) != len(self.authority_levels):
            raise ValueError(
                f"authority levels must be named once each, most authoritative first: {list(self.authority_levels)}"
            )

    def key(self) -> str:
        weights = ",".join(f"{term}={getattr(self, weight)}" for term, weight in TERMS.items())
        authority = ">".join(self.authority_levels)
        return f"rank({weights};margin={self.margin};half_life={self.half_life_days}d;authority={authority})"


def ranking_settings(
    weights: Mapping[str, float], margin: float, half_life_days: float, authority_levels: tuple[str, ...]
) -> RankingSettings:
    """RankingSettings from weights named by term (authority, time, scope, support, penalty; an unnamed one keeps
    its default), as the CLI and the Dagster resource take them. ValueError names an unknown term."""
    unknown = sorted(set(weights) - set(TERMS))
    if unknown:
        raise ValueError(f"unknown ranking term(s) {unknown}: weigh {', '.join(TERMS)}")
    return RankingSettings(
        **{TERMS[term]: float(weight) for term, weight in weights.items()},
        margin=margin,
        half_life_days=half_life_days,
        authority_levels=tuple(authority_levels),
    )


# ------------------------------------------------------------------------------------------ the terms


def authority_term(levels: tuple[str, ...]) -> pl.Expr:
    """A(e): the document's authority level's weight (citekeeper.sources.authority_weight); 0 for none."""
    weights = {level: authority_weight(level, levels) for level in levels}
    return pl.col("authority").replace_strict(weights, default=0.0, return_dtype=pl.Float64).fill_null(0.0)


def time_term(half_life_days: float) -> pl.Expr:
    """T(e,c): 1 or 0 as the document's source_version is or is not the version the answer asks about, when both
    are known; else the halving of a dated document's weight every half-life before the answer was given; 0 for
    a date after it, or none."""
    versions_known = pl.col("about_version").is_not_null() & pl.col("source_version").is_not_null()
    dated = pl.coalesce("updated_at", "published_at")
    age_days = (pl.col("answer_created_at") - dated).dt.total_microseconds() / _DAY_US
    return (
        pl.when(versions_known)
        .then((pl.col("source_version") == pl.col("about_version")).cast(pl.Float64))
        .when(age_days >= 0)
        .then(pl.lit(0.5).pow(age_days / half_life_days))
        .otherwise(0.0)
    )


def scope_term() -> pl.Expr:
    """G(e,c): the share of the answer's scope labels the document carries; 0 when the answer names none."""
    asked = pl.col("answer_scope_labels").list.unique()
    shared = pl.col("scope_labels").list.set_intersection(asked).list.len().fill_null(0)
    return pl.when(asked.list.len() > 0).then(shared / asked.list.len()).otherwise(0.0).cast(pl.Float64)


def support_term() -> pl.Expr:
    """V(e,c): the verifier's confidence in the side the evidence takes: the lexical score of a lexical decision,
    else p_entailment of an entailment, p_contradiction of a contradiction."""
    return (
        pl.when(pl.col("tier") == "lexical")
        .then(pl.col("score"))
        .when(pl.col("label") == "entailment")
        .then(pl.col("p_entailment"))
        .otherwise(pl.col("p_contradiction"))
        .fill_null(0.0)
    )


def penalty_term() -> pl.Expr:
    """X(e): 1 when the document was updated after the citation retrieved it (the answer's created_at when the
    citation has no retrieved_at), or the citation drifted; else 0."""
    retrieved = pl.coalesce("retrieved_at", "answer_created_at")
    changed = (pl.col("updated_at") > retrieved).fill_null(False) | (pl.col("citation_status") == "drifted").fill_null(
        False
    )
    return changed.cast(pl.Float64)


def rank_pairs(pairs: pl.DataFrame, settings: RankingSettings) -> pl.DataFrame:
    """`pairs` with the rank_* columns of NLI_PAIRS: the terms and S of each pair that takes a side, null for the
    others (no evidence, neutral, unverified)."""
    terms = {
        "rank_authority": authority_term(settings.authority_levels),
        "rank_time": time_term(settings.half_life_days),
        "rank_scope": scope_term(),
        "rank_support": support_term(),
        "rank_penalty": penalty_term(),
    }
    stance = pl.col("label").is_in(STANCES)
    ranked = pairs.with_columns(pl.when(stance).then(term).alias(name) for name, term in terms.items())
    weighted = [
        getattr(settings, weight) * pl.col(f"rank_{term}") for term, weight in TERMS.items() if term != "penalty"
    ]
    return ranked.with_columns(rank_score=pl.sum_horizontal(weighted) - settings.w_penalty * pl.col("rank_penalty"))


# ------------------------------------------------------------------------------------------ the decision


def decide_sentences(pairs: pl.DataFrame, settings: RankingSettings) -> pl.DataFrame:
    """One row per claim sentence some citation entails and another contradicts: `conflict` decided | open,
    `decided_label` (entailed | contradicted; null when open), `conflict_margin` (the best entailing minus the best
    contradicting rank_score) and `conflict_reason`. The best evidence of a side is its highest rank_score (ties:
    the first citation)."""
    best = (
        pairs.filter(pl.col("label").is_in(STANCES))
        .sort([*SENTENCE_KEY, "rank_score", "citation_index"], descending=[False] * len(SENTENCE_KEY) + [True, False])
        .group_by([*SENTENCE_KEY, "label"], maintain_order=True)
        .first()
        .select(*SENTENCE_KEY, "label", "rank_score", *(f"rank_{t}" for t in TERMS), *_SOURCE_NAME_COLUMNS)
    )
    sides = [best.filter(pl.col("label") == label).drop("label") for label in STANCES]
    both = sides[0].join(sides[1], on=SENTENCE_KEY, suffix="_c")
    lead = pl.col("rank_score") - pl.col("rank_score_c")
    decided = lead.abs() >= settings.margin - _TOLERANCE
    return both.with_columns(
        conflict=pl.when(decided).then(pl.lit("decided")).otherwise(pl.lit("open")),
        decided_label=pl.when(decided).then(
            pl.when(lead > 0).then(pl.lit("entailed")).otherwise(pl.lit("contradicted"))
        ),
        conflict_margin=lead,
        conflict_reason=pl.when(decided).then(_decided_reason(settings)).otherwise(_open_reason(settings)),
    ).select(*SENTENCE_KEY, "conflict", "decided_label", "conflict_margin", "conflict_reason")


def claim_conflicts(decisions: pl.DataFrame) -> pl.DataFrame:
    """Per claim with a conflicting sentence: `conflict` (open when any sentence's is), the conflict_margin and
    reason of its least decided sentence, and how many sentences conflicted."""
    return (
        decisions.sort([*CLAIM_KEY, pl.col("conflict_margin").abs()])
        .group_by(CLAIM_KEY, maintain_order=True)
        .agg(
            pl.when((pl.col("conflict") == "open").any())
            .then(pl.lit("open"))
            .otherwise(pl.lit("decided"))
            .alias("conflict"),
            pl.col("conflict_margin").first(),
            pl.col("conflict_reason").first(),
            pl.len().cast(pl.Int32).alias("n_conflicting"),
        )
        .with_columns(
            pl.when(pl.col("n_conflicting") > 1)
            .then(pl.format("{} (and {} more conflicting sentence(s))", "conflict_reason", pl.col("n_conflicting") - 1))
            .otherwise(pl.col("conflict_reason"))
            .alias("conflict_reason")
        )
    )


# ------------------------------------------------------------------------------------------ the reasons

# What a reason may say of an evidence's document: never its text; for an aggregate_only one, nothing at all.
_SOURCE_NAME_COLUMNS = [
    "authority",
    "title",
    "source_path",
    "source_version",
    "updated_at",
    "published_at",
    "access_scope",
]
AGGREGATE_SOURCE = "an aggregate_only source"


def _aggregate(side: str) -> pl.Expr:
    return aggregate(f"access_scope{side}")  # fail closed: a value that is no level is aggregate_only


def _who(side: str) -> pl.Expr:
    """`official_spec "Title"` (its path when it has no title; no level when it has no authority)."""
    name = pl.coalesce(
        pl.format('"{}"', pl.col(f"title{side}")), pl.col(f"source_path{side}"), pl.lit("an unnamed document")
    )
    return pl.concat_str(pl.col(f"authority{side}"), name, separator=" ", ignore_nulls=True)


def _when(side: str) -> pl.Expr:
    """`updated 2024-05-01`, `published 2023-01-02`, or `undated`."""
    return (
        pl.when(pl.col(f"updated_at{side}").is_not_null())
        .then(pl.format("updated {}", pl.col(f"updated_at{side}").dt.date()))
        .when(pl.col(f"published_at{side}").is_not_null())
        .then(pl.format("published {}", pl.col(f"published_at{side}").dt.date()))
        .otherwise(pl.lit("undated"))
    )


def _version(side: str) -> pl.Expr:
    return pl.format("version {}", pl.col(f"source_version{side}")).fill_null("no stated version")


def _described(side: str) -> pl.Expr:
    """`official_spec "API" (version v2, updated 2024-05-01)`."""
    plain = pl.format("{} ({}, {})", _who(side), _version(side), _when(side))
    return pl.when(_aggregate(side)).then(pl.lit(AGGREGATE_SOURCE)).otherwise(plain)


def _says(side: str, verdict: str) -> pl.Expr:
    """Step 5 of the design: `official_spec "API" in version v1 (updated 2024-05-01) says the claim holds`."""
    plain = pl.format("{} in {} ({}) says {}", _who(side), _version(side), _when(side), pl.lit(verdict))
    return pl.when(_aggregate(side)).then(pl.lit(f"{AGGREGATE_SOURCE} says {verdict}")).otherwise(plain)


def _deciding_term(settings: RankingSettings) -> pl.Expr:
    """The term whose weighted difference between the two sides' best evidence contributes most to the lead."""
    sign = pl.when(pl.col("rank_score") >= pl.col("rank_score_c")).then(1.0).otherwise(-1.0)
    shares = [
        sign
        * (-1.0 if term == "penalty" else 1.0)
        * getattr(settings, weight)
        * (pl.col(f"rank_{term}") - pl.col(f"rank_{term}_c"))
        for term, weight in TERMS.items()
    ]
    return pl.concat_list(shares).list.arg_max().replace_strict(dict(enumerate(TERMS)), return_dtype=pl.String)


def _decided_reason(settings: RankingSettings) -> pl.Expr:
    entails_wins = pl.col("rank_score") > pl.col("rank_score_c")
    winner = pl.when(entails_wins).then(_described("")).otherwise(_described("_c"))
    loser = pl.when(entails_wins).then(_described("_c")).otherwise(_described(""))
    side = pl.when(entails_wins).then(pl.lit("supporting")).otherwise(pl.lit("contradicting"))
    return pl.format(
        "conflict decided by ranking: the {} evidence of {} outranks {} ({} against {}; decided by {})",
        side,
        winner,
        loser,
        _rounded("rank_score", "rank_score_c", entails_wins),
        _rounded("rank_score_c", "rank_score", entails_wins),
        _deciding_term(settings),
    )


def _rounded(if_entails: str, otherwise: str, entails_wins: pl.Expr) -> pl.Expr:
    return pl.when(entails_wins).then(pl.col(if_entails)).otherwise(pl.col(otherwise)).round(3).cast(pl.String)


def _open_reason(settings: RankingSettings) -> pl.Expr:
    return pl.format(
        "open conflict: {}; {} (rank {} against {}, a lead under the margin {})",
        _says("", "the claim holds"),
        _says("_c", "it does not"),
        pl.col("rank_score").round(3).cast(pl.String),
        pl.col("rank_score_c").round(3).cast(pl.String),
        pl.lit(settings.margin),
    )
