"""citekeeper.text: the one sentence splitter and normaliser used by chunking, identity and verification."""
from __future__ import annotations

import random

from citekeeper.text import normalize_text, normalize_with_offsets, sentence_spans, split_sentences


def test_spans_are_absolute_and_trimmed_within_the_range():
    text = "xx  One. Two.  yy"
    assert [text[s:e] for s, e in sentence_spans(text, 2, 15)] == ["One.", "Two."]
    assert sentence_spans("   ") == [] and sentence_spans("") == []


def test_paragraph_breaks_markers_and_abbreviations():
    assert split_sentences("A heading\n\nbody text. Next (e.g. this) one [1]. Last.[2] Fine. but not here") == [
        "A heading",
        "body text.",
        "Next (e.g. this) one [1].",
        "Last.[2]",
        "Fine. but not here",  # no sentence opener after the period
    ]
    assert split_sentences("See Fig. 3 and the U.S. Army. Plan B. Works.") == ["See Fig. 3 and the U.S. Army.", "Plan B. Works."]


def test_offset_variant_follows_the_same_rules():
    rng = random.Random(7)
    alphabet = "ab e\u0301\u00e9 \n\t\u00a0\u2019\u201c\u2014\ufb01\uff21\u1100\u1161\u11a8.,"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        normalised, origin = normalize_with_offsets(text)
        assert normalised == normalize_text(text)
        assert len(origin) == len(normalised) and origin == sorted(origin)
    assert normalize_text("Cafe\u0301 \u201cok\u201d \u2014 x") == normalize_text("Caf\u00e9  \"ok\"\n- x") == 'Café "ok" - x'
