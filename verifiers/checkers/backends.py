"""The backends a transformers-model checker runs on: torch (CPU or GPU, in the device's precision) and ONNX
Runtime with int8 weights, exported once and cached. Tokenisation, batching by length and out-of-memory handling
are shared; the bound protocol (verifiers.checkers.base.BoundProtocol) says how pairs become inputs and logits
become probabilities. Device placement is verifiers.devices'."""

from __future__ import annotations

import copy
import ctypes
import functools
import logging
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from citekeeper.files import replace_durably
from verifiers.checkers.base import BoundProtocol
from verifiers.checkers.presets import Preset
from verifiers.devices import DEFAULT_BACKEND, Placement, is_out_of_memory

log = logging.getLogger("citekeeper.nli")

BACKEND_PRECISION = {"torch": "fp32", "onnx": "int8"}  # each backend's precision on the CPU


@dataclass
class HFScorer:
    """Tokenisation, batching by length and out-of-memory handling shared by the backends; the checker protocol
    says how pairs become inputs and logits become probabilities.

    `batch_size` is where a run starts: an out-of-memory error halves it and the pass is retried, and the size
    that worked is kept for the rest of the run."""

    model_id: str
    revision: str
    tokenizer: Any
    protocol: BoundProtocol
    max_tokens: int
    batch_size: int = 32
    progress: bool = False
    backend: str = DEFAULT_BACKEND
    model_calls: int = 0
    placement: Placement = field(default_factory=lambda: Placement("cpu", "fp32", "cpu"))
    chunk_tokens: int | None = None  # evidence tokens per window (the checker's chunk size); None: all that fit
    preset: Preset | None = None

    @property
    def precision(self) -> str:
        return BACKEND_PRECISION[self.backend] if self.backend == "onnx" else self.placement.precision

    @property
    def checker(self) -> str:
        return self.protocol.name

    @property
    def checker_key(self) -> str:
        return self.protocol.key

    @property
    def where(self) -> str:
        return f"device: {self.placement.device}, {self.precision} ({self.placement.reason})"

    @functools.cached_property
    def prompt_tokens(self) -> int:
        """Tokens of each input besides evidence and claim: specials, and the protocol's prompt."""
        return self.protocol.prompt_tokens()

    def count_tokens(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        return [len(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]

    def encode(self, premises: list[str], hypotheses: list[str]) -> dict[str, np.ndarray]:
        return self.protocol.encode(premises, hypotheses)

    @staticmethod
    def length_order(premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """Pair indices by length: consecutive batches of it pad to similar lengths."""
        return np.argsort([len(p) + len(h) for p, h in zip(premises, hypotheses)], kind="stable")

    def score(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """Probabilities of every pair, `batch_size` pairs of similar length at a time."""
        from tqdm.auto import tqdm

        probs = np.empty((len(premises), 3), dtype=np.float64)
        order = self.length_order(premises, hypotheses)

        def encode(start: int, size: int) -> tuple[int, int, dict]:
            batch = order[start : start + size]
            return start, size, self.encode([premises[i] for i in batch], [hypotheses[i] for i in batch])

        with (
            ThreadPoolExecutor(max_workers=1) as tokeniser,
            tqdm(total=len(order), desc="NLI", unit="pair", disable=not self.progress or not len(order)) as bar,
        ):
            start, upcoming = 0, None
            while start < len(order):
                size = self.batch_size
                if upcoming is None or upcoming.result()[:2] != (start, size):
                    upcoming = tokeniser.submit(encode, start, size)
                encoded = upcoming.result()[2]
                # The next batch is tokenised while this one runs through the model.
                upcoming = tokeniser.submit(encode, start + size, size) if start + size < len(order) else None
                logits = self._forward_or_halve(size, functools.partial(self.forward, encoded))
                if logits is None:
                    continue
                batch = order[start : start + size]
                probs[batch] = self.to_canonical(logits)
                self.model_calls += len(batch)
                bar.update(len(batch))
                start += size
        return probs

    def _forward_or_halve(self, size: int, forward) -> np.ndarray | None:
        """`forward()`'s logits; None when a batch of `size` > 1 ran out of memory and the batch size was halved
        (the caller retries the pass). Any other error is raised."""
        try:
            return forward()
        except Exception as error:
            if not is_out_of_memory(error) or size == 1:
                raise
            self._halve_batch(error)
            return None

    def _halve_batch(self, error: BaseException) -> None:
        self.batch_size = max(1, self.batch_size // 2)
        log.warning(
            f"event=nli_out_of_memory device={self.placement.device} batch_size={self.batch_size} "
            f"error={str(error)[:200]!r}"
        )
        self.release_memory()

    def release_memory(self) -> None:
        """Give back what the failed pass allocated (the torch backend empties the CUDA cache)."""

    def to_canonical(self, logits: np.ndarray) -> np.ndarray:
        return self.protocol.to_canonical(logits)

    def forward(self, encoded: dict[str, np.ndarray]) -> np.ndarray:
        raise NotImplementedError


@dataclass
class TorchScorer(HFScorer):
    model: Any = None

    def score(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """A protocol that shares prefixes (causal-lm) scores the claims that share evidence from one encoding of it
        (its KV cache); every other protocol, and pairs whose evidence is theirs alone, go through HFScorer.score."""
        if not self.protocol.shares_prefix:
            return super().score(premises, hypotheses)
        probs = np.empty((len(premises), 3), dtype=np.float64)
        by_evidence: dict[str, list[int]] = {}
        for i, premise in enumerate(premises):
            by_evidence.setdefault(premise, []).append(i)
        alone = []
        for premise, indices in by_evidence.items():
            split = self.protocol.split_prompt(premise, [hypotheses[i] for i in indices]) if len(indices) > 1 else None
            if split and len(split[0]) + max(map(len, split[1])) <= self.max_tokens:
                probs[indices] = self._score_sharing(*split)
            else:
                alone.extend(indices)
        if alone:
            probs[alone] = super().score([premises[i] for i in alone], [hypotheses[i] for i in alone])
        return probs

    def _score_sharing(self, prefix: list[int], rests: list[list[int]]) -> np.ndarray:
        """The next-token verdicts of `prefix + rest` for each rest: the prefix runs once, its KV cache is copied to
        each batch, and only the rests run on it (right-padded; each row read at its own last token)."""
        import torch

        device = self.placement.device
        probs, start = np.empty((len(rests), 3), dtype=np.float64), 0
        with torch.inference_mode():
            cache = self.model(input_ids=torch.tensor([prefix], device=device), use_cache=True).cache
            while start < len(rests):
                size = min(self.batch_size, len(rests) - start)
                batch = rests[start : start + size]
                logits = self._forward_or_halve(size, functools.partial(self._rests_on, cache, len(prefix), batch))
                if logits is None:
                    continue
                probs[start : start + size] = self.protocol.to_canonical(logits[:, None, :])
                self.model_calls += size
                start += size
        return probs

    def _rests_on(self, cache, prefix_length: int, rests: list[list[int]]) -> np.ndarray:
        import torch

        device, pad = self.placement.device, self.tokenizer.pad_token_id
        lengths = torch.tensor([len(rest) for rest in rests], device=device)
        ids = torch.tensor([rest + [pad] * (int(lengths.max()) - len(rest)) for rest in rests], device=device)
        mask = torch.cat(
            [
                torch.ones((len(rests), prefix_length), dtype=torch.long, device=device),
                (torch.arange(ids.shape[1], device=device)[None, :] < lengths[:, None]).long(),
            ],
            dim=1,
        )
        shared = copy.deepcopy(cache)
        shared.batch_repeat_interleave(len(rests))
        hidden = self.model.base_model(
            input_ids=ids, attention_mask=mask, cache=shared, use_cache=True
        ).last_hidden_state
        last = hidden[torch.arange(len(rests), device=device), lengths - 1]
        return self.model.get_output_embeddings()(last).float().cpu().numpy()

    def forward(self, encoded: dict[str, np.ndarray]) -> np.ndarray:
        import torch

        with torch.inference_mode():
            inputs = {k: torch.from_numpy(v).to(self.placement.device) for k, v in encoded.items()}
            return self.model(**inputs, **self.protocol.forward_kwargs).logits.float().cpu().numpy()

    def release_memory(self) -> None:
        if self.placement.is_cuda:
            import torch

            torch.cuda.empty_cache()


@dataclass
class OnnxScorer(HFScorer):
    session: Any = None

    def forward(self, encoded: dict[str, np.ndarray]) -> np.ndarray:
        names = [i.name for i in self.session.get_inputs()]
        return self.session.run(None, {name: encoded[name].astype(np.int64) for name in names})[0]


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt() parameters (malloc.h)
# Above any one tensor of a CPU pass at the default batch and 512 tokens (DeBERTa-v3-base's attention scores,
# 32 x 12 x 512 x 512 fp32: 0.375 GiB).
KEPT_FREE_BYTES = 1 << 30


def keep_freed_memory() -> bool:
    """Have glibc's malloc keep what a CPU forward pass frees, for the next pass to reuse; False where the C
    library has no mallopt (musl, macOS) or refuses.

    torch takes each intermediate tensor of a CPU pass from malloc and frees it before the next. glibc maps one
    above its mmap threshold (128 KiB, raised as the process frees such blocks, 32 MiB at most) fresh from the
    kernel and unmaps it on free, and gives back the heap's free top past its trim threshold, so every pass
    page-faults (and the kernel zeroes) its attention tensors anew. bench_nli [1], DeBERTa-v3-xsmall, 3 batches
    of 16 pairs: 40,000-480,000 faults a run, forward passes 2.4-2.8 s against 2.3-2.4 s without; how many
    depends on what else the process allocated since, so a verify run's passes faulted more or fewer than a bare
    loop's over the same batches (issue #34). Both thresholds at 1 GiB keep the memory in the heap: the process
    holds on to its largest pass's working set, as torch's GPU cache does."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    kept = bool(mallopt(M_MMAP_THRESHOLD, KEPT_FREE_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, KEPT_FREE_BYTES))
    log.info(f"event=nli_keep_freed_memory bytes={KEPT_FREE_BYTES} applied={kept}")
    return kept


def placed(hf_model, placement: Placement):
    """The model on its device, in its precision."""
    import torch

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[placement.precision]
    return hf_model.to(device=placement.device, dtype=dtype)


def export_int8_onnx(hf_model, protocol: BoundProtocol, directory: Path) -> Path:
    """Export `hf_model` to ONNX and quantise its weights to int8 once; later calls reuse the file.

    Both steps write temp files of their own and the result is renamed into place, so concurrent exports never
    read each other's half-written files and an export killed midway leaves no model.int8.onnx behind.
    """
    quantized = directory / "model.int8.onnx"
    if quantized.exists():
        return quantized
    from onnxruntime.quantization import QuantType, quantize_dynamic

    directory.mkdir(parents=True, exist_ok=True)
    fp32, int8 = _temp_file(directory, ".model.fp32."), _temp_file(directory, ".model.int8.")
    try:
        _export_fp32(hf_model, protocol, fp32)
        quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
        replace_durably(int8, quantized)
    finally:
        fp32.unlink(missing_ok=True)
        int8.unlink(missing_ok=True)
    return quantized


def _temp_file(directory: Path, prefix: str) -> Path:
    handle, name = tempfile.mkstemp(prefix=prefix, suffix=".onnx", dir=directory)
    os.close(handle)
    return Path(name)


def _export_fp32(hf_model, protocol: BoundProtocol, path: Path) -> None:
    import torch

    sample = {
        name: torch.from_numpy(value)
        for name, value in protocol.encode(["a premise"] * 2, ["a hypothesis"] * 2).items()
    }
    names = list(sample)
    axes = {name: {0: "batch", 1: "sequence"} for name in names} | {"logits": {0: "batch"}}
    with torch.inference_mode():
        torch.onnx.export(
            _logits_only(hf_model, names),
            tuple(sample[n] for n in names),
            str(path),
            input_names=names,
            output_names=["logits"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )


def _logits_only(model, names: list[str]):
    """Wrap `model` so the exporter sees positional tensors in and bare logits out."""
    import torch

    class LogitsOnly(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *tensors):
            return self.model(**dict(zip(names, tensors))).logits

    return LogitsOnly().eval()


def onnx_providers(placement: Placement, available: list[str]) -> list:
    """The CUDA execution provider (on the placement's GPU) when ONNX Runtime has it, then the CPU's."""
    if placement.is_cuda and "CUDAExecutionProvider" in available:
        return [("CUDAExecutionProvider", {"device_id": int(placement.device.split(":")[1])}), "CPUExecutionProvider"]
    if placement.is_cuda:
        log.warning(
            "event=nli_device_fallback backend=onnx "
            "reason='this onnxruntime has no CUDAExecutionProvider (install onnxruntime-gpu)'"
        )
    return ["CPUExecutionProvider"]


def onnx_session(path: Path, placement: Placement):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), options, providers=onnx_providers(placement, ort.get_available_providers()))
