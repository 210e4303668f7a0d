"""The verification engine on hand-built frames, with a deterministic stand-in scorer where exact
probabilities matter: every claim status, tiers, aggregation, metrics, locators."""

from __future__ import annotations

import polars as pl
import pytest

from citekeeper.schema import CLAIM_STATUSES, NLI_ANSWERS, NLI_CLAIMS, NLI_PAIRS, NLI_RUNS
from tests.verify_helpers import TableScorer, citations_frame, claims_frame, verify
from verifiers.engine import VerifySettings, pack_windows

PARIS = "Paris is the capital of France and its largest city by population."
TOWER = "The Eiffel Tower was completed in 1889 for the World's Fair."
RIVER = "The Seine flows through the centre of the city."

SCORES = {
    ("flows through", "A river crosses the French capital."): (0.91, 0.06, 0.03),
    ("Eiffel", "The tower opened in 1925."): (0.02, 0.08, 0.90),
    # entails what TOWER contradicts (0.90): S 0.40 against 0.45 (w_v 0.5), under the margin 0.1: an open conflict
    ("Seine", "The tower opened in 1925."): (0.80, 0.10, 0.10),
    ("Eiffel", "The city hosts a famous iron landmark."): (0.88, 0.10, 0.02),
    ("Paris", "It rains a lot there."): (0.15, 0.80, 0.05),
    ("Eiffel", "It rains a lot there."): (0.20, 0.70, 0.10),
}


def world() -> tuple[pl.DataFrame, pl.DataFrame]:
    claims = claims_frame(
        [
            ("a1", "c-lex", "Paris is the capital of France and its largest city.", 1),  # lexical
            ("a1", "c-nli", "A river crosses the French capital.", 1),  # NLI entails
            ("a2", "c-contra", "The tower opened in 1925.", 1),  # NLI contradicts
            ("a2", "c-conflict", "The tower opened in 1925.", 2),  # one entails, one contradicts
            (
                "a3",
                "c-partial",
                "The Eiffel Tower was completed in 1889 for the World's Fair. It rains a lot there.",
                1,
            ),
            ("a3", "c-unsup", "It rains a lot there.", 1),
            ("a4", "c-uncited", "Everyone loves Paris in spring.", 0),
            ("a4", "c-gone", "The city hosts a famous iron landmark.", 1),  # its only citation resolves to nothing
        ]
    )
    citations = citations_frame(
        [
            {"answer_id": "a1", "claim_id": "c-lex", "citation_id": "k1", "chunk_text": f"Intro. {PARIS} More."},
            {
                "answer_id": "a1",
                "claim_id": "c-nli",
                "citation_id": "k2",
                "chunk_text": RIVER,
                "quote": "flows through the centre",
            },
            {"answer_id": "a2", "claim_id": "c-contra", "citation_id": "k3", "chunk_text": TOWER},
            {"answer_id": "a2", "claim_id": "c-conflict", "citation_id": "k4", "chunk_text": TOWER},
            {"answer_id": "a2", "claim_id": "c-conflict", "citation_id": "k5", "chunk_text": RIVER},
            {"answer_id": "a3", "claim_id": "c-partial", "citation_id": "k6", "chunk_text": TOWER},
            {"answer_id": "a3", "claim_id": "c-unsup", "citation_id": "k7", "chunk_text": PARIS},
            {"answer_id": "a4", "claim_id": "c-gone", "citation_id": "k8", "chunk_text": None},
        ]
    )
    return claims, citations


def by_claim(frame: pl.DataFrame) -> dict[str, dict]:
    return {row["claim_id"]: row for row in frame.iter_rows(named=True)}


def test_every_status_with_exact_probabilities():
    claims, citations = world()
    scorer = TableScorer(SCORES)
    result = verify(claims, citations, "v2", scorer)
    rows = by_claim(result.claims)
    assert {k: v["status"] for k, v in rows.items()} == {
        "c-lex": "supported",
        "c-nli": "supported",
        "c-contra": "contradicted",
        "c-conflict": "conflicted",
        "c-partial": "partially_supported",
        "c-unsup": "unsupported",
        "c-uncited": "uncited",
        "c-gone": "unsupported",
    }
    assert rows["c-lex"]["tier"] == "lexical" and rows["c-lex"]["p_entailment"] is None
    assert rows["c-nli"]["tier"] == "nli" and rows["c-nli"]["p_entailment"] == pytest.approx(0.91)
    assert rows["c-contra"]["p_contradiction"] == pytest.approx(0.90)
    assert rows["c-conflict"]["p_entailment"] == pytest.approx(0.80)
    assert rows["c-conflict"]["p_contradiction"] == pytest.approx(0.90)
    assert rows["c-conflict"]["conflict"] == "open" and rows["c-conflict"]["conflict_margin"] == pytest.approx(-0.05)
    assert (
        rows["c-conflict"]["reason"].startswith("open conflict: an unnamed document")
        and "says it does not" in rows["c-conflict"]["reason"]
    )
    assert {row["conflict"] for key, row in rows.items() if key != "c-conflict"} == {None}
    # partial: sentence 1 is verbatim (lexical), sentence 2 gets p_entailment 0.20 from NLI.
    assert rows["c-partial"]["n_sentences"] == 2 and rows["c-partial"]["n_sentences_supported"] == 1
    assert rows["c-partial"]["p_entailment"] == pytest.approx(0.20)
    assert rows["c-unsup"]["support_score"] == pytest.approx(0.15)
    assert rows["c-uncited"]["tier"] == "none" and "no citations" in rows["c-uncited"]["reason"]
    assert rows["c-gone"]["tier"] == "anchoring" and "no_chunk" in rows["c-gone"]["reason"]
    assert all(row["reason"] for row in rows.values())
    assert all(row["model_id"] == "table-scorer" and row["thresholds"] for row in rows.values())
    # the lexical pairs never reached the model; (TOWER, "The tower opened in 1925.") is shared by two
    # claims and scored once: 5 distinct pairs, 5 model calls
    assert all(hyp != claims["text"][0] for _, hyp in scorer.seen)
    assert result.stats["model_calls"] == len(scorer.seen) == len(set(scorer.seen)) == 5
    assert result.stats["lexical_decisions"] == 2


def test_unverified_without_model_and_lexical_still_decides():
    claims, citations = world()
    result = verify(claims, citations, "v2", scorer=None)
    statuses = {k: v["status"] for k, v in by_claim(result.claims).items()}
    assert statuses["c-lex"] == "supported"
    assert statuses["c-uncited"] == "uncited" and statuses["c-gone"] == "unsupported"
    # sentence 1 of c-partial is lexically supported, sentence 2 undecided: the claim is unverified, not partial
    for claim_id in ("c-nli", "c-contra", "c-conflict", "c-partial", "c-unsup"):
        assert statuses[claim_id] == "unverified"
    assert result.claims.filter(pl.col("status") == "unverified")["reason"].str.contains("no NLI model").all()
    assert result.run["model_id"][0] is None and result.run["model_calls"][0] == 0


def test_two_way_model_cannot_contradict_and_leaves_no_nan():
    claims, citations = world()
    result = verify(claims, citations, "v2", TableScorer(SCORES, three_way=False))
    statuses = {k: v["status"] for k, v in by_claim(result.claims).items()}
    assert statuses["c-contra"] == "unsupported"  # contradiction is invisible to a 2-way model
    assert statuses["c-conflict"] == "supported"  # one citation entails (0.80), the other is not-entailment
    assert result.pairs["p_contradiction"].null_count() == result.pairs.height
    for frame in (result.pairs, result.claims, result.answers, result.run):
        floats = [c for c, t in frame.schema.items() if t.is_float()]
        assert not frame.select(pl.col(floats).is_nan().any()).row(0).count(True)


def test_thresholds_change_the_verdict():
    claims, citations = world()
    strict = verify(claims, citations, "v2", TableScorer(SCORES), VerifySettings(entail_threshold=0.95))
    statuses = {k: v["status"] for k, v in by_claim(strict.claims).items()}
    assert statuses["c-nli"] == "unsupported" and statuses["c-conflict"] == "contradicted"
    assert "entail>=0.95" in strict.claims["thresholds"][0]


def test_metrics_per_answer_and_run():
    claims, citations = world()
    result = verify(claims, citations, "v2", TableScorer(SCORES))
    answers = {row["answer_id"]: row for row in result.answers.iter_rows(named=True)}
    a1, a2, a3, a4 = (answers[k] for k in ("a1", "a2", "a3", "a4"))
    assert a1["claim_completeness"] == 1.0 and a1["traceable"] is True
    assert a1["citation_precision"] == 1.0 and a1["locatability"] == 1.0
    assert a2["claim_completeness"] == 0.0 and a2["citation_precision"] == pytest.approx(1 / 3)  # k5 entails
    assert a3["evidence_coverage"] == pytest.approx(1 / 2)  # partial counts as covered, unsupported does not
    assert a4["locatability"] == 0.0 and a4["citation_precision"] == 0.0 and a4["traceable"] is False
    assert a4["n_uncited"] == 1 and a4["n_unsupported"] == 1
    run = result.run.row(0, named=True)
    assert run["n_claims"] == 8 and run["n_citations"] == 8 and run["n_answers"] == 4
    assert run["claim_completeness"] == pytest.approx(2 / 8) == run["supported_rate"]
    assert run["citation_precision"] == pytest.approx(4 / 8)  # k1 k2 k5 k6
    assert run["traceability_rate"] == pytest.approx(1 / 4)
    assert sum(run[f"n_{s}"] for s in CLAIM_STATUSES) == 8
    assert result.claims.height == claims.height == result.claims["claim_id"].n_unique()


def test_quote_anchoring_locators_and_locatability():
    chunk = "Alpha beta.  The “quick”   brown fox. Gamma."
    claims = claims_frame([("a", "c1", "A quick fox.", 1), ("a", "c2", "Nothing.", 1), ("a", "c3", "Moved.", 1)])
    citations = citations_frame(
        [
            {
                "answer_id": "a",
                "claim_id": "c1",
                "citation_id": "q1",
                "chunk_text": chunk,
                "quote": 'The "quick" brown fox.',
            },
            {"answer_id": "a", "claim_id": "c2", "citation_id": "q2", "chunk_text": chunk, "quote": "not in the chunk"},
            # stale citation whose re-anchoring suggestion is the span "Gamma." (chunk offsets 38..44)
            {
                "answer_id": "a",
                "claim_id": "c3",
                "citation_id": "q3",
                "chunk_text": chunk,
                "quote": "old text",
                "citation_status": "stale",
                "stored_start_char": 138,
                "stored_end_char": 144,
            },
        ]
    )
    result = verify(claims, citations, "v1", TableScorer({}))
    pairs = {row["citation_id"]: row for row in result.pairs.iter_rows(named=True)}
    q1 = pairs["q1"]
    assert q1["anchor"] == "normalized" and not q1["locatable"]  # found only after normalisation
    assert chunk[q1["evidence_start_char"] - 100 : q1["evidence_end_char"] - 100] == "The “quick”   brown fox."
    assert (q1["window_start_char"], q1["window_end_char"]) == (q1["evidence_start_char"], q1["evidence_end_char"])
    assert pairs["q2"]["anchor"] == "quote_not_found" and pairs["q2"]["label"] == "no_evidence"
    assert pairs["q3"]["anchor"] == "quote_not_found" and pairs["q3"]["evidence_start_char"] == 138
    assert pairs["q3"]["label"] == "neutral"  # judged on the suggested span
    assert by_claim(result.claims)["c2"]["reason"].endswith("quote_not_found")
    assert set(result.pairs.columns) == set(NLI_PAIRS.names)


def test_long_evidence_is_windowed_and_the_best_window_recorded():
    sentences = [f"Filler sentence number {i} says nothing much here." for i in range(30)]
    sentences[21] = "The Seine flows through the centre of the city."
    chunk = " ".join(sentences)
    claims = claims_frame([("a", "c", "A river crosses the French capital.", 1)])
    citations = citations_frame([{"answer_id": "a", "claim_id": "c", "citation_id": "k", "chunk_text": chunk}])
    scorer = TableScorer(SCORES, max_tokens=60)  # 60 - 16 reserve - 3 = 41 words of evidence per window
    result = verify(claims, citations, "v1", scorer, VerifySettings(claim_token_reserve=16))
    pair = result.pairs.row(0, named=True)
    assert pair["n_windows"] > 1 and pair["label"] == "entailment" and pair["p_entailment"] == pytest.approx(0.91)
    window = chunk[pair["window_start_char"] - 100 : pair["window_end_char"] - 100]
    assert "The Seine flows" in window and len(window.split()) <= 41
    assert all(len(premise.split()) <= 41 for premise, _ in scorer.seen)
    # windows overlap by one sentence and cover the whole chunk
    starts = sorted(chunk.index(p) for p, _ in scorer.seen)
    assert starts[0] == 0 and max(chunk.index(p) + len(p) for p, _ in scorer.seen) == len(chunk)


def test_pack_windows_overlap_and_progress():
    spans = [(0, 10), (11, 20), (21, 30), (31, 40), (41, 50)]
    assert pack_windows(spans, [4, 4, 4, 4, 4], budget=8, overlap=1) == [(0, 20), (11, 30), (21, 40), (31, 50)]
    assert pack_windows(spans, [4, 4, 4, 4, 4], budget=8, overlap=0) == [(0, 20), (21, 40), (41, 50)]
    assert pack_windows(spans, [20, 4, 4, 4, 4], budget=8, overlap=1) == [(0, 10), (11, 30), (21, 40), (31, 50)]


def test_output_frames_match_schemas():
    claims, citations = world()
    result = verify(claims, citations, "v2", TableScorer(SCORES), run_id="r1")
    for frame, schema in (
        (result.pairs, NLI_PAIRS),
        (result.claims, NLI_CLAIMS),
        (result.answers, NLI_ANSWERS),
        (result.run, NLI_RUNS),
    ):
        assert frame.columns == schema.names
        assert frame.to_arrow().schema.equals(schema, check_metadata=False) or frame.to_arrow().cast(schema)
    assert set(result.claims["status"]) <= set(CLAIM_STATUSES)
    assert result.pairs["run_id"].unique().to_list() == ["r1"]


def test_no_claims_gives_empty_tables_and_null_metrics():
    claims, citations = world()
    result = verify(claims.head(0), citations.head(0), "v1", TableScorer(SCORES))
    assert result.claims.is_empty() and result.pairs.is_empty() and result.answers.is_empty()
    run = result.run.row(0, named=True)
    assert run["n_claims"] == 0 and run["supported_rate"] is None and run["traceability_rate"] is None
    assert run["model_calls"] == 0


def test_stale_citation_with_a_suggestion_is_judged_but_not_traceable():
    claims = claims_frame([("a", "c", "A river crosses the French capital.", 1)])
    citations = citations_frame(
        [
            {
                "answer_id": "a",
                "claim_id": "c",
                "citation_id": "k",
                "chunk_text": RIVER,
                "citation_status": "stale",
                "stored_start_char": 100,
                "stored_end_char": 100 + len(RIVER),
            }
        ]
    )
    result = verify(
        claims, citations, "v2", TableScorer({("Seine", "A river crosses the French capital."): (0.9, 0.05, 0.05)})
    )
    claim = result.claims.row(0, named=True)
    pair = result.pairs.row(0, named=True)
    assert claim["status"] == "supported" and pair["label"] == "entailment"  # the suggestion does support it
    assert not pair["locatable"] and not claim["traceable"]
    assert result.answers["traceable"][0] is False and result.answers["locatability"][0] == 0.0


def test_empty_evidence_never_supports():
    claims = claims_frame([("a", "c1", "Paris is the capital.", 1), ("a", "c2", "Paris is the capital.", 1)])
    citations = citations_frame(
        [
            {"answer_id": "a", "claim_id": "c1", "citation_id": "k1", "chunk_text": "   \n "},
            {"answer_id": "a", "claim_id": "c2", "citation_id": "k2", "chunk_text": PARIS, "quote": ""},
        ]
    )
    scorer = TableScorer({}, default=(0.99, 0.005, 0.005))  # a scorer that would say "entailed" to anything
    result = verify(claims, citations, "v1", scorer)
    assert result.claims["status"].to_list() == ["unsupported", "unsupported"]
    assert result.pairs["label"].to_list() == ["no_evidence", "no_evidence"] and scorer.model_calls == 0
