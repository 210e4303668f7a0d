"""Writes that must appear whole or not at all, checked by SIGKILLing a real process midway: the ONNX int8
export (killed after quantising, before the rename) and the LanceDB chunk table with its full-text index
(killed after creating the table, before indexing it)."""

from __future__ import annotations

import json
import signal

import polars as pl
import pytest

from citekeeper.search_index import EmbeddingModelUnavailable, EmbeddingStore
from tests.chunk_frames import build_version
from tests.hub_server import run_python
from tests.random_models import save_random_nli_model
from verifiers.checkers.loading import load_scorer

TEXTS = ["HTTPX is a fully featured HTTP client for Python 3.", "The client supports timeouts and proxies."] * 3
EXPORT_KILLED_AFTER_QUANTISING = """
import os, signal, sys
import onnxruntime.quantization as quantization
from verifiers.checkers.loading import load_scorer

quantize_dynamic = quantization.quantize_dynamic

def quantize_then_die(model_input, model_output, **options):
    quantize_dynamic(model_input, model_output, **options)
    os.kill(os.getpid(), signal.SIGKILL)  # the int8 model is written, not yet renamed into place

quantization.quantize_dynamic = quantize_then_die
load_scorer(sys.argv[1], backend="onnx", onnx_cache_dir=sys.argv[2])
"""


def test_an_onnx_export_killed_midway_leaves_no_model_and_a_later_export_succeeds(tmp_path):
    model_dir = save_random_nli_model(tmp_path / "model", TEXTS)
    cache = tmp_path / "onnx"
    killed = run_python(EXPORT_KILLED_AFTER_QUANTISING, str(model_dir), str(cache))
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = sorted(path.name for path in cache.rglob("*.onnx"))
    assert [name.split(".")[2] for name in left] == ["fp32", "int8"]  # both temps were written...
    assert all(name.startswith(".model.") for name in left)  # ...and nothing under the final name

    scorer = load_scorer(str(model_dir), backend="onnx", onnx_cache_dir=cache)
    assert scorer.score(TEXTS[:2], TEXTS[2:4]).shape == (2, 3)
    assert [path.name for path in cache.rglob("model.int8.onnx")] == ["model.int8.onnx"]


DOCS = {
    "timeouts.md": "HTTPX enables timeouts by default.\n\nThe default timeout is five seconds of network inactivity.",
    "proxies.md": (
        "Proxies are configured with the proxy argument.\n\nSet HTTPS_PROXY to route traffic through a proxy."
    ),
}
INDEX_KILLED_BEFORE_FTS = """
import json, os, signal, sys
from lancedb.table import LanceTable
from citekeeper.search_index import EmbeddingStore
from tests.chunk_frames import build_version

def die(self, *args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)  # the chunk table exists, its full-text index does not

LanceTable.create_index = die
_, chunks = build_version("v1", json.loads(sys.argv[3]))
EmbeddingStore(sys.argv[1], model=sys.argv[2], language="en").chunk_index("v1", chunks)
"""


def test_a_chunk_table_whose_indexing_was_killed_is_still_found_by_full_text_search(tmp_path):
    store_root, no_model = tmp_path / "store", str(tmp_path / "no-such-model")  # full-text search only
    killed = run_python(INDEX_KILLED_BEFORE_FTS, str(store_root), no_model, json.dumps(DOCS))
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    store = EmbeddingStore(store_root, model=no_model, language="en")
    (name,) = [name for name in store.db.list_tables().tables if name.startswith("chunks__")]
    assert store.db.open_table(name).list_indices() == []

    _, chunks = build_version("v1", DOCS)
    with pytest.warns(EmbeddingModelUnavailable):
        index = store.chunk_index("v1", chunks)
    hits = index.search("default timeout network inactivity")
    expected = chunks.filter(pl.col("text").str.contains("five seconds"))["chunk_id"].item()
    assert index.table.name == name and hits and hits[0].chunk_id == expected and hits[0].method == "fts"
