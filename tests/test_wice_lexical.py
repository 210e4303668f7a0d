"""The lexical fast path: its guards, and its precision on the real WiCE dev file."""

from __future__ import annotations

import pytest

from citekeeper.locate import locate_quote
from citekeeper.text import normalize_with_offsets, split_sentences
from tests.conftest import WICE_DEV, load_script, require_eval
from verifiers.lexical import lexical_support

EVIDENCE = (
    "HTTPX was first released in 2019 by Encode. It offers a broadly requests-compatible API. "
    "The project does not support Python 2 at all."
)


def test_near_verbatim_claim_is_supported_with_its_window():
    match = lexical_support("HTTPX was released in 2019 by Encode.", EVIDENCE)
    assert match is not None and match.score >= 0.8
    assert EVIDENCE[match.start : match.end].startswith("HTTPX was first released in 2019")


@pytest.mark.parametrize(
    "claim",
    [
        "HTTPX was first released in 2018 by Encode.",  # a number the evidence does not have
        "The project does support Python 2 at all.",  # the evidence negates it
        "HTTPX is fast.",  # too few content words to judge lexically
        "Encode released a requests-compatible API for Python 2 in 2019.",  # scattered, not near-verbatim
    ],
)
def test_guards_leave_the_decision_to_nli(claim):
    assert lexical_support(claim, EVIDENCE) is None


def test_sentences_and_normalised_anchoring():
    assert split_sentences("Dr. Smith wrote v2.0 e.g. today. Then he left!  OK?") == [
        "Dr. Smith wrote v2.0 e.g. today.",
        "Then he left!",
        "OK?",
    ]
    text, origin = normalize_with_offsets("a\u00a0 “b”\n\nﬁ")
    assert text == 'a "b" fi' and origin[-1] == origin[-2] == 8
    chunk = "Say  “hello”\nworld. Bye."
    found = locate_quote(chunk, 'Say "hello" world.')
    assert (chunk[found.start : found.end], found.kind) == ("Say  “hello”\nworld.", "normalized")
    bye = locate_quote(chunk, "Bye.")
    assert (bye.start, bye.end, bye.kind) == (20, 24, "exact") and locate_quote(chunk, "Hi.") is None


def test_wice_dev_precision_at_least_095(capsys):
    require_eval(WICE_DEV)
    bench = load_script("bench/wice_lexical_precision.py")
    figures = bench.main(WICE_DEV)
    assert figures["n"] == 349
    assert figures["decided"] >= 1 and figures["precision"] >= 0.95
    assert "precision=" in capsys.readouterr().out
