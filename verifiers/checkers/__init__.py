"""Every checker protocol, one module each, registered here in one line: how evidence and a claim become a
verdict. A protocol of transformers models (TransformersProtocol: nli, binary, seq2seq, causal-lm, after
MiniCheck's inference code, Liyan06/MiniCheck minicheck/inference.py) says which configs imply it, how pairs become
inputs and how logits become probabilities; a checker that is not a model (ExternalProtocol: callable, http) is a
function from pairs to scores. Model protocols are detected in registry order. The contract is
verifiers.checkers.base, loading verifiers.checkers.loading, the known checkers verifiers.checkers.presets;
docs/extending.md, "A checker protocol"."""

from __future__ import annotations

from verifiers.checkers import binary, causal_lm, http_endpoint, nli, python_callable, seq2seq
from verifiers.checkers.base import ExternalProtocol, TransformersProtocol

REGISTRY: tuple[TransformersProtocol | ExternalProtocol, ...] = (
    nli.PROTOCOL,
    binary.PROTOCOL,
    seq2seq.PROTOCOL,
    causal_lm.PROTOCOL,
    python_callable.PROTOCOL,
    http_endpoint.PROTOCOL,
)
PROTOCOLS: tuple[str, ...] = tuple(entry.name for entry in REGISTRY)
MODEL_PROTOCOLS = {entry.name: entry for entry in REGISTRY if isinstance(entry, TransformersProtocol)}
EXTERNAL_PROTOCOLS = {entry.name: entry for entry in REGISTRY if isinstance(entry, ExternalProtocol)}

__all__ = ["EXTERNAL_PROTOCOLS", "MODEL_PROTOCOLS", "PROTOCOLS", "REGISTRY"]
