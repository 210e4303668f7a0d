"""The checker registry (verifiers.checkers.REGISTRY): every registered protocol is documented (its row in
docs/verification.md's protocols table, its name and module in docs/extending.md's "A checker protocol"), is a
choice of `verify --checker`, and loads and scores a pair from its fixture below: a random-weight model of its
architecture, a callable of tests.external_checkers, or the loopback endpoint."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from pipelines.cli import main
from tests.external_checkers import ScoringEndpoint
from tests.random_models import save_random_checker, save_random_nli_model
from verifiers.checkers import PROTOCOLS, REGISTRY
from verifiers.checkers.base import TransformersProtocol
from verifiers.checkers.loading import load_scorer

DOCS = Path(__file__).resolve().parent.parent / "docs"
EVIDENCE = "The client keeps four connections alive for every host it talks to."
CLAIM = "Idle connections stay alive per host."

# name -> (a temp dir, the loopback endpoint's root URL) -> what --model gives the protocol
FIXTURES: dict[str, Callable[[Path, str], str]] = {
    "nli": lambda tmp, url: str(save_random_nli_model(tmp / "nli", [EVIDENCE, CLAIM])),
    "binary": lambda tmp, url: str(save_random_checker(tmp / "roberta", [EVIDENCE, CLAIM], "roberta")),
    "seq2seq": lambda tmp, url: str(save_random_checker(tmp / "t5", [EVIDENCE, CLAIM], "t5")),
    "causal-lm": lambda tmp, url: str(
        save_random_checker(tmp / "qwen2", [EVIDENCE, CLAIM], "qwen2", max_positions=256)
    ),
    "callable": lambda tmp, url: "tests.external_checkers:score_pairs",
    "http": lambda tmp, url: f"{url}/score",
}


def module_of(entry) -> str:
    """The file of the module that defines a registry entry, as docs name it."""
    function = entry.build if isinstance(entry, TransformersProtocol) else entry.load
    return function.__module__.rsplit(".", 1)[-1] + ".py"


def section(page: str, start: str, end: str) -> str:
    text = (DOCS / page).read_text()
    return text[text.index(start) : text.index(end, text.index(start))]


@pytest.mark.parametrize("name", PROTOCOLS)
def test_each_registered_protocol_loads_and_scores_a_pair(name, tmp_path):
    with ScoringEndpoint().running() as endpoint:
        scorer = load_scorer(FIXTURES[name](tmp_path, endpoint.url), checker=name)
        probabilities = scorer.score([EVIDENCE], [CLAIM])
    assert scorer.checker == name and probabilities.shape == (1, 3) and scorer.model_calls == 1
    assert 0.0 <= probabilities[0, 0] <= 1.0 and np.isclose(np.nansum(probabilities[0]), 1.0)


@pytest.mark.parametrize("entry", REGISTRY, ids=PROTOCOLS)
def test_each_registered_protocol_is_documented(entry):
    checkers = section("verification.md", "**Checkers**", "**Which checker.**")
    assert re.search(rf"^\| `{re.escape(entry.name)}` \|", checkers, flags=re.M), "no row in the protocols table"
    extending = section("extending.md", "## A checker protocol", "\n## ")
    assert f"`{module_of(entry)}` (`{entry.name}`)" in extending


def test_the_verify_command_offers_every_protocol():
    help_text = " ".join(CliRunner().invoke(main, ["verify", "--help"], terminal_width=200).output.split())
    assert f"[{'|'.join(PROTOCOLS)}]" in help_text


def test_every_protocol_has_a_fixture_and_no_fixture_is_left_over():
    assert list(FIXTURES) == list(PROTOCOLS)
