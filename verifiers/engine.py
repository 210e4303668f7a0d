"""The verification engine: per (claim sentence, cited evidence) pair, the lexical fast path, then the NLI
checker, with the verdict cache in between. Takes frames, needs no store (verifiers.verify_store runs it on one)."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from citekeeper.identity import text_hash
from citekeeper.schema import CLAIM_STATUSES, NLI_ANSWERS, NLI_CLAIMS, NLI_PAIRS, NLI_RUNS
from citekeeper.tables import conform, counts_of
from citekeeper.text import sentence_spans
from verifiers.checkers.base import CheckerError, Scorer, model_key
from verifiers.claim_metrics import CLAIM_KEY, aggregate_claims, answer_metrics, run_totals
from verifiers.conflicts import RankingSettings, claim_conflicts, decide_sentences, rank_pairs
from verifiers.lexical import LexicalSettings, lexical_verdict
from verifiers.run_tally import RunTally
from verifiers.spans import claim_sentences, resolve_spans, with_citation_columns
from verifiers.verdict_cache import VerdictCache, no_hits

PAIR_KEY = ["sentence", "evidence_text"]
TABLES = {"pairs": NLI_PAIRS, "claims": NLI_CLAIMS, "answers": NLI_ANSWERS, "run": NLI_RUNS}


@dataclass(frozen=True)
class VerifySettings:
    entail_threshold: float = 0.5  # a pair is entailed when its best window reaches this p_entailment
    contradict_threshold: float = 0.5  # ... contradicted when, not entailed, a window reaches this p_contradiction
    claim_token_reserve: int = 96  # tokens of the model limit kept for the claim sentence; the rest is evidence
    window_overlap_sentences: int = 1
    lexical: LexicalSettings = field(default_factory=LexicalSettings)
    ranking: RankingSettings = field(default_factory=RankingSettings)  # how conflicts are decided

    def key(self) -> str:
        """The settings a pair's verdict depends on: the verdict cache's key (the ranking is not: it changes no
        pair's probabilities)."""
        return (
            f"entail>={self.entail_threshold};contradict>={self.contradict_threshold};"
            f"claim_reserve={self.claim_token_reserve};overlap={self.window_overlap_sentences};{self.lexical.key()}"
        )

    def thresholds(self) -> str:
        """Every setting, as the `thresholds` column records it: the verdict key and the ranking's."""
        return f"{self.key()};{self.ranking.key()}"


@dataclass
class VerifyResult:
    pairs: pl.DataFrame
    claims: pl.DataFrame
    answers: pl.DataFrame
    run: pl.DataFrame
    stats: dict[str, int]

    def status_counts(self) -> dict[str, int]:
        return counts_of(self.claims, "status", CLAIM_STATUSES)


# ------------------------------------------------------------------------------------------ the engine


def verify_tables(
    claims: pl.DataFrame,
    citations: pl.DataFrame,
    corpus_version: str,
    scorer: Scorer | None,
    settings: VerifySettings,
    cache: VerdictCache | None,
    run_id: str,
) -> tuple[dict[str, pl.DataFrame], RunTally]:
    """The pairs, claims and answers tables (NLI_* schemas) of these answers and their RunTally. A run may verify
    its answers in batches, each answer's rows all in one call: the batches' tables and tallies add up."""
    model = {name: pl.lit(value, pl.String) for name, value in model_values(scorer, settings).items()}
    evidence = resolve_spans(with_citation_columns(citations)).drop("chunk_text")
    sentences = claim_sentences(claims)
    pairs = sentences.join(evidence, on=CLAIM_KEY, how="inner")
    judged, stats = judge_pairs(
        pairs.filter(pl.col("evidence_text").is_not_null()).select(PAIR_KEY).unique(), scorer, settings, cache
    )
    pairs = rank_pairs(_label_pairs(pairs, judged), settings.ranking).with_columns(**model)
    decisions = decide_sentences(pairs, settings.ranking)
    claim_rows = aggregate_claims(claims, sentences, pairs, decisions, claim_conflicts(decisions)).with_columns(**model)
    keys = {"run_id": pl.lit(run_id), "corpus_version": pl.lit(corpus_version)}
    frames = {"pairs": pairs, "claims": claim_rows, "answers": answer_metrics(claim_rows)}
    lexical = (pl.col("tier") == "lexical") & pl.col("label").is_in(["entailment", "contradiction"])
    tally = RunTally(
        run_totals(frames["answers"]),
        judged.select(pl.struct(PAIR_KEY).hash().alias("pair"), lexical.alias("lexical")),
        {"n_pairs": pairs.height, "cache_hits": stats["cache_hits"], "model_calls": stats["model_calls"]},
    )
    return {name: conform(frame.with_columns(**keys), TABLES[name]) for name, frame in frames.items()}, tally


def model_values(scorer: Scorer | None, settings: VerifySettings) -> dict[str, str | None]:
    """The model columns every verification table records."""
    return {
        "model_id": scorer.model_id if scorer else None,
        "model_revision": scorer.revision if scorer else None,
        "backend": scorer.backend if scorer else None,
        "precision": scorer.precision if scorer else None,
        "checker": scorer.checker if scorer else None,
        "thresholds": settings.thresholds(),
    }


# ------------------------------------------------------------------------------------------ tiers 2 and 3


def judge_pairs(
    unique_pairs: pl.DataFrame, scorer: Scorer | None, settings: VerifySettings, cache: VerdictCache | None
) -> tuple[pl.DataFrame, dict[str, int]]:
    """A verdict for each distinct (sentence, evidence_text): lexical first, then NLI (or `unverified`)."""
    matches = [lexical_verdict(s, e, settings.lexical) for s, e in unique_pairs.select(PAIR_KEY).iter_rows()]
    lexical = unique_pairs.with_columns(
        pl.Series("score", [m.score if m else None for m in matches], dtype=pl.Float64),
        pl.Series("window_start", [m.start if m else None for m in matches], dtype=pl.Int64),
        pl.Series("window_end", [m.end if m else None for m in matches], dtype=pl.Int64),
        pl.Series("label", [m.label if m else None for m in matches], dtype=pl.String),
    )
    decided = lexical.filter(pl.col("score").is_not_null()).with_columns(
        tier=pl.lit("lexical"), n_windows=pl.lit(1, pl.Int32), from_cache=pl.lit(False)
    )
    undecided = lexical.filter(pl.col("score").is_null()).select(PAIR_KEY)
    stats = {"lexical_decisions": decided.height, "cache_hits": 0, "model_calls": 0}
    if scorer is None:
        rest = undecided.with_columns(label=pl.lit("unverified"), tier=pl.lit("lexical"), from_cache=pl.lit(False))
    else:
        calls_before = scorer.model_calls
        rest, stats["cache_hits"] = nli_verdicts(undecided, scorer, settings, cache)
        stats["model_calls"] = scorer.model_calls - calls_before
    verdicts = pl.concat([_empty_verdicts(), decided, rest], how="diagonal_relaxed")
    return verdicts.select(list(_VERDICT_COLUMNS)), stats


_VERDICT_COLUMNS = {
    "sentence": pl.String,
    "evidence_text": pl.String,
    "label": pl.String,
    "tier": pl.String,
    "score": pl.Float64,
    "p_entailment": pl.Float64,
    "p_neutral": pl.Float64,
    "p_contradiction": pl.Float64,
    "window_start": pl.Int64,
    "window_end": pl.Int64,
    "n_windows": pl.Int32,
    "from_cache": pl.Boolean,
}


def _empty_verdicts() -> pl.DataFrame:
    return pl.DataFrame(schema=_VERDICT_COLUMNS)


def nli_verdicts(
    pairs: pl.DataFrame, scorer: Scorer, settings: VerifySettings, cache: VerdictCache | None
) -> tuple[pl.DataFrame, int]:
    """NLI verdicts for (sentence, evidence_text) pairs: cached ones reused, the rest scored and cached."""
    keyed = pairs.with_columns(
        pl.col("sentence").map_elements(text_hash, return_dtype=pl.String).alias("claim_hash"),
        pl.col("evidence_text").map_elements(text_hash, return_dtype=pl.String).alias("evidence_hash"),
    )
    hashes = ["claim_hash", "evidence_hash"]
    key = model_key(scorer)
    hits = cache.lookup(key, settings.key(), keyed) if cache else no_hits()
    misses = keyed.join(hits, on=hashes, how="anti")
    scored = score_windows(misses, scorer, settings)
    if cache:
        cache.add(key, settings.key(), scored)
    known = [scored.with_columns(from_cache=pl.lit(False)), hits.with_columns(from_cache=pl.lit(True))]
    verdicts = keyed.join(pl.concat(known, how="diagonal_relaxed"), on=hashes, how="left")
    label = (
        pl.when(pl.col("p_entailment") >= settings.entail_threshold)
        .then(pl.lit("entailment"))
        .when(pl.col("p_contradiction") >= settings.contradict_threshold)
        .then(pl.lit("contradiction"))
        .otherwise(pl.lit("neutral"))
    )
    verdicts = verdicts.with_columns(label=label, tier=pl.lit("nli"), score=pl.col("p_entailment")).drop(hashes)
    return verdicts, keyed.height - misses.height


def score_windows(pairs: pl.DataFrame, scorer: Scorer, settings: VerifySettings) -> pl.DataFrame:
    """Score every (sentence, evidence window); per pair keep the deciding window (max over windows)."""
    hashes = ["claim_hash", "evidence_hash"]
    if pairs.is_empty():
        return pairs.select(hashes).with_columns(
            *(pl.lit(None, pl.Float64).alias(c) for c in ("p_entailment", "p_neutral", "p_contradiction")),
            *(pl.lit(None, pl.Int64).alias(c) for c in ("window_start", "window_end")),
            pl.lit(None, pl.Int32).alias("n_windows"),
        )
    check_claims_fit(pairs["sentence"].unique().to_list(), scorer)
    windows = evidence_windows(pairs["evidence_text"].unique().to_list(), scorer, settings)
    items = pairs.join(windows, on="evidence_text").with_columns(
        pl.col("evidence_text")
        .str.slice(pl.col("window_start"), pl.col("window_end") - pl.col("window_start"))
        .alias("window_text")
    )
    distinct = items.select("window_text", "sentence").unique(maintain_order=True)
    probs = scorer.score(distinct["window_text"].to_list(), distinct["sentence"].to_list())
    distinct = distinct.with_columns(
        pl.Series("p_entailment", probs[:, 0]),
        pl.Series("p_neutral", probs[:, 1]),
        pl.Series("p_contradiction", probs[:, 2]).fill_nan(None),
    )
    items = items.join(distinct, on=["window_text", "sentence"])
    best_entail = items.sort("p_entailment", descending=True).group_by(hashes, maintain_order=True).first()
    best_contra = (
        items.sort("p_contradiction", descending=True, nulls_last=True).group_by(hashes, maintain_order=True).first()
    )
    values = ["p_entailment", "p_neutral", "p_contradiction", "window_start", "window_end"]
    chosen = (
        best_entail.select(hashes + values)
        .join(best_contra.select(hashes + values), on=hashes, suffix="_c")
        .join(items.group_by(hashes).len("n_windows"), on=hashes)
    )
    contradiction_wins = (pl.col("p_entailment") < settings.entail_threshold) & (
        pl.col("p_contradiction_c") >= settings.contradict_threshold
    )
    return chosen.select(
        *hashes,
        *(pl.when(contradiction_wins).then(pl.col(f"{v}_c")).otherwise(pl.col(v)).alias(v) for v in values),
        pl.col("n_windows").cast(pl.Int32),
    )


def check_claims_fit(sentences: list[str], scorer: Scorer) -> None:
    """CheckerError, before any pair is scored, when a claim sentence and the prompt leave no room for evidence
    in the model's window."""
    for sentence, n_tokens in zip(sentences, scorer.count_tokens(sentences)):
        if n_tokens + scorer.prompt_tokens >= scorer.max_tokens:
            raise CheckerError(
                f"model {scorer.model_id!r}: its window of {scorer.max_tokens} tokens is smaller than a claim of "
                f"{n_tokens} tokens plus the {scorer.prompt_tokens} of its {scorer.checker} prompt "
                f"({sentence[:60]!r}): use a model with a longer window, or split the claim"
            )


def evidence_windows(evidences: list[str], scorer: Scorer, settings: VerifySettings) -> pl.DataFrame:
    """(evidence_text, window_start, window_end): the whole text when it fits the model, else windows of
    whole sentences that fit, overlapping by `window_overlap_sentences`."""
    budget = max(16, scorer.max_tokens - settings.claim_token_reserve - scorer.prompt_tokens)
    if scorer.chunk_tokens:  # the checker's own chunk size (MiniCheck: 400 or 500 tokens), when smaller
        budget = min(budget, scorer.chunk_tokens)
    rows: list[tuple[str, int, int]] = []
    long_texts = []
    for text, n_tokens in zip(evidences, scorer.count_tokens(evidences)):
        if n_tokens <= budget:
            rows.append((text, 0, len(text)))
        else:
            long_texts.append(text)
    spans = [sentence_spans(text) or [(0, len(text))] for text in long_texts]
    counts = iter(scorer.count_tokens([t[s:e] for t, sp in zip(long_texts, spans) for s, e in sp]))
    for text, text_spans in zip(long_texts, spans):
        sentence_tokens = [next(counts) for _ in text_spans]
        for start, end in pack_windows(text_spans, sentence_tokens, budget, settings.window_overlap_sentences):
            rows.append((text, start, end))
    return pl.DataFrame(
        rows, schema={"evidence_text": pl.String, "window_start": pl.Int64, "window_end": pl.Int64}, orient="row"
    )


def pack_windows(
    spans: list[tuple[int, int]], tokens_per_span: list[int], budget: int, overlap: int
) -> list[tuple[int, int]]:
    """Greedy windows of consecutive sentences within `budget` tokens; each next window starts `overlap`
    sentences before the previous one ended (always moving forward). A lone over-long sentence is its own
    window (the tokenizer truncates it)."""
    windows = []
    first = 0
    while first < len(spans):
        last, total = first, tokens_per_span[first]
        while last + 1 < len(spans) and total + tokens_per_span[last + 1] <= budget:
            last += 1
            total += tokens_per_span[last]
        windows.append((spans[first][0], spans[last][1]))
        if last == len(spans) - 1:
            break
        first = max(first + 1, last + 1 - overlap)
    return windows


def _label_pairs(pairs: pl.DataFrame, judged: pl.DataFrame) -> pl.DataFrame:
    """Attach verdicts to every (sentence, citation) row; rows without evidence are `no_evidence`."""
    labelled = pairs.join(judged, on=PAIR_KEY, how="left")
    return labelled.with_columns(
        pl.col("label").fill_null("no_evidence"),
        pl.col("tier").fill_null("anchoring"),
        pl.col("from_cache").fill_null(False),
        (pl.col("evidence_start_char") + pl.col("window_start")).alias("window_start_char"),
        (pl.col("evidence_start_char") + pl.col("window_end")).alias("window_end_char"),
    )
