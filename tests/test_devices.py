"""Where the NLI model runs: device resolution and its CPU fallback (a stand-in torch.cuda, and the real CPU path),
the halve-on-out-of-memory batch size on a real tiny model, and precision in the verdict cache key."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch

from tests.random_models import save_random_nli_model
from tests.verify_helpers import TableScorer, citations_frame, claims_frame, verify
from verifiers.checkers.backends import TorchScorer, onnx_providers
from verifiers.checkers.base import model_key
from verifiers.checkers.loading import load_scorer
from verifiers.devices import resolve_device
from verifiers.verdict_cache import VerdictCache

TEXTS = [f"Release {i} of the client keeps {i + 2} connections alive and retries {i % 3} times." for i in range(24)]


@dataclass
class FakeCuda:
    """torch.cuda as far as resolve_device asks it."""

    devices: list[tuple[str, tuple[int, int]]] = field(default_factory=list)  # (name, compute capability)

    def is_available(self) -> bool:
        return bool(self.devices)

    def device_count(self) -> int:
        return len(self.devices)

    def current_device(self) -> int:
        return 0

    def get_device_capability(self, index: int) -> tuple[int, int]:
        return self.devices[index][1]

    def get_device_name(self, index: int) -> str:
        return self.devices[index][0]


def test_auto_takes_the_gpu_with_its_precision():
    h200, t4 = ("NVIDIA H200", (9, 0)), ("Tesla T4", (7, 5))
    assert resolve_device("auto", FakeCuda([h200])).device == "cuda:0"
    assert resolve_device("auto", FakeCuda([h200])).precision == "bf16"
    placed = resolve_device("cuda:1", FakeCuda([h200, t4]))
    assert (placed.device, placed.precision) == ("cuda:1", "fp16")  # no bf16 before compute capability 8.0
    assert "Tesla T4" in placed.reason


def test_fallback_to_cpu_says_why(caplog):
    with caplog.at_level(logging.INFO, logger="citekeeper.nli"):
        assert resolve_device("auto", FakeCuda()).device == "cpu"
        missing = resolve_device("cuda", FakeCuda())
        out_of_range = resolve_device("cuda:2", FakeCuda([("NVIDIA H200", (9, 0))]))
    assert (missing.device, missing.precision) == ("cpu", "fp32") and "no CUDA device" in missing.reason
    assert out_of_range.device == "cpu" and "cuda:2 does not exist (1 CUDA device(s))" in out_of_range.reason
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and all("event=nli_device_fallback" in w for w in warnings)  # auto is not a warning
    with pytest.raises(ValueError, match=re.escape("auto|cpu|cuda")):
        resolve_device("gpu0", FakeCuda())


def test_real_cpu_path(tmp_path):
    """This machine's torch: auto resolves to what torch sees, and a scorer loaded there runs."""
    placed = resolve_device("auto")
    assert placed.device == ("cuda:0" if torch.cuda.is_available() else "cpu")
    scorer = load_scorer(str(save_random_nli_model(tmp_path / "m", TEXTS)), device="cpu")
    assert (scorer.placement.device, scorer.precision, scorer.batch_size) == ("cpu", "fp32", 32)
    assert scorer.score(TEXTS[:3], TEXTS[3:6]).shape == (3, 3)
    assert onnx_providers(resolve_device("cpu"), ["CUDAExecutionProvider", "CPUExecutionProvider"]) == [
        "CPUExecutionProvider"
    ]
    on_gpu = resolve_device("cuda", FakeCuda([("NVIDIA H200", (9, 0))]))
    assert onnx_providers(on_gpu, ["CUDAExecutionProvider", "CPUExecutionProvider"])[0] == (
        "CUDAExecutionProvider",
        {"device_id": 0},
    )


class OutOfMemoryAbove(TorchScorer):
    """The real tiny model, behind a device that runs out of memory on batches larger than `limit` pairs."""

    limit: int = 5
    batches: list[int] = []

    def forward(self, encoded):
        size = len(encoded["input_ids"])
        if size > self.limit:
            raise torch.cuda.OutOfMemoryError(f"CUDA out of memory. Tried to allocate a batch of {size}")
        self.batches.append(size)
        return super().forward(encoded)


def test_out_of_memory_halves_the_batch_and_keeps_the_size(tmp_path):
    real = load_scorer(str(save_random_nli_model(tmp_path / "m", TEXTS)), device="cpu", batch_size=64)
    expected = real.score(TEXTS, TEXTS[::-1])
    squeezed = OutOfMemoryAbove(**{name: getattr(real, name) for name in real.__dataclass_fields__})
    squeezed.batches, squeezed.model_calls = [], 0
    probs = squeezed.score(TEXTS, TEXTS[::-1])
    np.testing.assert_allclose(probs, expected, rtol=1e-5, atol=1e-6)
    assert squeezed.batch_size == 4 and set(squeezed.batches) == {4}  # 64 -> 32 -> 16 -> 8 -> 4
    assert squeezed.model_calls == len(TEXTS)
    squeezed.score(TEXTS[:9], TEXTS[:9])  # the size that worked stays for the run: no new failures
    assert squeezed.batch_size == 4 and squeezed.batches[-3:] == [4, 4, 1]
    squeezed.limit = 0
    with pytest.raises(torch.cuda.OutOfMemoryError):  # nothing fits: the error is not swallowed
        squeezed.score(TEXTS[:2], TEXTS[:2])


def test_precision_is_in_the_cache_key(tmp_path):
    """Verdicts scored at fp32 are not served to a bf16 run, and the other way round; each run records its
    precision. fp32 keys keep the form they had before precision was recorded."""
    fp32 = TableScorer({}, precision="fp32")
    bf16 = TableScorer({}, precision="bf16")
    assert model_key(fp32) == "table-scorer@1/torch/fp32/nli" and model_key(bf16) == "table-scorer@1/torch/bf16/nli"
    claims = claims_frame([("a", "c", "The client keeps ten connections.", 1)])
    citations = citations_frame(
        [{"answer_id": "a", "claim_id": "c", "citation_id": "k", "chunk_text": "The pool is small."}]
    )
    cache = VerdictCache(tmp_path / "cache")
    runs = {}
    for name, scorer in (("fp32", fp32), ("bf16", bf16), ("fp32 again", fp32)):
        runs[name] = verify(claims, citations, "v1", scorer, cache=cache)
        cache.flush(name)
    assert runs["fp32"].stats["model_calls"] == 1 and runs["bf16"].stats["model_calls"] == 1
    assert runs["fp32 again"].stats == {**runs["fp32 again"].stats, "model_calls": 0, "cache_hits": 1}
    assert runs["bf16"].pairs["precision"].to_list() == ["bf16"] and runs["fp32"].run["precision"].item() == "fp32"
