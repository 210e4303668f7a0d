"""Where the NLI model runs: the device (auto | cpu | cuda[:N]), its precision, and batch sizes that adapt to
the device's memory (docs/verification.md, "Devices and precision")."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

log = logging.getLogger("citekeeper.nli")

DEVICE_CHOICES = "auto|cpu|cuda|cuda:N"
DEFAULT_DEVICE = "auto"  # the CLI's --device and the verifier resource's nli_device when not given
BACKENDS = ("torch", "onnx")  # how a transformers checker runs: torch, or ONNX Runtime int8 on the CPU
DEFAULT_BACKEND = "torch"  # the CLI's --backend and the verifier resource's nli_backend when not given
PRECISIONS = ("fp32", "bf16", "fp16")
DEFAULT_BATCH = {"cpu": 32, "cuda": 256}  # pairs per forward pass to start from; a GPU halves it until it fits
_SPEC = re.compile(r"auto|cpu|cuda(:\d+)?")


@dataclass(frozen=True)
class Placement:
    device: str  # "cpu" | "cuda:N" (a torch device string)
    precision: str  # "fp32" | "bf16" | "fp16"
    reason: str  # why this device and precision, for the log and the CLI

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def default_batch(self) -> int:
        return DEFAULT_BATCH["cuda" if self.is_cuda else "cpu"]


def resolve_device(requested: str | None = DEFAULT_DEVICE, cuda=None, precision: str | None = None) -> Placement:
    """The placement for `requested` (auto, cpu, cuda or cuda:N). `cuda` is the torch.cuda module (a test passes a
    stand-in); a GPU that is absent or out of range falls back to the CPU, logged as a warning. `precision`
    (fp32, bf16, fp16) overrides the device's own, e.g. to measure fp32 on a GPU."""
    placement = _resolve(requested, cuda)
    if precision is None or precision == placement.precision:
        return placement
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose {', '.join(PRECISIONS)}")
    return Placement(placement.device, precision, f"{placement.reason}; {precision} requested")


def _resolve(requested: str | None, cuda) -> Placement:
    spec = (requested or DEFAULT_DEVICE).strip().lower()
    if not _SPEC.fullmatch(spec):
        raise ValueError(f"unknown device {requested!r}; choose {DEVICE_CHOICES}")
    if spec == "cpu":
        return Placement("cpu", "fp32", "cpu requested")
    if cuda is None:
        import torch

        cuda = torch.cuda
    if not cuda.is_available():
        return _on_cpu(spec, "torch sees no CUDA device")
    count = cuda.device_count()
    index = int(spec.split(":")[1]) if ":" in spec else cuda.current_device()
    if index >= count:
        return _on_cpu(spec, f"cuda:{index} does not exist ({count} CUDA device(s))")
    precision = "bf16" if cuda.get_device_capability(index) >= (8, 0) else "fp16"
    return Placement(f"cuda:{index}", precision, f"{spec}: {cuda.get_device_name(index)}, {precision}")


def _on_cpu(spec: str, why: str) -> Placement:
    placement = Placement("cpu", "fp32", f"{spec}: {why}; running on the CPU in fp32")
    (log.info if spec == "auto" else log.warning)(f"event=nli_device_fallback requested={spec} reason={why!r}")
    return placement


def is_out_of_memory(error: BaseException) -> bool:
    """A device out-of-memory error (torch.cuda.OutOfMemoryError, or the RuntimeError older builds raise)."""
    return type(error).__name__ == "OutOfMemoryError" or "out of memory" in str(error).lower()


def gpu_requested(requested: str | None, cuda=None) -> bool:
    """Whether `requested` resolves to a GPU here: the default checker of a language depends on it."""
    return _resolve(requested, cuda).is_cuda
