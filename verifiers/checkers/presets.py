"""The presets of the known checkers: how citekeeper runs each published checker (protocol, window, chunk size),
and on what terms (licence, LLM-AggreFact accuracy); docs/verification.md, "Which checker"."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from citekeeper.model_sources import pulled_spec


@dataclass(frozen=True)
class Preset:
    """What citekeeper knows of a published checker: how to run it, and on what terms."""

    protocol: str
    window: int  # tokens the model reads at once
    chunk: int | None  # evidence tokens per window (MiniCheck's chunk size); None: as many as fit
    licence: str
    commercial: bool  # may a company use it without a separate licence
    aggrefact_bacc: float | None = None  # LLM-AggreFact balanced accuracy, as published
    supported_label: int = 1


# LLM-AggreFact figures as the leaderboard publishes them; licences as the model cards state them.
PRESETS: dict[str, Preset] = {
    "bespokelabs/Bespoke-MiniCheck-7B": Preset("causal-lm", 32768, 32468, "CC BY-NC 4.0", False, 77.4),
    "yaxili96/FactCG-DeBERTa-v3-Large": Preset("binary", 2048, 400, "MIT", True, 75.6),
    "lytang/MiniCheck-Flan-T5-Large": Preset("seq2seq", 2048, 500, "MIT", True, 75.0),
    "lytang/MiniCheck-RoBERTa-Large": Preset("binary", 512, 400, "MIT", True, 73.5),
    "lytang/MiniCheck-DeBERTa-v3-Large": Preset("binary", 2048, 400, "MIT", True, 73.1),
    "cross-encoder/nli-deberta-v3-xsmall": Preset("nli", 512, None, "Apache-2.0", True),
    "MoritzLaurer/mDeBERTa-v3-base-xnli-multilingual-nli-2mil7": Preset("nli", 512, None, "MIT", True),
}


def preset_for(model: str, directory: Path | None = None) -> Preset | None:
    """The preset of a hub id, or of the hub id a directory `citekeeper models pull` saved was pulled from."""
    return PRESETS.get(model) or (PRESETS.get(pulled_spec(directory) or "") if directory is not None else None)


def licence_notice(model: str, preset: Preset | None) -> str | None:
    """What to tell whoever runs a preset whose licence forbids commercial use; None for the others."""
    if preset is None or preset.commercial:
        return None
    return f"{model} is licensed {preset.licence}: not for commercial use without the licensor's permission"
