"""The callable protocol: a Python function, named `module:function` (`--checker callable --model
mypackage.checks:score_pairs`), scores pairs in this process. It takes two lists of one length, premises
(evidence) and hypotheses (claim sentences), and returns what verifiers.checkers.external says. The module must be
importable: installed, or on PYTHONPATH."""

from __future__ import annotations

import functools
import importlib

from verifiers.checkers.base import CheckerError, ExternalProtocol
from verifiers.checkers.external import DEFAULT_BATCH, UNVERSIONED, ExternalScorer


def load(spec: str, version: str | None, batch_size: int | None) -> ExternalScorer:
    """The scorer of the function `spec` names; CheckerError when it names none."""
    spec = spec.strip()
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise CheckerError(f"callable checker {spec!r}: name it module:function, e.g. mypackage.checks:score_pairs")
    try:
        function = functools.reduce(getattr, name.split("."), importlib.import_module(module_name))
    except ImportError as exc:
        raise CheckerError(f"callable checker {spec!r}: cannot import {module_name}: {exc}") from exc
    except AttributeError as exc:
        raise CheckerError(f"callable checker {spec!r}: {module_name} has no {name}") from exc
    if not callable(function):
        raise CheckerError(f"callable checker {spec!r}: {name} is not callable")
    return ExternalScorer(
        model_id=spec,
        revision=version or UNVERSIONED,
        backend="python",
        checker=PROTOCOL.name,
        where=f"in this process: {spec}",
        score_pairs=function,
        batch_size=batch_size or DEFAULT_BATCH,
    )


PROTOCOL = ExternalProtocol(name="callable", load=load)
