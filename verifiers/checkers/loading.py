"""Loading a checker: a transformers model (a local directory or a hub id; its protocol the one named, else the
preset's, else the one its config implies) on the torch or the ONNX backend, or a checker that is not a model
(an ExternalProtocol of the registry: `module:function`, an endpoint URL); and the one way a command or an asset
chooses its checker (docs/verification.md, "Checkers")."""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from citekeeper.language import ENGLISH, ModelChoice, choose_nli_model
from citekeeper.model_sources import PULLED_FROM, ModelSourceError, load_pretrained, load_weights, resolve_model
from verifiers.checkers import EXTERNAL_PROTOCOLS, MODEL_PROTOCOLS, PROTOCOLS
from verifiers.checkers.backends import (
    OnnxScorer,
    TorchScorer,
    export_int8_onnx,
    keep_freed_memory,
    onnx_session,
    placed,
)
from verifiers.checkers.base import CheckerError, Scorer, TransformersProtocol
from verifiers.checkers.nli import LabelSetError
from verifiers.checkers.presets import preset_for
from verifiers.devices import BACKENDS, DEFAULT_BACKEND, DEFAULT_DEVICE, gpu_requested, resolve_device

log = logging.getLogger("citekeeper.nli")

# The English default. The CLI and the Dagster asset pick the model per corpus language instead:
# citekeeper.language.choose_nli_model (multilingual for Chinese and other non-English corpora).
DEFAULT_MODEL = ENGLISH.nli
ONNX_PROTOCOLS = tuple(name for name, entry in MODEL_PROTOCOLS.items() if entry.onnx)


class ModelUnavailable(RuntimeError):
    """The NLI model cannot be loaded; the message says what to do instead."""


def missing_model_message(model: str, reason: str) -> str:
    return (
        f"cannot load NLI model {model!r}: {reason}\n"
        "Either pass --model /local/dir (a directory saved with save_pretrained: config.json, weights and "
        "tokenizer of an NLI sequence-classification model; on a machine without network, save one elsewhere "
        "with `citekeeper models pull --to DIR` and copy DIR over), or --no-model to run only the anchoring and "
        "lexical tiers (claims they cannot decide become 'unverified')."
    )


def load_scorer(
    model: str = DEFAULT_MODEL,
    backend: str = DEFAULT_BACKEND,
    onnx_cache_dir: Path | str | None = None,
    batch_size: int | None = None,
    progress: bool = False,
    device: str | None = DEFAULT_DEVICE,
    threads: int | None = None,
    precision: str | None = None,
    checker: str | None = None,
    supported_label: int | None = None,
    checker_version: str | None = None,
) -> Scorer:
    """Load `model` as a checker of the protocol `checker` (verifiers.checkers.PROTOCOLS; default: the preset's,
    else what the model's config implies); raises ModelUnavailable / LabelSetError / CheckerError, before any pair
    is scored.

    A checker that is not a model (callable, http) takes `model` as its spec, `checker_version` as its version and
    `batch_size` as the pairs per call. A model runs on `backend` on `device` (verifiers.devices.resolve_device);
    `supported_label` is a binary classifier's supported index; `batch_size` defaults to the device's starting
    size; `threads` sets torch's intra-op threads (default: torch's own, one per core); `precision` overrides the
    device's. `model` is a local directory or a hub id (from the local Hugging Face cache, else downloaded into it:
    citekeeper.model_sources.resolve_model); its revision is the hub commit, else a content hash of the directory.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown NLI backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if checker is not None and checker not in PROTOCOLS:
        raise CheckerError(f"unknown checker protocol {checker!r}: use one of {', '.join(PROTOCOLS)}")
    if checker in EXTERNAL_PROTOCOLS:
        if backend == "onnx":
            raise CheckerError(_onnx_refusal(model, checker))
        return EXTERNAL_PROTOCOLS[checker].load(model, checker_version, batch_size)
    if checker_version is not None:
        raise CheckerError(
            f"model {model!r}: a checker version is given to the checkers that are not models "
            f"({', '.join(EXTERNAL_PROTOCOLS)}); a model's revision is its hub commit or a hash of its files"
        )
    return _load_model(
        model,
        MODEL_PROTOCOLS.get(checker or ""),
        backend,
        onnx_cache_dir,
        batch_size,
        progress,
        device,
        threads,
        precision,
        supported_label,
    )


def _load_model(
    model: str,
    protocol: TransformersProtocol | None,
    backend: str,
    onnx_cache_dir: Path | str | None,
    batch_size: int | None,
    progress: bool,
    device: str | None,
    threads: int | None,
    precision: str | None,
    supported_label: int | None,
) -> TorchScorer | OnnxScorer:
    try:
        local = resolve_model(model)
    except ModelSourceError as exc:
        raise ModelUnavailable(missing_model_message(model, str(exc))) from exc
    preset = preset_for(model, local.path)
    try:
        from transformers import AutoConfig, AutoTokenizer

        config = load_pretrained(AutoConfig, local.path)
        protocol = protocol or (MODEL_PROTOCOLS[preset.protocol] if preset else None) or detect_protocol(model, config)
        if backend == "onnx" and not protocol.onnx:
            raise CheckerError(_onnx_refusal(model, protocol.name))
        tokenizer = load_pretrained(AutoTokenizer, local.path)
        hf_model = load_weights(_model_class(protocol), local.path).eval()
    except (ModelSourceError, OSError, ValueError, KeyError) as exc:
        if isinstance(exc, CheckerError | LabelSetError):
            raise
        raise ModelUnavailable(missing_model_message(model, f"{type(exc).__name__}: {exc}")) from exc
    max_tokens = preset.window if preset else _max_tokens(tokenizer, hf_model.config)
    label = supported_label if supported_label is not None else (preset.supported_label if preset else 1)
    bound = protocol.build(model, tokenizer, hf_model.config, max_tokens, label)
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
        protocol=bound,
        max_tokens=max_tokens,
        batch_size=batch_size or placement.default_batch,
        progress=progress,
        backend=backend,
        placement=placement,
        chunk_tokens=preset.chunk if preset else None,
        preset=preset,
    )
    if backend == "torch":
        if not placement.is_cuda:
            keep_freed_memory()
        return TorchScorer(**common, model=placed(hf_model, placement))
    cache = Path(onnx_cache_dir or Path.home() / ".cache" / "citekeeper" / "onnx")
    onnx_path = export_int8_onnx(
        hf_model, bound, cache / _safe_name(f"{model}@{revision}" + (f"/{bound.key}" if bound.key else ""))
    )
    return OnnxScorer(**common, session=onnx_session(onnx_path, placement))


def detect_protocol(model: str, config) -> TransformersProtocol:
    """The protocol a model's config implies: the first of the registry's model protocols that detects it."""
    for protocol in MODEL_PROTOCOLS.values():
        if protocol.detects(config):
            return protocol
    architectures = list(getattr(config, "architectures", None) or [])
    kinds = ", ".join(protocol.detected_from for protocol in MODEL_PROTOCOLS.values())
    raise CheckerError(
        f"model {model!r}: architecture {architectures or 'unknown'} is not a checker citekeeper can run "
        f"({kinds}); --checker {'|'.join(MODEL_PROTOCOLS)} names the protocol of a model whose config does not say it"
    )


def _onnx_refusal(model: str, protocol: str) -> str:
    return f"model {model!r}: the onnx backend runs {' and '.join(ONNX_PROTOCOLS)} checkers, not {protocol}"


def _model_class(protocol: TransformersProtocol):
    import transformers

    return getattr(transformers, protocol.model_class)


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
    device: str | None = DEFAULT_DEVICE,
    **load: Any,
) -> tuple[ModelChoice, Scorer]:
    """The one way a command or an asset builds its checker: `model`, else the default of the language (set, or
    detected from `texts` of `source`) for the device, loaded with `load` (load_scorer's options). Raises
    ScorerUnavailable with the choice, before any pair is scored."""
    choice = choose_nli_model(model, language, texts, explicit=explicit, source=source, gpu=gpu_requested(device))
    try:
        return choice, load_scorer(choice.model, device=device, **load)
    except (ModelUnavailable, LabelSetError, CheckerError) as exc:
        raise ScorerUnavailable(choice, exc) from exc
