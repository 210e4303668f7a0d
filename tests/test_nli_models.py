"""Real transformers loading on tiny random-weight models saved in a temp dir: label orders, 2-way models,
unknown label sets, the missing-model message, windowing with a real tokenizer, and the ONNX int8 backend."""

from __future__ import annotations

import time

import numpy as np
import polars as pl
import pytest

from tests.random_models import save_random_nli_model
from tests.verify_helpers import citations_frame, claims_frame, verify
from verifiers.checkers.loading import ModelUnavailable, load_scorer
from verifiers.checkers.nli import LabelSetError, canonical_columns

TEXTS = [
    "HTTPX is a fully featured HTTP client for Python 3.",
    "It provides sync and async APIs, and support for both HTTP/1.1 and HTTP/2.",
    "The client supports connection pooling, timeouts and proxies.",
    "Requests is a popular library with a similar API.",
] * 3
CROSS_ENCODER_ORDER = {0: "contradiction", 1: "entailment", 2: "neutral"}
MNLI_ORDER = {0: "ENTAILMENT", 1: "Neutral", 2: "CONTRADICTION"}
TWO_WAY = {0: "entailment", 1: "not_entailment"}


def frames(n_filler: int = 0):
    filler = " ".join(f"The client reads response number {i} from the pool." for i in range(n_filler))
    claims = claims_frame([("a", "c", "HTTPX supports HTTP/2 and async.", 1)])
    citations = citations_frame(
        [{"answer_id": "a", "claim_id": "c", "citation_id": "k", "chunk_text": f"{TEXTS[1]} {filler}".strip()}]
    )
    return claims, citations


@pytest.mark.parametrize(
    ("id2label", "favour", "status", "probability"),
    [
        (CROSS_ENCODER_ORDER, "entailment", "supported", "p_entailment"),
        (CROSS_ENCODER_ORDER, "contradiction", "contradicted", "p_contradiction"),
        (MNLI_ORDER, "ENTAILMENT", "supported", "p_entailment"),
        (MNLI_ORDER, "CONTRADICTION", "contradicted", "p_contradiction"),
        (TWO_WAY, "entailment", "supported", "p_entailment"),
        (TWO_WAY, "not_entailment", "unsupported", "p_neutral"),
    ],
)
def test_label_order_is_read_from_config(tmp_path, id2label, favour, status, probability):
    model_dir = save_random_nli_model(tmp_path / "model", TEXTS, id2label, favour_label=favour)
    scorer = load_scorer(str(model_dir))
    result = verify(*frames(), "v1", scorer)
    claim = result.claims.row(0, named=True)
    pair = result.pairs.row(0, named=True)
    assert claim["status"] == status and claim["tier"] == "nli"
    assert pair[probability] > 0.99
    assert claim["model_id"] == str(model_dir) and claim["model_revision"].startswith("sha256:")
    assert (pair["p_contradiction"] is None) == (len(id2label) == 2)
    assert scorer.model_calls == 1


def test_unknown_label_set_is_refused(tmp_path):
    model_dir = save_random_nli_model(tmp_path / "model", TEXTS, {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"})
    with pytest.raises(LabelSetError, match=r"LABEL_0.*not a known NLI label set"):
        load_scorer(str(model_dir))
    with pytest.raises(LabelSetError):
        canonical_columns({0: "entailment", 1: "neutral"})
    assert canonical_columns({0: "Not-Entailment", 1: "ENTAILMENT"}) == (1, 0, None)


def test_missing_model_fails_fast_with_guidance(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for model in ("cross-encoder/nli-deberta-v3-xsmall", str(tmp_path / "no-such-dir")):
        started = time.monotonic()
        with pytest.raises(ModelUnavailable) as excinfo:
            load_scorer(model)
        message = str(excinfo.value)
        assert model in message and "--model /local/dir" in message and "--no-model" in message
        assert "citekeeper models pull" in message
        assert time.monotonic() - started < 10  # no network retries


def test_long_evidence_windows_fit_the_real_tokenizer(tmp_path):
    model_dir = save_random_nli_model(tmp_path / "model", TEXTS, CROSS_ENCODER_ORDER, favour_label="entailment")
    scorer = load_scorer(str(model_dir), batch_size=4)
    assert scorer.max_tokens == 128
    claims, citations = frames(n_filler=40)
    chunk = citations["chunk_text"][0]
    assert scorer.count_tokens([chunk])[0] > 3 * scorer.max_tokens
    result = verify(claims, citations, "v1", scorer)
    pair = result.pairs.row(0, named=True)
    assert pair["n_windows"] >= 4 and scorer.model_calls == pair["n_windows"]
    window = chunk[pair["window_start_char"] - 100 : pair["window_end_char"] - 100]
    assert scorer.count_tokens([window])[0] <= scorer.max_tokens - 96 - 3
    assert result.claims["status"][0] == "supported"


def sharpen(model_dir, std: float = 0.3) -> None:
    """Re-draw the weights with a large spread so random-weight outputs differ between inputs."""
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(model_dir)
    torch.manual_seed(1)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if name.endswith("weight") and weight.dim() == 2:
                weight.normal_(0.0, std)
    model.save_pretrained(model_dir)


def test_onnx_int8_backend_agrees_with_torch_and_is_cached(tmp_path):
    model_dir = save_random_nli_model(tmp_path / "model", TEXTS, MNLI_ORDER, seed=3)
    sharpen(model_dir)
    premises, hypotheses = TEXTS[:4], TEXTS[4:8][::-1]
    torch_probs = load_scorer(str(model_dir)).score(premises, hypotheses)
    onnx_scorer = load_scorer(str(model_dir), backend="onnx", onnx_cache_dir=tmp_path / "onnx")
    onnx_probs = onnx_scorer.score(premises, hypotheses)
    assert onnx_scorer.backend == "onnx" and onnx_scorer.model_calls == 4
    assert torch_probs.std(axis=0).max() > 0.02  # the inputs really get different verdicts
    assert np.abs(onnx_probs - torch_probs).mean() < 0.05  # int8 weights: close, not equal
    assert (onnx_probs.argmax(axis=1) == torch_probs.argmax(axis=1)).mean() >= 0.75
    exported = list((tmp_path / "onnx").rglob("model.int8.onnx"))
    assert len(exported) == 1
    mtime = exported[0].stat().st_mtime_ns
    load_scorer(str(model_dir), backend="onnx", onnx_cache_dir=tmp_path / "onnx")
    assert exported[0].stat().st_mtime_ns == mtime  # reused, not re-exported


def test_batches_are_length_bucketed(tmp_path):
    model_dir = save_random_nli_model(tmp_path / "model", TEXTS, CROSS_ENCODER_ORDER)
    scorer = load_scorer(str(model_dir), batch_size=2)
    premises = ["short.", TEXTS[0] * 3, "tiny.", TEXTS[1] * 3]
    order = scorer.length_order(premises, ["h"] * 4)
    assert [sorted(order[i : i + 2].tolist()) for i in (0, 2)] == [[0, 2], [1, 3]]
    probs = scorer.score(premises, ["h"] * 4)
    single = np.vstack([scorer.score([p], ["h"]) for p in premises])
    assert np.allclose(probs, single, atol=1e-5)  # padding within a bucket does not change a verdict
    assert pl.Series(probs.sum(axis=1)).round(6).to_list() == [1.0] * 4
