"""citekeeper.text: the one sentence splitter and normaliser used by chunking, identity and verification."""

from __future__ import annotations

import random

from citekeeper.text import (
    marker_ids,
    normalize_text,
    normalize_with_offsets,
    sentence_spans,
    split_sentences,
    strip_markers,
)


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
    assert split_sentences("See Fig. 3 and the U.S. Army. Plan B. Works.") == [
        "See Fig. 3 and the U.S. Army.",
        "Plan B. Works.",
    ]


def test_offset_variant_follows_the_same_rules():
    rng = random.Random(7)
    alphabet = "ab e\u0301\u00e9 \n\t\u00a0\u2019\u201c\u2014\ufb01\uff21\u1100\u1161\u11a8.,中文，。\u3000（"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        normalised, origin = normalize_with_offsets(text)
        assert normalised == normalize_text(text)
        assert len(origin) == len(normalised) and origin == sorted(origin)
    assert (
        normalize_text("Cafe\u0301 \u201cok\u201d \u2014 x")
        == normalize_text('Caf\u00e9  "ok"\n- x')
        == 'Café "ok" - x'
    )


def test_chinese_sentences_end_at_full_width_marks_with_their_markers():
    answer = "Vite 是一种新型前端构建工具。[1] 它使用 Rollup 打包代码。[2]"
    assert split_sentences(answer) == ["Vite 是一种新型前端构建工具。[1]", "它使用 Rollup 打包代码。[2]"]
    text = "Vite 是工具[1]。它使用 Rollup！真的吗?是的……好【2】。结束；他说“好的。”然后走了。"
    assert split_sentences(text) == [
        "Vite 是工具[1]。",
        "它使用 Rollup！",
        "真的吗?",
        "是的……",
        "好【2】。",
        "结束；",
        "他说“好的。”",
        "然后走了。",
    ]
    # English rules unchanged next to it; a numbered list item is no sentence of its own.
    assert split_sentences("It is fast.它很快。1. 安装依赖。See Fig. 3 now.") == [
        "It is fast.",
        "它很快。",
        "1. 安装依赖。",
        "See Fig. 3 now.",
    ]


def test_every_marker_form_and_its_ids():
    assert marker_ids("a [1][2] b [1,2] 【3】 ［4］ ^[5] [D1] [S2, S3] [link] [v] 【注】") == [
        "1",
        "2",
        "1",
        "2",
        "3",
        "4",
        "5",
        "D1",
        "S2",
        "S3",
    ]
    for marked in (
        "见下文。[1][2] 下一句。",
        "见下文。[1,2] 下一句。",
        "见下文【1】。下一句。",
        "See this.^[1] Next one.",
        "See this. [D1] Next one.",
    ):
        first, second = split_sentences(marked)
        assert marker_ids(first) and not marker_ids(second), marked
    assert strip_markers("它很快 [1]。 好[2, 3]！ Fast [D1].") == "它很快。 好！ Fast."


def test_normalisation_folds_full_width_forms_and_cjk_line_wraps():
    assert (
        normalize_text("框架（Vue），\n是 一款  框架")
        == normalize_text("框架(Vue),是一款框架")
        == "框架(Vue),是一款框架"
    )
    assert normalize_text("Vue 是") == normalize_text("Vue是") and normalize_text("a  b") == "a b"
