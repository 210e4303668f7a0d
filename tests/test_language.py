"""Per-language NLI model selection: script-based detection, the language setting (CLI, env, resource), the
multilingual default chosen for a Chinese store by `citekeeper verify` and the Dagster asset, the XNLI label
order of the multilingual default, and verdict-cache separation between models."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from click.testing import CliRunner

from changes.citation_status import check_citations
from citekeeper import language as lang
from citekeeper.answers.store import AnswerStore
from citekeeper.language import (
    ENGLISH,
    LANGUAGES,
    MULTILINGUAL,
    LanguageError,
    LanguageModels,
    choose_nli_model,
    detect,
    detect_language,
    language_setting,
    models_for,
    resolve_language,
    sample_store_texts,
)
from citekeeper.settings import SettingsError, read_settings, variable
from citekeeper.store import CorpusStore
from pipelines.cli import main
from tests.chunk_frames import write_tree
from tests.random_models import DEBERTA_V3_XSMALL, build_tokenizer, save_random_nli_model
from tests.verify_helpers import citations_frame, claims_frame, verify
from verifiers.checkers.loading import DEFAULT_MODEL, load_scorer
from verifiers.verify_store import verify_store

LANGUAGE_ENV = variable("language")

ENGLISH_NLI = "cross-encoder/nli-deberta-v3-xsmall"
MULTILINGUAL_NLI = "MoritzLaurer/mDeBERTa-v3-base-xnli-multilingual-nli-2mil7"
# config.id2label of MoritzLaurer/mDeBERTa-v3-base-xnli-multilingual-nli-2mil7 (and the other XNLI mDeBERTas)
XNLI_LABELS = {0: "entailment", 1: "neutral", 2: "contradiction"}

ZH = "客户端支持连接池和超时设置。每个请求都可以单独配置代理。如果发生错误，会抛出异常，请求可以重试。"
EN = (
    "The client supports connection pooling and timeouts. Each request can configure its own proxy. "
    "If an error occurs, an exception is raised and the request can be retried by the caller."
)
RU = "Клиент поддерживает пул соединений и тайм-ауты. Каждый запрос может настроить собственный прокси."
AR = "يدعم العميل تجميع الاتصالات والمهلات. يمكن لكل طلب تكوين الوكيل الخاص به."
FR = (
    "Le client prend en charge HTTP/2 et les interfaces asynchrones. Il est possible de configurer les délais "
    "d'attente pour chaque requête, et le pool de connexions garde les connexions ouvertes aussi longtemps que "
    "nécessaire. Si une erreur se produit, une exception est levée et la requête peut être relancée. La "
    "documentation décrit aussi comment utiliser un proxy et comment envoyer des fichiers."
)
JA = "クライアントは接続プールとタイムアウトをサポートしています。"

ZH_DOCS = {
    "guide.md": "# 客户端指南\n\n客户端支持连接池和超时设置。默认情况下，每个连接池最多保留十个空闲连接。\n\n"
    "## 代理\n\n每个请求都可以单独配置代理。代理地址必须以 http 或 https 开头。\n",
    "errors.md": "# 错误处理\n\n如果发生网络错误，客户端会抛出异常。请求可以重试三次，每次间隔一秒。\n\n"
    "## 超时\n\n连接超时默认为五秒，读取超时默认为十秒。\n",
}


# ------------------------------------------------------------------------------------------------ detection


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        ([ZH], "zh"),
        ([EN], "en"),
        ([JA], "zh"),  # kana: CJK, and the multilingual models either way
        ([RU], "multi"),
        ([AR], "multi"),
        ([FR], "multi"),  # Latin script, but almost no English function words
        ([f"HTTPX 是一个功能齐全的 HTTP 客户端，支持 async 和 HTTP/2。{ZH}"], "zh"),  # Chinese with English terms
        ([EN * 3, "它支持 HTTP/2。"], "en"),  # English with a Chinese sentence
        ([EN, ZH, ZH], "zh"),  # a mixed corpus, mostly Chinese
        ([EN, RU, RU], "multi"),
        (["", "1234 5678 !!", "==="], "en"),  # no letters: English, the old default
        (["Le client est rapide."], "en"),  # too few words to tell French from English: English
    ],
)
def test_detect_language_by_script(texts, expected):
    assert detect_language(texts) == expected
    assert resolve_language("auto", texts) == expected


def test_detection_reads_only_a_prefix():
    consumed = 0

    def endless():
        nonlocal consumed
        while True:
            consumed += 1
            yield EN if consumed <= 2000 else ZH

    detection = detect(endless())
    assert detection.language == "en" and detection.chars == lang._SAMPLE_CHARS
    assert consumed == -(-lang._SAMPLE_CHARS // len(EN))  # stopped as soon as the budget was spent
    assert "English function words" in detection.describe()


def test_language_setting_validation(monkeypatch):
    monkeypatch.setenv(LANGUAGE_ENV, "multi")  # read by citekeeper.settings only: the language module takes values
    assert language_setting() == "auto" and language_setting(None) == "auto"
    assert resolve_language(None, [EN]) == "en"  # detected
    assert language_setting(" ZH ") == "zh" and resolve_language("multi", [EN]) == "multi"
    for bad in ("fr", "chinese", "en-US"):
        with pytest.raises(LanguageError) as excinfo:
            language_setting(bad)
        assert repr(bad) in str(excinfo.value) and "auto, en, zh, multi" in str(excinfo.value)
    assert read_settings({LANGUAGE_ENV: " Multi"}).language == "multi" and read_settings({}).language is None
    with pytest.raises(SettingsError, match="CITEKEEPER_LANGUAGE: unknown language 'klingon'"):
        read_settings({LANGUAGE_ENV: "klingon"})
    assert LANGUAGES == ("auto", "en", "zh", "multi")


def test_default_models_per_language():
    assert models_for("en").nli == ENGLISH_NLI == DEFAULT_MODEL == ENGLISH.nli
    assert models_for("zh").nli == models_for("multi").nli == MULTILINGUAL_NLI == MULTILINGUAL.nli


def test_choose_nli_model_reads_texts_only_for_auto():
    calls = []

    def texts():
        calls.append(1)
        return [ZH]

    explicit = choose_nli_model("/models/mine", "auto", texts)
    assert explicit.model == "/models/mine" and explicit.language is None and "--model given" in explicit.reason
    fixed = choose_nli_model(None, "en", texts)
    assert fixed.model == ENGLISH_NLI and fixed.language == "en" and "(set)" in fixed.reason
    assert calls == []
    detected = choose_nli_model(None, "auto", texts, source="corpus version v1")
    assert calls == [1]
    assert detected.model == MULTILINGUAL_NLI and detected.language == "zh" and detected.setting == "auto"
    assert "detected from corpus version v1" in detected.reason and "CJK 100%" in detected.reason
    with pytest.raises(LanguageError):
        choose_nli_model("/models/mine", "fr", texts)  # a bad setting is an error even when it is not used


# ----------------------------------------------------------------- the multilingual default's label order


def save_tiny_mdeberta(directory: Path, texts: list[str], favour_label: str | None = None) -> Path:
    """A random-weight model shaped like mDeBERTa-v3 (model_type deberta-v2: relative attention, p2c/c2p,
    no token types), tiny, with the XNLI id2label of the multilingual default; saved with save_pretrained."""
    import torch
    from transformers import AutoModelForSequenceClassification, DebertaV2Config

    tokenizer = build_tokenizer(texts, vocab_size=600, model_max_length=512)
    config = DebertaV2Config(
        **DEBERTA_V3_XSMALL  # the default model's architecture, at a tiny size
        | dict(
            vocab_size=len(tokenizer),
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            pooler_hidden_size=32,
        ),
        id2label=XNLI_LABELS,
        label2id={v: k for k, v in XNLI_LABELS.items()},
        num_labels=3,
    )
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(config)
    if favour_label is not None:
        with torch.no_grad():
            model.classifier.bias[config.label2id[favour_label]] += 8.0
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.mark.parametrize(
    ("favour", "status", "probability"),
    [
        ("entailment", "supported", "p_entailment"),
        ("contradiction", "contradicted", "p_contradiction"),
        ("neutral", "unsupported", "p_neutral"),
    ],
)
def test_xnli_label_order_of_the_multilingual_default(tmp_path, favour, status, probability):
    model_dir = save_tiny_mdeberta(tmp_path / "mdeberta", [ZH, EN], favour_label=favour)
    saved = json.loads((model_dir / "config.json").read_text())
    assert saved["model_type"] == "deberta-v2"
    assert {int(k): v for k, v in saved["id2label"].items()} == XNLI_LABELS
    scorer = load_scorer(str(model_dir))
    assert scorer.protocol.columns == (0, 1, 2)  # entailment, neutral, contradiction: already canonical
    claims = claims_frame([("a", "c", "客户端可以重试请求。", 1)])
    citations = citations_frame([{"answer_id": "a", "claim_id": "c", "citation_id": "k", "chunk_text": ZH}])
    result = verify(claims, citations, "v1", scorer)
    assert result.claims["status"].to_list() == [status]
    assert result.pairs[probability][0] > 0.99
    assert scorer.model_calls == 1


# -------------------------------------------------------------------------------------- a Chinese store


def run_cli(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), env={"HF_HUB_OFFLINE": "1", **(env or {})})


@pytest.fixture(scope="module")
def zh_world(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("zh-world")
    store_dir = base / "store"
    ingested = run_cli("ingest", str(write_tree(base / "src", ZH_DOCS)), "--store", str(store_dir), "--version", "v1")
    assert ingested.exit_code == 0, ingested.output
    store = CorpusStore(store_dir)
    chunks = store.read_chunks("v1", columns=["chunk_id", "text"])
    records = [
        {
            "answer_id": f"zh-{i}",
            "question": "客户端怎么处理错误？",
            "answer": "...",
            "corpus_version": "v1",
            "claims": [{"text": "客户端可以配置。", "citations": [{"chunk_id": row["chunk_id"]}]}],
        }
        for i, row in enumerate(chunks.iter_rows(named=True))
    ]
    answers = base / "answers.jsonl"
    answers.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n", encoding="utf-8")
    AnswerStore(store.root).add(answers)
    check_citations(store, "v1")
    texts = [ZH, EN, *ZH_DOCS.values()]
    return {
        "base": base,
        "store": store,
        "mdeberta": save_tiny_mdeberta(base / "mdeberta", texts, favour_label="entailment"),
        "bert": save_random_nli_model(base / "bert", texts, favour_label="entailment"),
    }


def test_store_sample_is_chinese(zh_world):
    texts = sample_store_texts(zh_world["store"], "v1")
    assert texts and all(text in "".join(ZH_DOCS.values()) for text in texts)
    assert detect_language(texts) == "zh"
    one_doc = sample_store_texts(zh_world["store"], "v1", max_docs=1)
    assert 0 < len(one_doc) < len(texts)  # the sample is of documents, not the whole version


def test_cli_verify_picks_the_multilingual_model_for_a_chinese_store(zh_world, tmp_path, monkeypatch):
    monkeypatch.delenv(LANGUAGE_ENV, raising=False)
    store, out = str(zh_world["store"].root), str(tmp_path / "out")
    offline = {"HF_HOME": str(tmp_path / "hf")}
    auto = run_cli("verify", "--store", store, "--out", out, env=offline)
    assert auto.exit_code == 1
    assert f"cannot load NLI model {MULTILINGUAL_NLI!r}" in auto.output
    assert "language zh, detected from corpus version v1" in auto.output
    assert "--model /local/dir" in auto.output and "--language" in auto.output
    assert ENGLISH_NLI not in auto.output

    english = run_cli("verify", "--store", store, "--out", out, "--language", "en", env=offline)
    assert english.exit_code == 1
    assert f"cannot load NLI model {ENGLISH_NLI!r}" in english.output and "language en (set)" in english.output
    assert MULTILINGUAL_NLI not in english.output

    from_env = run_cli("verify", "--store", store, "--out", out, env={**offline, LANGUAGE_ENV: "multi"})
    assert from_env.exit_code == 1 and f"cannot load NLI model {MULTILINGUAL_NLI!r}" in from_env.output
    assert "language multi (set)" in from_env.output

    bad_env = run_cli("verify", "--store", store, "--out", out, env={LANGUAGE_ENV: "fr"})
    assert (
        bad_env.exit_code == 2 and "CITEKEEPER_LANGUAGE" in bad_env.output and "auto, en, zh, multi" in bad_env.output
    )
    bad_option = run_cli("verify", "--store", store, "--out", out, "--language", "fr")
    assert bad_option.exit_code == 2 and "'fr' is not one of" in bad_option.output
    assert not (tmp_path / "out").exists()  # every failure happened before verifying


def test_cli_verify_explicit_model_wins(zh_world, tmp_path):
    model = str(zh_world["mdeberta"])
    result = run_cli(
        "verify",
        "--store",
        str(zh_world["store"].root),
        "--out",
        str(tmp_path / "out"),
        "--model",
        model,
        "--language",
        "en",
    )
    assert result.exit_code == 0, result.output
    assert f"model: {model} @ sha256:" in result.output and "--model given" in result.output
    claims = pl.read_parquet(next((tmp_path / "out").rglob("claims.parquet")))
    assert claims.height == AnswerStore(zh_world["store"].root).claims().height > 0
    assert set(claims["model_id"]) == {model}


def test_models_never_share_cached_verdicts(zh_world, tmp_path):
    """The verdict cache key is (model id @ revision / backend, settings, claim hash, evidence hash)."""
    store = zh_world["store"]
    shutil.rmtree(store.root / "verify" / "cache", ignore_errors=True)  # other tests verified this store too
    first, _ = verify_store(store, tmp_path / "a", version="v1", scorer=load_scorer(str(zh_world["bert"])))
    assert first.stats["model_calls"] > 0
    other, _ = verify_store(store, tmp_path / "b", version="v1", scorer=load_scorer(str(zh_world["mdeberta"])))
    judged = first.stats["n_unique_pairs"] - first.stats["lexical_decisions"]
    assert judged > 0 and first.stats["cache_hits"] == 0
    assert other.stats["cache_hits"] == 0 and other.stats["model_calls"] > 0  # the bert verdicts are not reused
    again, _ = verify_store(store, tmp_path / "c", version="v1", scorer=load_scorer(str(zh_world["bert"])))
    assert again.stats["model_calls"] == 0 and again.stats["cache_hits"] == judged


def test_demo_model_choice_follows_the_corpus_language(tmp_path, monkeypatch):
    from pipelines.cli_demo import SAMPLE_CORPUS, nli_model_or_reason

    monkeypatch.delenv(LANGUAGE_ENV, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    write_tree(tmp_path / "corpus" / "v1", ZH_DOCS)
    model, note = nli_model_or_reason(None, False, None, tmp_path / "corpus")
    assert model is None and f"model {MULTILINGUAL_NLI} could not be loaded" in note and "language zh, detected" in note
    model, note = nli_model_or_reason(None, False, "en", tmp_path / "corpus")
    assert model is None and f"model {ENGLISH_NLI} could not be loaded" in note
    model, note = nli_model_or_reason(None, False, None, SAMPLE_CORPUS)
    assert model is None and f"model {ENGLISH_NLI} could not be loaded" in note and "language en, detected" in note


# ------------------------------------------------------------------------------------------------ Dagster


def test_resource_language_is_validated_and_read_from_env():
    from assets.resources import VerifierResource
    from assets.verification import code_version
    from pipelines.definitions import settings_from_env

    assert VerifierResource().language == "auto" and VerifierResource(language="ZH").language == "zh"
    with pytest.raises(Exception, match=r"unknown language 'fr'; use one of auto, en, zh, multi"):
        VerifierResource(language="fr")
    assert settings_from_env({LANGUAGE_ENV: "multi"}).verifier.language == "multi"
    assert settings_from_env({}).verifier.language == "auto"
    with pytest.raises(Exception, match="unknown language"):
        settings_from_env({LANGUAGE_ENV: "fr"})
    versions = {code_version(settings_from_env({LANGUAGE_ENV: v}).verifier) for v in ("auto", "en", "zh")}
    assert len(versions) == 3 and code_version(settings_from_env({}).verifier) == code_version(VerifierResource())


def materialize_verification(store: CorpusStore, **config):
    from assets.verification import verification
    from tests.dagster_settings import settings

    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("corpus_version", ["v1"])
    resources = settings(store_dir=str(store.root), **config).resources()
    return dg.materialize(
        [verification], partition_key="v1", resources=resources, instance=instance, raise_on_error=False
    )


def test_dagster_asset_picks_the_model_per_language(zh_world, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    store = zh_world["store"]

    failed = materialize_verification(store, nli_model="auto")
    assert not failed.success
    errors = [e.event_specific_data.error.message for e in failed.all_events if e.is_step_failure]
    assert len(errors) == 1 and MULTILINGUAL_NLI in errors[0] and "language zh, detected" in errors[0]

    # the multilingual default, stood in for by a local tiny mDeBERTa
    monkeypatch.setitem(lang.MODELS, "zh", LanguageModels(nli=str(zh_world["mdeberta"]), embedding=None))
    result = materialize_verification(store, nli_model="auto")
    assert result.success
    metadata = {k: v.value for k, v in result.asset_materializations_for_node("verification")[0].metadata.items()}
    assert metadata["language"] == "zh" and metadata["language_setting"] == "auto"
    assert metadata["model"].startswith(f"{zh_world['mdeberta']}@sha256:")
    assert "detected from corpus version v1" in metadata["model_choice"]

    english = materialize_verification(store, nli_model="auto", language="en")
    errors = [e.event_specific_data.error.message for e in english.all_events if e.is_step_failure]
    assert not english.success and ENGLISH_NLI in errors[0] and "language en (set)" in errors[0]

    explicit = materialize_verification(store, nli_model=str(zh_world["bert"]), language="zh")
    metadata = {k: v.value for k, v in explicit.asset_materializations_for_node("verification")[0].metadata.items()}
    assert explicit.success and metadata["model"].startswith(f"{zh_world['bert']}@")
    assert metadata["language"] == "n/a" and "nli_model given" in metadata["model_choice"]

    none = materialize_verification(store)  # nli_model unset: the model-free tiers, as before
    metadata = {k: v.value for k, v in none.asset_materializations_for_node("verification")[0].metadata.items()}
    assert none.success and metadata["model"] == "none" and metadata["language"] == "n/a"
