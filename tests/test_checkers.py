"""The fact-checker protocols of transformers models (verifiers.checkers) on random-weight models of each published
shape, through the CLI and Dagster's verification asset. The expected scores are computed here the way MiniCheck's
own inference code (minicheck/inference.py) computes them, with plain transformers: not by citekeeper's code."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg
import numpy as np
import polars as pl
import pytest
import torch
from click.testing import CliRunner

from citekeeper.answers.store import AnswerStore
from citekeeper.layout import StoreLayout
from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from parsers.records import ParseConfig
from pipelines.cli import main
from tests.chunk_frames import write_tree
from tests.random_models import save_random_checker
from verifiers.checkers.causal_lm import MINICHECK_SYSTEM_PROMPT, MINICHECK_USER_PROMPT

SHORT = "The client keeps four connections alive for every host it talks to."
LONG = " ".join(
    f"Section {i} explains that retry number {i} waits {i * 2} seconds before the next attempt." for i in range(30)
)
DOCS = {"short.md": f"# Short\n\n{SHORT}\n", "long.md": f"# Long\n\n{LONG}\n"}
CLAIMS = ["Idle sockets are closed quickly.", "Backoff grows between attempts."]  # not decided by the lexical tier
SHAPES = {"roberta": "binary", "deberta": "binary", "t5": "seq2seq", "qwen2": "causal-lm"}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("checkers")
    store = CorpusStore(base / "store")
    ingest(write_tree(base / "src", DOCS), store, version="v1", config=ParseConfig(workers=1))
    chunks = store.read_chunks("v1", columns=["chunk_id", "source_path"]).sort("chunk_id")
    records = [
        {
            "answer_id": f"a-{i}",
            "answer": "...",
            "corpus_version": "v1",
            "claims": [{"text": claim, "citations": [{"chunk_id": row["chunk_id"]}]} for claim in CLAIMS],
        }
        for i, row in enumerate(chunks.iter_rows(named=True))
    ]
    (base / "answers.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    assert AnswerStore(store.root).add(base / "answers.jsonl").n_registered == len(records)
    texts = [SHORT, LONG, *CLAIMS]
    models = {
        shape: save_random_checker(base / shape, texts, shape, max_positions=256 if shape == "qwen2" else 128)
        for shape in SHAPES
    }  # qwen2: room for its prompt
    return {"base": base, "store": store, "models": models, "n_chunks": chunks.height}


def run(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def verified_pairs(world, model: Path, out: Path, *options, store_root: Path | None = None) -> pl.DataFrame:
    store_root = store_root or world["store"].root
    result = run("verify", "--store", store_root, "--version", "v1", "--model", model, "--out", out, *options)
    assert result.exit_code == 0, result.output
    return pl.read_parquet(next(out.rglob("pairs.parquet"))).filter(pl.col("tier") == "nli")


def reference_score(shape: str, model_dir: Path, document: str, claim: str, supported_label: int = 1) -> float:
    """MiniCheck's inference, step by step (Liyan06/MiniCheck, minicheck/inference.py)."""
    from transformers import (
        AutoModelForCausalLM,
        AutoModelForSeq2SeqLM,
        AutoModelForSequenceClassification,
        AutoTokenizer,
    )

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    with torch.no_grad():
        if SHAPES[shape] == "binary":  # document + eos + claim, one sequence; softmax, index 1
            model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2).eval()
            inputs = tokenizer(
                [tokenizer.eos_token.join([document, claim])], truncation=True, max_length=128, return_tensors="pt"
            )
            return torch.softmax(model(**inputs).logits, dim=-1)[0, supported_label].item()
        if SHAPES[shape] == "seq2seq":  # "predict: " + document + eos + claim; one decoder step from token 0
            model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval()
            inputs = tokenizer(
                ["predict: " + tokenizer.eos_token.join([document, claim])],
                truncation=True,
                max_length=128,
                return_tensors="pt",
            )
            logits = model(**inputs, decoder_input_ids=torch.zeros((1, 1), dtype=torch.long)).logits.squeeze(1)
            label_ids = [
                tokenizer("0", add_special_tokens=False)["input_ids"][0],
                tokenizer("1", add_special_tokens=False)["input_ids"][0],
            ]
            return torch.softmax(logits[:, label_ids], dim=-1)[0, 1].item()
        # causal LM: the chat template of MiniCheck's prompts; P(yes) against P(no) of the next token, summed over
        # every token that spells them
        model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        user = MINICHECK_USER_PROMPT.replace("[DOCUMENT]", document).replace("[CLAIM]", claim)
        text = tokenizer.apply_chat_template(
            [{"role": "system", "content": MINICHECK_SYSTEM_PROMPT}, {"role": "user", "content": user}],
            add_generation_prompt=True,
            tokenize=False,
        )
        probs = torch.softmax(
            model(**tokenizer(text, add_special_tokens=False, return_tensors="pt")).logits[0, -1].double(), dim=-1
        )
        decoded = [tokenizer.decode([i]).strip().lower() for i in range(len(tokenizer))]
        yes = sum(probs[i].item() for i, word in enumerate(decoded) if word == "yes")
        no = sum(probs[i].item() for i, word in enumerate(decoded) if word == "no")
        return yes / (yes + no)


def window_text(store: CorpusStore, pair: dict) -> str:
    text = (
        store.read_documents("v1", columns=["doc_id", "text"]).filter(pl.col("doc_id") == pair["doc_id"])["text"].item()
    )
    return text[pair["window_start_char"] : pair["window_end_char"]]


@pytest.mark.parametrize("shape", SHAPES)
def test_each_protocol_scores_as_minicheck_does_through_the_cli(world, shape, tmp_path):
    pairs = verified_pairs(world, world["models"][shape], tmp_path / "out")
    assert pairs.height == len(CLAIMS) * world["n_chunks"] and set(pairs["checker"]) == {SHAPES[shape]}
    assert pairs["p_contradiction"].is_null().all()  # one support score: no contradiction column
    for pair in pairs.iter_rows(named=True):
        expected = reference_score(shape, world["models"][shape], window_text(world["store"], pair), pair["sentence"])
        assert pair["p_entailment"] == pytest.approx(expected, abs=1e-4)
        assert pair["p_neutral"] == pytest.approx(1 - expected, abs=1e-4)
    long = pairs.filter(pl.col("evidence_end_char") - pl.col("evidence_start_char") > 400)
    assert long.height and (long["n_windows"] > 1).all()  # evidence longer than the window is split...


def test_the_score_is_the_maximum_over_the_chunks(world, tmp_path):
    from verifiers.checkers.loading import load_scorer
    from verifiers.engine import VerifySettings, evidence_windows

    pairs = verified_pairs(world, world["models"]["t5"], tmp_path / "out")
    store, scorer = world["store"], load_scorer(str(world["models"]["t5"]))
    long = pairs.filter(pl.col("n_windows") > 1).row(0, named=True)
    evidence = (
        store.read_documents("v1", columns=["doc_id", "text"]).filter(pl.col("doc_id") == long["doc_id"])["text"].item()
    )
    evidence = evidence[long["evidence_start_char"] : long["evidence_end_char"]]
    windows = evidence_windows([evidence], scorer, VerifySettings())
    assert windows.height == long["n_windows"]
    scores = [
        reference_score("t5", world["models"]["t5"], evidence[s:e], long["sentence"])
        for s, e in windows.select("window_start", "window_end").iter_rows()
    ]
    assert long["p_entailment"] == pytest.approx(max(scores), abs=1e-4)  # ...and its score is the best window's
    assert len(set(np.round(scores, 6))) > 1


def test_the_supported_label_and_the_protocol_are_in_the_cache_key(world, tmp_path):
    store_root = shutil.copytree(world["store"].root, tmp_path / "store")
    shutil.rmtree(StoreLayout(store_root).verdict_cache_dir, ignore_errors=True)  # an empty verdict cache of its own
    first = verified_pairs(world, world["models"]["roberta"], tmp_path / "one", store_root=store_root)
    again = verified_pairs(world, world["models"]["roberta"], tmp_path / "two", store_root=store_root)
    assert not first["from_cache"].any() and again["from_cache"].all()
    flipped = verified_pairs(
        world, world["models"]["roberta"], tmp_path / "three", "--supported-label", "0", store_root=store_root
    )
    assert not flipped["from_cache"].any()  # another key: no verdict of index 1 is reused
    key = ["claim_id", "citation_id"]
    both = first.join(flipped, on=key, suffix="_flipped")
    assert both.height == first.height
    one_window = both.filter(
        pl.col("n_windows") == 1
    )  # with several, each label's maximum may come from another window
    assert one_window.height and np.allclose(one_window["p_entailment"] + one_window["p_entailment_flipped"], 1.0)
    as_nli = run(
        "verify",
        "--store",
        world["store"].root,
        "--version",
        "v1",
        "--model",
        world["models"]["roberta"],
        "--out",
        tmp_path / "four",
        "--checker",
        "nli",
    )
    assert (
        as_nli.exit_code == 1 and "not a known NLI label set" in as_nli.output
    )  # LABEL_0 / LABEL_1 are not NLI labels


def test_bad_checkers_fail_before_any_pair_is_scored(world, tmp_path):
    from transformers import BertConfig, BertForMaskedLM

    from tests.random_models import TINY_BERT, build_tokenizer

    masked = tmp_path / "masked-lm"
    tokenizer = build_tokenizer([SHORT])
    BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), **TINY_BERT)).save_pretrained(masked)
    tokenizer.save_pretrained(masked)
    no_digits = save_random_checker(tmp_path / "t5-no-digits", [SHORT], "t5", vocabulary=["predict"])
    no_template = save_random_checker(tmp_path / "qwen2-no-template", [SHORT], "qwen2", max_positions=512)
    config = json.loads((no_template / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (no_template / "tokenizer_config.json").write_text(json.dumps(config))
    (no_template / "chat_template.jinja").unlink(missing_ok=True)
    tiny_window = save_random_checker(tmp_path / "roberta-16", [SHORT, *CLAIMS], "roberta", max_positions=8)
    expected = {
        masked: "architecture ['BertForMaskedLM'] is not a checker citekeeper can run",
        no_digits: "its tokenizer has no token '0'",
        no_template: "its tokenizer has no chat template",
        tiny_window: "its window of 8 tokens is smaller than a claim of",
    }
    for model, message in expected.items():
        out = tmp_path / f"out-{model.name}"
        result = run("verify", "--store", world["store"].root, "--version", "v1", "--model", model, "--out", out)
        assert result.exit_code == 1 and message in result.output and repr(str(model)) in result.output, result.output
        assert not list(out.rglob("pairs.parquet"))  # nothing scored, nothing written


@pytest.mark.parametrize("shape", SHAPES)
def test_the_dagster_verification_asset_runs_each_checker(world, shape, tmp_path):
    from assets.verification import verification
    from tests.dagster_settings import settings

    store_root = shutil.copytree(world["store"].root, tmp_path / "store")  # runs of its own
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("corpus_version", ["v1"])
    label = 0 if SHAPES[shape] == "binary" else None  # the resource's supported label, where the protocol has one
    config = settings(store_dir=str(store_root), nli_model=str(world["models"][shape]), nli_supported_label=label)
    result = dg.materialize([verification], partition_key="v1", resources=config.resources(), instance=instance)
    assert result.success
    metadata = result.asset_materializations_for_node("verification")[0].metadata
    assert metadata["model"].value.endswith(f", {SHAPES[shape]})")
    pairs = pl.read_parquet(Path(metadata["output_dir"].value) / "pairs.parquet").filter(pl.col("tier") == "nli")
    assert set(pairs["checker"]) == {SHAPES[shape]} and pairs.height == len(CLAIMS) * world["n_chunks"]
    for pair in pairs.head(2).iter_rows(named=True):
        expected = reference_score(
            shape,
            world["models"][shape],
            window_text(world["store"], pair),
            pair["sentence"],
            supported_label=1 if label is None else label,
        )
        assert pair["p_entailment"] == pytest.approx(expected, abs=1e-4)


def test_the_resource_refuses_an_unknown_checker():
    from tests.dagster_settings import settings

    with pytest.raises(ValueError, match="unknown checker protocol 'minicheck'"):
        settings(nli_checker="minicheck")


def test_the_binary_checker_runs_on_onnx_int8(world, tmp_path):
    from verifiers.checkers.base import CheckerError, model_key
    from verifiers.checkers.loading import load_scorer

    model = str(world["models"]["roberta"])
    on_torch, on_onnx = load_scorer(model), load_scorer(model, "onnx", onnx_cache_dir=tmp_path / "onnx")
    premises, claims = [SHORT, LONG[:300]], CLAIMS
    assert on_onnx.checker == "binary" and model_key(on_onnx).endswith("/onnx/int8/binary:1")
    assert np.allclose(on_torch.score(premises, claims), on_onnx.score(premises, claims), atol=0.02, equal_nan=True)
    with pytest.raises(CheckerError, match="the onnx backend runs nli and binary checkers, not seq2seq"):
        load_scorer(str(world["models"]["t5"]), "onnx", onnx_cache_dir=tmp_path / "onnx")


def test_a_pulled_preset_keeps_its_window_and_licence(tmp_path, monkeypatch):
    """A directory `citekeeper models pull` saved from a preset's hub id runs with the preset (window, chunk,
    protocol), and a non-commercial licence is printed."""
    from citekeeper.model_sources import PULLED_FROM
    from verifiers.checkers.loading import load_scorer
    from verifiers.checkers.presets import PRESETS, licence_notice

    directory = save_random_checker(tmp_path / "bespoke", [SHORT], "qwen2", max_positions=512)
    (directory / PULLED_FROM).write_text(json.dumps({"spec": "bespokelabs/Bespoke-MiniCheck-7B", "commit": None}))
    scorer = load_scorer(str(directory))
    preset = PRESETS["bespokelabs/Bespoke-MiniCheck-7B"]
    assert (scorer.checker, scorer.max_tokens, scorer.chunk_tokens) == ("causal-lm", preset.window, preset.chunk)
    assert "CC BY-NC 4.0: not for commercial use" in licence_notice(str(directory), scorer.preset)
    assert licence_notice("lytang/MiniCheck-Flan-T5-Large", PRESETS["lytang/MiniCheck-Flan-T5-Large"]) is None


def test_claims_that_share_evidence_share_its_kv_cache(world):
    """A causal-LM checker runs each evidence prefix once for all the claims citing it (MiniCheck-7B's prefix
    caching): the verdicts are those of each full prompt run on its own."""
    from verifiers.checkers.backends import HFScorer
    from verifiers.checkers.loading import load_scorer

    scorer = load_scorer(str(world["models"]["qwen2"]), batch_size=2)  # batches of 2: the cache is copied per batch
    premises = [SHORT] * 3 + [LONG[:200]]
    hypotheses = [*CLAIMS, "Sockets stay open.", CLAIMS[0]]
    assert scorer.protocol.split_prompt(SHORT, [CLAIMS[0]]) is not None
    calls = []  # (rows, tokens, padded) of each run of the whole model: a prefix, or a batch of full prompts
    scorer.model.register_forward_hook(
        lambda module, args, kwargs, output: calls.append((*kwargs["input_ids"].shape, "attention_mask" in kwargs)),
        with_kwargs=True,
    )
    shared = scorer.score(premises, hypotheses)
    assert [padded for _, _, padded in calls] == [
        False,
        True,
    ]  # SHORT's prefix once for its 3 claims; the lone pair whole
    assert calls[1][0] == 1
    assert np.allclose(shared, HFScorer.score(scorer, premises, hypotheses), atol=1e-6, equal_nan=True)


def test_the_default_checker_depends_on_the_language_and_the_device():
    from citekeeper.language import choose_nli_model
    from tests.test_devices import FakeCuda
    from verifiers.devices import gpu_requested

    h200 = FakeCuda([("NVIDIA H200", (9, 0))])
    assert gpu_requested("auto", h200) and not gpu_requested("cpu", h200) and not gpu_requested("auto", FakeCuda())
    on_gpu, on_cpu = choose_nli_model(None, "en", gpu=True), choose_nli_model(None, "en")
    assert (on_gpu.model, on_cpu.model) == ("lytang/MiniCheck-Flan-T5-Large", "cross-encoder/nli-deberta-v3-xsmall")
    assert "on a GPU" in on_gpu.reason
    chinese = choose_nli_model(None, "zh", gpu=True)  # the MiniCheck checkers are English-only
    assert chinese.model == "MoritzLaurer/mDeBERTa-v3-base-xnli-multilingual-nli-2mil7"
    from verifiers.checkers.presets import PRESETS

    assert all(
        PRESETS[m].commercial for m in (on_gpu.model, on_cpu.model, chinese.model)
    )  # no default is non-commercial
