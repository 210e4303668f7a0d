"""NLI scorers: a Hugging Face sequence-classification model behind one small interface.

Premise = evidence, hypothesis = claim sentence. Every scorer returns probabilities in the canonical order
(entailment, neutral, contradiction); for a 2-way model the middle column is not-entailment and the
contradiction column is NaN (the verifier turns that into null, never into a number).
Backends: `torch` (fp32) and `onnx` (ONNX Runtime, dynamic int8 quantisation of the same model, exported
once and cached on disk).
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from citekeeper.language import ENGLISH

# The English default. The CLI and the Dagster asset pick the model per corpus language instead:
# citekeeper.language.choose_nli_model (multilingual for Chinese and other non-English corpora).
DEFAULT_MODEL = ENGLISH.nli
BACKENDS = ("torch", "onnx")
ENTAILMENT, NEUTRAL, CONTRADICTION, NOT_ENTAILMENT = "entailment", "neutral", "contradiction", "not_entailment"

_LABEL_ALIASES = {
    "entailment": ENTAILMENT, "entail": ENTAILMENT, "entails": ENTAILMENT, "entailed": ENTAILMENT,
    "neutral": NEUTRAL,
    "contradiction": CONTRADICTION, "contradict": CONTRADICTION, "contradicts": CONTRADICTION,
    "contradicted": CONTRADICTION,
    "not_entailment": NOT_ENTAILMENT, "non_entailment": NOT_ENTAILMENT, "not_entailed": NOT_ENTAILMENT,
}  # fmt: skip
_THREE_WAY = {ENTAILMENT, NEUTRAL, CONTRADICTION}
_TWO_WAY = {ENTAILMENT, NOT_ENTAILMENT}


class ModelUnavailable(RuntimeError):
    """The NLI model cannot be loaded; the message says what to do instead."""


class LabelSetError(ValueError):
    """The model's config.id2label is not an NLI label set citekeeper understands."""


class Scorer(Protocol):
    model_id: str
    revision: str
    backend: str
    max_tokens: int  # the longest premise + hypothesis the model accepts, in tokens
    model_calls: int  # sequences sent through the model so far

    def count_tokens(self, texts: list[str]) -> list[int]: ...

    def score(self, premises: list[str], hypotheses: list[str]) -> np.ndarray: ...


def canonical_columns(id2label: dict) -> tuple[int, int, int | None]:
    """Model output indices of (entailment, neutral-or-not-entailment, contradiction-or-None)."""
    names = {}
    for index, label in id2label.items():
        key = re.sub(r"[\s-]+", "_", str(label).strip().lower())
        names[_LABEL_ALIASES.get(key, f"?{label}")] = int(index)
    if set(names) == _THREE_WAY and len(id2label) == 3:
        return names[ENTAILMENT], names[NEUTRAL], names[CONTRADICTION]
    if set(names) == _TWO_WAY and len(id2label) == 2:
        return names[ENTAILMENT], names[NOT_ENTAILMENT], None
    raise LabelSetError(
        f"config.id2label {dict(id2label)} is not a known NLI label set: expected "
        "entailment/neutral/contradiction (3-way) or entailment/not_entailment (2-way), in any order. "
        "Fix id2label in the model's config.json."
    )


def missing_model_message(model: str, reason: str) -> str:
    return (
        f"cannot load NLI model {model!r}: {reason}\n"
        "No model weights can be downloaded here. Either pass --model /local/dir (a directory saved with "
        "save_pretrained: config.json, weights and tokenizer of an NLI sequence-classification model), or "
        "--no-model to run only the anchoring and lexical tiers (claims they cannot decide become 'unverified')."
    )


@dataclass
class HFScorer:
    """Tokenisation, batching by length, softmax and label mapping shared by the backends."""

    model_id: str
    revision: str
    tokenizer: object
    columns: tuple[int, int, int | None]
    max_tokens: int
    batch_size: int = 32
    progress: bool = False
    backend: str = "torch"
    model_calls: int = 0

    def count_tokens(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        return [len(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]

    def encode(self, premises: list[str], hypotheses: list[str]) -> dict[str, np.ndarray]:
        return dict(
            self.tokenizer(
                premises, hypotheses, truncation="longest_first", max_length=self.max_tokens,
                padding=True, return_tensors="np",
            )
        )  # fmt: skip

    def length_batches(self, premises: list[str], hypotheses: list[str]) -> list[np.ndarray]:
        """Index batches of pairs sorted by length, so each batch pads to similar lengths."""
        order = np.argsort([len(p) + len(h) for p, h in zip(premises, hypotheses)], kind="stable")
        return [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]

    def score(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        from tqdm.auto import tqdm

        probs = np.empty((len(premises), 3), dtype=np.float64)
        batches = self.length_batches(premises, hypotheses)
        for batch in tqdm(batches, desc="NLI", unit="batch", disable=not self.progress or not batches):
            encoded = self.encode([premises[i] for i in batch], [hypotheses[i] for i in batch])
            probs[batch] = self.to_canonical(self.forward(encoded))
            self.model_calls += len(batch)
        return probs

    def to_canonical(self, logits: np.ndarray) -> np.ndarray:
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        softmax = shifted / shifted.sum(axis=1, keepdims=True)
        entail, middle, contra = self.columns
        contradiction = softmax[:, contra] if contra is not None else np.full(len(softmax), np.nan)
        return np.stack([softmax[:, entail], softmax[:, middle], contradiction], axis=1)

    def forward(self, encoded: dict[str, np.ndarray]) -> np.ndarray:
        raise NotImplementedError


@dataclass
class TorchScorer(HFScorer):
    model: object = None

    def forward(self, encoded: dict[str, np.ndarray]) -> np.ndarray:
        import torch

        with torch.inference_mode():
            inputs = {k: torch.from_numpy(v) for k, v in encoded.items()}
            return self.model(**inputs).logits.float().numpy()


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
    batch_size: int = 32,
    progress: bool = False,
) -> HFScorer:
    """Load `model` (hub id or local dir) for `backend`; raises ModelUnavailable / LabelSetError."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown NLI backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    source = _resolve_source(model)
    try:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(source)
        hf_model = AutoModelForSequenceClassification.from_pretrained(source).eval()
    except (OSError, ValueError, KeyError) as exc:
        raise ModelUnavailable(missing_model_message(model, f"{type(exc).__name__}: {exc}")) from exc
    columns = canonical_columns(hf_model.config.id2label)
    revision = _revision(Path(source), hf_model.config)
    common = dict(
        model_id=model, revision=revision, tokenizer=tokenizer, columns=columns,
        max_tokens=_max_tokens(tokenizer, hf_model.config), batch_size=batch_size, progress=progress,
        backend=backend,
    )  # fmt: skip
    if backend == "torch":
        return TorchScorer(**common, model=hf_model)
    cache = Path(onnx_cache_dir or Path.home() / ".cache" / "citekeeper" / "onnx")
    onnx_path = export_int8_onnx(hf_model, tokenizer, cache / _safe_name(f"{model}@{revision}"))
    return OnnxScorer(**common, session=_onnx_session(onnx_path))


def _resolve_source(model: str) -> str:
    """A local dir as is; a hub id only when it is already in the local cache (offline: fail fast)."""
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ModelUnavailable(missing_model_message(model, f"{path} has no config.json"))
        return str(path)
    if model.startswith((".", "/", "~")) or model.count("/") > 1:  # a path, not an org/name hub id
        raise ModelUnavailable(missing_model_message(model, f"directory {path} does not exist"))
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on"):
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(model, "config.json"), str):
            raise ModelUnavailable(
                missing_model_message(model, "it is not in the local Hugging Face cache and HF_HUB_OFFLINE=1")
            )
    return model


def _revision(source: Path, config) -> str:
    """The hub commit when known, else a content hash of the local config and weights."""
    commit = getattr(config, "_commit_hash", None)
    if commit or not source.is_dir():
        return commit or "unknown"
    digest = hashlib.sha256()
    for name in sorted(os.listdir(source)):
        if name.endswith((".json", ".safetensors", ".bin")) and (source / name).is_file():
            digest.update(name.encode())
            with open(source / name, "rb") as handle:
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


def export_int8_onnx(hf_model, tokenizer, directory: Path) -> Path:
    """Export `hf_model` to ONNX and quantise its weights to int8 once; later calls reuse the file."""
    quantized = directory / "model.int8.onnx"
    if quantized.exists():
        return quantized
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    directory.mkdir(parents=True, exist_ok=True)
    sample = dict(tokenizer(["a premise"] * 2, ["a hypothesis"] * 2, padding=True, return_tensors="pt"))
    names = list(sample)
    fp32 = directory / "model.fp32.onnx"
    axes = {name: {0: "batch", 1: "sequence"} for name in names} | {"logits": {0: "batch"}}
    with torch.inference_mode():
        torch.onnx.export(
            _logits_only(hf_model, names), tuple(sample[n] for n in names), str(fp32),
            input_names=names, output_names=["logits"], dynamic_axes=axes, opset_version=17, dynamo=False,
        )  # fmt: skip
    tmp = directory / f".model.int8.{os.getpid()}.onnx"
    quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8)
    os.replace(tmp, quantized)
    fp32.unlink()
    return quantized


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


def _onnx_session(path: Path):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
