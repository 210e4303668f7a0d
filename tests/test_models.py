"""Where models come from (citekeeper.model_sources): a local directory, the local Hugging Face cache, a download from
a hub (a real HTTP server on loopback serving a tiny random-weight model), a network that never answers, and
`citekeeper models pull` for machines without network.

Hub loading runs in fresh interpreters: huggingface_hub reads HF_HOME when imported, and this test session runs
with HF_HUB_OFFLINE=1 (conftest)."""

from __future__ import annotations

import json

import pytest

from citekeeper.language import MULTILINGUAL
from citekeeper.model_sources import HUB_TIMEOUT_S, ModelSourceError, needed_files, pulled_name, resolve_model
from citekeeper.search_index import EmbeddingStore
from tests.hub_server import LoopbackHub, hub_env, run_python, unanswered_endpoint
from tests.random_models import save_random_nli_model
from verifiers.checkers.loading import load_scorer

MODEL = "citekeeper-test/tiny-nli"
TEXTS = ["HTTPX is a fully featured HTTP client for Python 3.", "The client supports timeouts and proxies."] * 3
# Loads MODEL (argv[1]) in a fresh interpreter and prints what came back, or the ModelUnavailable message.
LOAD = """
import json, sys, time
from verifiers.checkers.loading import ModelUnavailable, load_scorer
started = time.monotonic()
try:
    scorer = load_scorer(sys.argv[1])
    verdict = scorer.score(["HTTPX is an HTTP client."], ["HTTPX is a client."]).argmax(axis=1).tolist()
    print(json.dumps({"revision": scorer.revision, "verdict": verdict, "seconds": time.monotonic() - started}))
except ModelUnavailable as exc:
    print(json.dumps({"error": str(exc), "seconds": time.monotonic() - started}))
"""
CLI = "from pipelines.cli import main; main()"


@pytest.fixture(scope="module")
def hub_repo(tmp_path_factory):
    """A tiny NLI model laid out as a hub repo: besides what from_pretrained needs, a second copy of the weights
    in the older format and an ONNX export in a subfolder, neither of which a download may fetch."""
    directory = save_random_nli_model(tmp_path_factory.mktemp("repo") / "tiny-nli", TEXTS, favour_label="entailment")
    (directory / "pytorch_model.bin").write_bytes(b"the same weights again, in the pickle format")
    (directory / "onnx").mkdir()
    (directory / "onnx" / "model.onnx").write_bytes(b"an ONNX export")
    (directory / "README.md").write_text("# tiny-nli\n")
    return directory


def outcome(result) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_local_directory_loads_as_is(tmp_path):
    model_dir = save_random_nli_model(tmp_path / "model", TEXTS)
    local = resolve_model(str(model_dir))
    assert local.path == model_dir and local.commit is None
    with pytest.raises(ModelSourceError, match=r"has no config\.json"):
        resolve_model(tmp_path)
    with pytest.raises(ModelSourceError, match="does not exist"):
        resolve_model(str(tmp_path / "no-such-model"))


def test_only_the_files_from_pretrained_needs_are_chosen():
    repo = [
        "config.json",
        "model.safetensors",
        "pytorch_model.bin",
        "tokenizer.json",
        "spm.model",
        "onnx/model.onnx",
        "README.md",
    ]
    assert needed_files(repo) == ["config.json", "spm.model", "tokenizer.json", "model.safetensors"]
    assert needed_files(["config.json", "pytorch_model.bin", "vocab.txt"]) == [
        "config.json",
        "vocab.txt",
        "pytorch_model.bin",
    ]
    assert pulled_name(MODEL) == "citekeeper-test--tiny-nli" and pulled_name("/models/my nli/") == "my_nli"


def test_a_hub_id_is_downloaded_once_then_loads_from_the_cache_without_network(hub_repo, tmp_path):
    with LoopbackHub({MODEL: hub_repo}).running() as hub:
        env = hub_env(tmp_path / "hf", hub.url)
        first = run_python(LOAD, MODEL, env=env)
        loaded = outcome(first)
        assert loaded["revision"] == hub.commits[MODEL] and loaded["verdict"] == [0]  # canonical column 0: entailment
        fetched = {name.removeprefix(MODEL + "/") for name in hub.downloaded()}
        assert {"config.json", "tokenizer.json", "model.safetensors"} <= fetched
        assert not fetched & {"pytorch_model.bin", "onnx/model.onnx", "README.md"}
        assert f"downloading {MODEL} from {hub.url}" in first.stderr and "Fetching" in first.stderr  # progress

        hub.requests.clear()
        again = outcome(run_python(LOAD, MODEL, env=env))
        assert again["revision"] == hub.commits[MODEL] and hub.requests == []  # no request at all


def test_without_network_a_hub_id_fails_within_seconds_with_guidance(tmp_path):
    with unanswered_endpoint() as endpoint:
        failed = outcome(run_python(LOAD, MODEL, env=hub_env(tmp_path / "hf", endpoint)))
    # Not minutes of TCP and huggingface_hub retries: one HUB_TIMEOUT_S (the message says so), with a margin wide
    # enough for a busy machine; a hang the bound misses would take minutes.
    assert failed["seconds"] < 12 * HUB_TIMEOUT_S
    message = failed["error"]
    assert f"cannot load NLI model {MODEL!r}" in message and f"cannot be fetched from {endpoint}" in message
    assert "no answer within 5 s" in message and "--model /local/dir" in message and "--no-model" in message
    assert "citekeeper models pull" in message


def test_hf_hub_offline_read_at_call_time_makes_no_request(hub_repo, monkeypatch):
    with LoopbackHub({MODEL: hub_repo}).running() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        with pytest.raises(ModelSourceError, match="not in the local Hugging Face cache and HF_HUB_OFFLINE=1"):
            resolve_model(MODEL)
        assert hub.requests == []  # no request at all, so no time spent waiting on one


EMBED = """
import json, sys, time, warnings
from citekeeper.search_index import EmbeddingStore
started = time.monotonic()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    embedder = EmbeddingStore(sys.argv[2], model=sys.argv[1]).embedder_for("en")
print(json.dumps({"dim": embedder and embedder.dim, "warnings": [str(w.message) for w in caught],
                  "seconds": time.monotonic() - started}))
"""


def test_an_embedding_hub_id_is_downloaded_or_falls_back_to_full_text_fast(hub_repo, tmp_path):
    with LoopbackHub({MODEL: hub_repo}).running() as hub:
        loaded = outcome(run_python(EMBED, MODEL, str(tmp_path / "store"), env=hub_env(tmp_path / "hf", hub.url)))
    assert loaded["dim"] == 32 and loaded["warnings"] == []
    with unanswered_endpoint() as endpoint:
        env = hub_env(tmp_path / "hf-empty", endpoint)
        fallback = outcome(run_python(EMBED, MODEL, str(tmp_path / "store"), env=env))
    # Bounded by the hub timeout, not minutes of TCP and hub retries: against the same process loading the model
    # from a hub that answers (the same imports, measured in this run, so a busy machine slows both alike).
    assert fallback["dim"] is None and fallback["seconds"] < loaded["seconds"] + 3 * HUB_TIMEOUT_S
    assert any("falls back to full-text search" in w and "citekeeper models pull" in w for w in fallback["warnings"])


def test_models_pull_saves_plain_directories_that_load_by_path(hub_repo, tmp_path):
    out = tmp_path / "models"
    served = {MODEL: hub_repo, MULTILINGUAL.nli: hub_repo, MULTILINGUAL.embedding: hub_repo}
    with LoopbackHub(served).running() as hub:
        env = hub_env(tmp_path / "hf", hub.url)
        by_language = run_python(CLI, "models", "pull", "--to", str(out), "--language", "zh", env=env)
        explicit = run_python(CLI, "models", "pull", MODEL, "--to", str(out), env=env)
    assert by_language.returncode == 0 and explicit.returncode == 0, by_language.stderr + explicit.stderr
    nli_dir, embedding_dir = out / pulled_name(MULTILINGUAL.nli), out / pulled_name(MULTILINGUAL.embedding)
    assert f"use: --model {nli_dir}" in by_language.stdout
    assert f"use: CITEKEEPER_EMBEDDING_MODEL={embedding_dir}" in by_language.stdout
    assert f"{MODEL} @ {hub.commits[MODEL]} -> {out / 'citekeeper-test--tiny-nli'}" in explicit.stdout
    assert sorted(path.name for path in out.iterdir()) == sorted(
        [nli_dir.name, embedding_dir.name, "citekeeper-test--tiny-nli"]
    )
    pulled = sorted(path.name for path in nli_dir.iterdir())
    assert "config.json" in pulled and "model.safetensors" in pulled and "pytorch_model.bin" not in pulled
    assert not any(path.is_symlink() for path in nli_dir.iterdir())  # real files, not links into the cache

    scorer = load_scorer(str(nli_dir))  # this session is offline: the directory alone is enough
    assert scorer.model_id == str(nli_dir) and scorer.revision.startswith("sha256:")
    assert EmbeddingStore(tmp_path / "store", model=str(embedding_dir)).embedder_for("zh").dim == 32
