"""A model folder is data, never code (docs/production.md, "Security model"): custom code named by `auto_map` is
refused before anything loads, whatever stdin answers; a pickle in the weights is refused as one clear error and
never run; safetensors win over pickles; and every from_pretrained of the product says trust_remote_code=False."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from citekeeper.model_sources import ModelSourceError, UntrustedModelError, pull
from citekeeper.search_index import Embedder
from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from tests.chunk_frames import write_tree
from tests.conftest import REPO
from tests.random_models import save_random_nli_model
from verifiers.checkers.loading import ModelUnavailable, load_scorer

TEXTS = ["The client keeps four connections alive.", "It shipped in release two."] * 3
CLI = "from pipelines.cli import main; main()"
PRODUCT_PACKAGES = ("citekeeper", "parsers", "changes", "verifiers", "reports", "assets", "pipelines")
# What a folder's own module gets named as in each file transformers reads `auto_map` from.
AUTO_MAPS = {
    "config.json": {"AutoConfig": "evil_code.EvilConfig", "AutoModelForSequenceClassification": "evil_code.EvilModel"},
    "tokenizer_config.json": {"AutoTokenizer": [None, "evil_code.EvilTokenizer"]},
}


class OpensMarker:
    """Unpickled, creates the marker file: what a hostile pytorch_model.bin would run."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A store with one version: verify loads its model after finding the version."""
    base = tmp_path_factory.mktemp("corpus")
    store = CorpusStore(base / "store")
    ingest(write_tree(base / "src", {"guide.md": "# Guide\n\n" + " ".join(TEXTS[:2])}), store, version="v1")
    return store.root


def with_custom_code(directory: Path, json_name: str, marker: Path) -> Path:
    """`directory` with a module that writes `marker` when imported and `auto_map` in `json_name` naming it. The
    model type is one transformers does not know, so that only the folder's code could load it: unpatched,
    transformers asks `Do you wish to run the custom code? [y/N]` on stdin."""
    (directory / "evil_code.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        "from transformers import BertConfig, BertForSequenceClassification as EvilModel, "
        "PreTrainedTokenizerFast as EvilTokenizer\n"
        "class EvilConfig(BertConfig):\n    model_type = 'citekeeper-evil'\n",
        encoding="utf-8",
    )
    settings = json.loads((directory / json_name).read_text(encoding="utf-8"))
    settings["auto_map"] = AUTO_MAPS[json_name]
    if json_name == "config.json":
        settings["model_type"] = "citekeeper-evil"
    (directory / json_name).write_text(json.dumps(settings), encoding="utf-8")
    return directory


def with_pickled_weights(directory: Path, marker: Path) -> Path:
    """`directory` with a pytorch_model.bin whose unpickling would create `marker`."""
    import torch

    torch.save({"classifier.weight": OpensMarker(marker)}, directory / "pytorch_model.bin")
    return directory


def verify_cli(store: Path, model: Path, out: Path) -> subprocess.CompletedProcess:
    """The real `citekeeper verify --model DIR` in its own process, answering `y` to any question on stdin."""
    command = [sys.executable, "-c", CLI, "verify", "--store", str(store), "--model", str(model), "--out", str(out)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(command, input="y\n" * 10, capture_output=True, text=True, cwd=REPO, env=env, timeout=300)


@pytest.mark.parametrize("json_name", AUTO_MAPS)
def test_verify_refuses_a_model_folder_with_custom_code_whatever_stdin_says(corpus, tmp_path, json_name):
    marker = tmp_path / "marker"
    model = with_custom_code(save_random_nli_model(tmp_path / "model", TEXTS), json_name, marker)
    done = verify_cli(corpus, model, tmp_path / "out")
    assert not marker.exists()
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert f"{model / json_name}" in done.stderr and "auto_map" in done.stderr, done.stderr
    assert "run the custom code" not in done.stdout + done.stderr  # never asked


def test_verify_refuses_pickled_weights_as_one_clear_error(corpus, tmp_path):
    marker = tmp_path / "marker"
    model = save_random_nli_model(tmp_path / "model", TEXTS)
    (model / "model.safetensors").unlink()
    with_pickled_weights(model, marker)
    done = verify_cli(corpus, model, tmp_path / "out")
    assert not marker.exists()
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert f"{model / 'pytorch_model.bin'}" in done.stderr and "UnpicklingError" not in done.stderr, done.stderr


def test_embedder_and_scorer_refuse_pickled_weights_naming_the_file(tmp_path):
    marker = tmp_path / "marker"
    model = save_random_nli_model(tmp_path / "model", TEXTS)
    (model / "model.safetensors").unlink()
    with_pickled_weights(model, marker)
    with pytest.raises(ModelSourceError, match=r"pytorch_model\.bin"):
        Embedder(model)
    with pytest.raises(ModelUnavailable, match=r"pytorch_model\.bin"):
        load_scorer(str(model))
    assert not marker.exists()


def test_safetensors_are_loaded_and_a_pickle_beside_them_is_never_read(tmp_path):
    marker = tmp_path / "marker"
    model = with_pickled_weights(save_random_nli_model(tmp_path / "model", TEXTS), marker)
    scorer = load_scorer(str(model))
    assert scorer.score(["The client keeps four connections alive."], ["It keeps connections."]).shape == (1, 3)
    assert Embedder(model).dim == 32
    assert not marker.exists()


@pytest.mark.parametrize("json_name", AUTO_MAPS)
def test_embedder_and_scorer_refuse_custom_code_naming_the_file_and_key(tmp_path, json_name):
    marker = tmp_path / "marker"
    model = with_custom_code(save_random_nli_model(tmp_path / "model", TEXTS), json_name, marker)
    with pytest.raises(ModelSourceError, match="auto_map") as refused:
        Embedder(model)
    assert str(model / json_name) in str(refused.value)
    with pytest.raises(ModelUnavailable, match="auto_map"):
        load_scorer(str(model))
    with pytest.raises(UntrustedModelError, match="auto_map"):
        pull([str(model)], tmp_path / "pulled")
    assert not marker.exists() and not any((tmp_path / "pulled").iterdir())


def model_loading_calls() -> list[tuple[Path, ast.Call]]:
    """Every call of the product that loads a model folder: `.from_pretrained(...)` and sentence-transformers'
    constructors."""
    calls = []
    for package in PRODUCT_PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and _called_name(node.func) in {
                    "from_pretrained",
                    "SentenceTransformer",
                    "CrossEncoder",
                }:
                    calls.append((path.relative_to(REPO), node))
    return calls


def _called_name(func: ast.expr) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def test_every_model_load_of_the_product_refuses_remote_code_in_one_place():
    calls = model_loading_calls()
    assert calls  # the walk finds them: the transformers and sentence-transformers loads
    for path, call in calls:
        keywords = {k.arg: k.value for k in call.keywords}
        refused = (
            isinstance(keywords.get("trust_remote_code"), ast.Constant) and keywords["trust_remote_code"].value is False
        )
        assert refused, f"{path}:{call.lineno} loads a model without trust_remote_code=False"
    assert {path for path, _ in calls} == {Path("citekeeper/model_sources.py")}  # the one owner of "how a folder loads"
