"""Checkers: a Hugging Face NLI model or fact-checker behind one small scorer interface (premise = evidence,
hypothesis = claim sentence), on the torch or the ONNX Runtime int8 backend. The protocols and presets are in
verifiers.checkers, device placement in verifiers.devices; docs/verification.md."""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from citekeeper.files import replace_durably
from citekeeper.language import ENGLISH, ModelChoice, choose_nli_model
from citekeeper.model_sources import PULLED_FROM, ModelSourceError, load_pretrained, load_weights, resolve_model
from verifiers.checkers import (
    PROTOCOLS,
    CheckerError,
    LabelSetError,
    Preset,
    build_protocol,
    detect_protocol,
    preset_for,
)
from verifiers.checkers import Protocol as CheckerProtocol
from verifiers.devices import Placement, gpu_requested, is_out_of_memory, resolve_device

log = logging.getLogger("citekeeper.nli")

# The English default. The CLI and the Dagster asset pick the model per corpus language instead:
# citekeeper.language.choose_nli_model (multilingual for Chinese and other non-English corpora).
DEFAULT_MODEL = ENGLISH.nli
BACKENDS = ("torch", "onnx")


class ModelUnavailable(RuntimeError):
    """The NLI model cannot be loaded; the message says what to do instead."""


class Scorer(Protocol):
    """score() gives one row per pair in the canonical order (entailment, neutral, contradiction); for a 2-way model
    or a one-score checker the middle column is not-entailment and contradiction is NaN, recorded as null."""

    model_id: str
    revision: str
    backend: str
    precision: str  # fp32 | bf16 | fp16 (torch), int8 (onnx)
    max_tokens: int  # the longest premise + hypothesis the model accepts, in tokens
    model_calls: int  # sequences sent through the model so far
    checker: str  # the protocol: verifiers.checkers.PROTOCOLS
    checker_key: str  # what the protocol adds to the verdict cache's model key
    prompt_tokens: int  # tokens of each input besides evidence and claim
    chunk_tokens: int | None  # evidence tokens per window; None: as many as fit

    def count_tokens(self, texts: list[str]) -> list[int]: ...

    def score(self, premises: list[str], hypotheses: list[str]) -> np.ndarray: ...


def missing_model_message(model: str, reason: str) -> str:
    return (
        f"cannot load NLI model {model!r}: {reason}\n"
        "Either pass --model /local/dir (a directory saved with save_pretrained: config.json, weights and "
        "tokenizer of an NLI sequence-classification model; on a machine without network, save one elsewhere "
        "with `citekeeper models pull --to DIR` and copy DIR over), or --no-model to run only the anchoring and "
        "lexical tiers (claims they cannot decide become 'unverified')."
    )


BACKEND_PRECISION = {"torch": "fp32", "onnx": "int8"}  # each backend's precision on the CPU


def model_key(scorer: Scorer) -> str:
    """The verdict cache's model key: model, revision, backend, precision (verdicts at bf16 are not those at fp32)
    and checker protocol."""
    return f"{scorer.model_id}@{scorer.revision}/{scorer.backend}/{scorer.precision}/{scorer.checker_key}"


@dataclass
class HFScorer:
    """Tokenisation, batching by length and out-of-memory handling shared by the backends; the checker protocol
    (verifiers.checkers) says how pairs become inputs and logits become probabilities.

    `batch_size` is where a run starts: an out-of-memory error halves it and the pass is retried, and the size
    that worked is kept for the rest of the run."""

    model_id: str
    revision: str
    tokenizer: object
    protocol: CheckerProtocol
    max_tokens: int
    batch_size: int = 32
    progress: bool = False
    backend: str = "torch"
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
                logits = self._forward_or_halve(size, lambda: self.forward(encoded))
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
            f"event=nli_out_of_memory device={self.placement.device} batch_size={self.batch_size} error={str(error)[:200]!r}"
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
    model: object = None

    def score(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """A causal-LM checker scores the claims that share evidence from one encoding of it (its KV cache);
        every other protocol, and pairs whose evidence is theirs alone, go through HFScorer.score."""
        if self.protocol.name != "causal-lm":
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
                logits = self._forward_or_halve(size, lambda: self._rests_on(cache, len(prefix), batch))
                if logits is None:
                    continue
                probs[start : start + size] = self.protocol.to_canonical(logits[:, None, :])
                self.model_calls += size
                start += size
        return probs

    def _rests_on(self, cache, prefix_length: int, rests: list[list[int]]) -> np.ndarray:
        import copy

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
    session: object = None

    def forward(self, encoded: dict[str, np.ndarray]) -> np.ndarray:
        names = [i.name for i in self.session.get_inputs()]
        return self.session.run(None, {name: encoded[name].astype(np.int64) for name in names})[0]


def load_scorer(
    model: str = DEFAULT_MODEL,
    backend: str = "torch",
    onnx_cache_dir: Path | str | None = None,
    batch_size: int | None = None,
    progress: bool = False,
    device: str | None = "auto",
    threads: int | None = None,
    precision: str | None = None,
    checker: str | None = None,
    supported_label: int | None = None,
) -> HFScorer:
    """Load `model` as a checker for `backend` on `device` (verifiers.devices.resolve_device); raises
    ModelUnavailable / LabelSetError / CheckerError, before any pair is scored. `checker` names the protocol
    (verifiers.checkers.PROTOCOLS; default: the preset's, else what the config implies); `supported_label` the
    binary classifier's supported index. `batch_size` defaults to the device's starting size; `threads` sets
    torch's intra-op threads (default: torch's own, one per core); `precision` overrides the device's.

    `model` is a local directory or a hub id (from the local Hugging Face cache, else downloaded into it:
    citekeeper.model_sources.resolve_model). The revision is the hub commit, else a content hash of the directory.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown NLI backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    try:
        local = resolve_model(model)
    except ModelSourceError as exc:
        raise ModelUnavailable(missing_model_message(model, str(exc))) from exc
    preset = preset_for(model, local.path)
    try:
        from transformers import AutoConfig, AutoTokenizer

        config = load_pretrained(AutoConfig, local.path)
        protocol_name = checker or (preset.protocol if preset else None) or detect_protocol(model, config)
        if protocol_name not in PROTOCOLS:
            raise CheckerError(f"unknown checker protocol {protocol_name!r}: use one of {', '.join(PROTOCOLS)}")
        if backend == "onnx" and protocol_name not in ONNX_PROTOCOLS:
            raise CheckerError(
                f"model {model!r}: the onnx backend runs {' and '.join(ONNX_PROTOCOLS)} checkers, not {protocol_name}"
            )
        tokenizer = load_pretrained(AutoTokenizer, local.path)
        hf_model = load_weights(_model_class(protocol_name), local.path).eval()
    except (ModelSourceError, OSError, ValueError, KeyError) as exc:
        if isinstance(exc, CheckerError | LabelSetError):
            raise
        raise ModelUnavailable(missing_model_message(model, f"{type(exc).__name__}: {exc}")) from exc
    max_tokens = preset.window if preset else _max_tokens(tokenizer, hf_model.config)
    label = supported_label if supported_label is not None else (preset.supported_label if preset else 1)
    protocol = build_protocol(protocol_name, model, tokenizer, hf_model.config, max_tokens, label)
    revision = local.commit or _content_hash(local.path)
    placement = resolve_device(device, precision=precision)
    log.info(f"event=nli_device device={placement.device} precision={placement.precision} reason={placement.reason!r}")
    if threads:
        import torch

        torch.set_num_threads(threads)
    common = dict(
        model_id=model,
        revision=revision,
        tokenizer=tokenizer,
        protocol=protocol,
        max_tokens=max_tokens,
        batch_size=batch_size or placement.default_batch,
        progress=progress,
        backend=backend,
        placement=placement,
        chunk_tokens=preset.chunk if preset else None,
        preset=preset,
    )
    if backend == "torch":
        return TorchScorer(**common, model=_placed(hf_model, placement))
    cache = Path(onnx_cache_dir or Path.home() / ".cache" / "citekeeper" / "onnx")
    onnx_path = export_int8_onnx(
        hf_model, protocol, cache / _safe_name(f"{model}@{revision}" + (f"/{protocol.key}" if protocol.key else ""))
    )
    return OnnxScorer(**common, session=_onnx_session(onnx_path, placement))


MODEL_CLASSES = {  # the transformers Auto class each protocol's model loads with
    "nli": "AutoModelForSequenceClassification",
    "binary": "AutoModelForSequenceClassification",
    "seq2seq": "AutoModelForSeq2SeqLM",
    "causal-lm": "AutoModelForCausalLM",
}


def _model_class(protocol_name: str):
    import transformers

    return getattr(transformers, MODEL_CLASSES[protocol_name])


ONNX_PROTOCOLS = ("nli", "binary")  # sequence classifiers: one logits output, exported and quantised as is


def _placed(hf_model, placement: Placement):
    """The model on its device, in its precision."""
    import torch

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[placement.precision]
    return hf_model.to(device=placement.device, dtype=dtype)


def _content_hash(directory: Path) -> str:
    """The revision of a model directory without a hub commit: a hash of its config and weights."""
    digest = hashlib.sha256()
    for name in sorted(os.listdir(directory)):
        if name.endswith((".json", ".safetensors", ".bin")) and name != PULLED_FROM and (directory / name).is_file():
            digest.update(name.encode())
            with open(directory / name, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
    return "sha256:" + digest.hexdigest()[:16]


def _max_tokens(tokenizer, config) -> int:
    limits = [getattr(config, "max_position_embeddings", None) or 512, 512]
    model_max = getattr(tokenizer, "model_max_length", None)
    if isinstance(model_max, int) and 0 < model_max < 1_000_000:
        limits.append(model_max)
    return min(limits)


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:150]


def export_int8_onnx(hf_model, protocol: CheckerProtocol, directory: Path) -> Path:
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


def _export_fp32(hf_model, protocol: CheckerProtocol, path: Path) -> None:
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
            "event=nli_device_fallback backend=onnx reason='this onnxruntime has no CUDAExecutionProvider (install onnxruntime-gpu)'"
        )
    return ["CPUExecutionProvider"]


def _onnx_session(path: Path, placement: Placement):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), options, providers=onnx_providers(placement, ort.get_available_providers()))


class ScorerUnavailable(RuntimeError):
    """The chosen checker cannot be loaded; `choice` says which it was and why it was chosen."""

    def __init__(self, choice: ModelChoice, error: Exception):
        super().__init__(str(error))
        self.choice = choice


def chosen_scorer(
    model: str | None,
    language: str | None,
    texts: Callable[[], Iterable[str]],
    source: str,
    explicit: str = "--model",
    device: str | None = "auto",
    **load: object,
) -> tuple[ModelChoice, HFScorer]:
    """The one way a command or an asset builds its checker: `model`, else the default of the language (set, or
    detected from `texts` of `source`) for the device, loaded with `load` (load_scorer's options). Raises
    ScorerUnavailable with the choice, before any pair is scored."""
    choice = choose_nli_model(model, language, texts, explicit=explicit, source=source, gpu=gpu_requested(device))
    try:
        return choice, load_scorer(choice.model, device=device, **load)
    except (ModelUnavailable, LabelSetError, CheckerError) as exc:
        raise ScorerUnavailable(choice, exc) from exc
