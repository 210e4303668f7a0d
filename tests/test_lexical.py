"""The lexical fast path on Chinese, mixed and English text: tokens, guards, windows, and its precision on the
real zh-CN Vue docs."""

from __future__ import annotations

import json

import pytest

from citekeeper.text import sentence_spans
from tests.conftest import VUE_DOCS_ZH, WICE_DEV, load_script, require_eval
from verifiers.lexical import CONTRADICTION, ENTAILMENT, lexical_support, lexical_verdict, tokens

# "㎞" becomes "km" under NFKC: window offsets must still be code points of the raw evidence.
EVIDENCE_ZH = (
    "Ｖｕｅ（读音 /vjuː/，跑完 5㎞ 也能学会）是一款用于构建用户界面的 JavaScript 框架。"
    "它基于标准 HTML、CSS 和 JavaScript 构建，并提供了一套声明式的、组件化的编程模型。"
    "无论是简单还是复杂的界面，Vue 都可以胜任。"
)
REUSE = "组件可以在模板中多次复用，并且每个实例都维护自己独立的状态。"


def test_tokens_segment_chinese_and_keep_latin_words():
    assert tokens("Vue 是一种框架") == ["vue", "是", "1", "种", "框架"]
    assert tokens("你好，世界！") == ["你好", "世界"]  # Chinese punctuation is no token
    assert tokens("ＡＰＩ 的第一次调用") == ["api", "的", "第一次", "调用"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("十二个组件", ["12", "个", "组件"]),
        ("三百五十", ["350"]),
        ("两千零二十四年", ["2024", "年"]),
        ("二〇二四年", ["2024", "年"]),
        ("１２ 个组件", ["12", "个", "组件"]),  # full-width digits
        ("统一管理", ["统一", "管理"]),  # 一 inside a word is no number
        ("千万不要", ["千万", "不要"]),  # "by all means", not ten million
        ("十分重要", ["十分", "重要"]),  # "very", not ten minutes
    ],
)
def test_chinese_numerals_become_digits_only_as_whole_words(text, expected):
    assert tokens(text) == expected


def test_contractions_spell_out_not():
    assert tokens("It isn't; we can't, won’t, cannot.") == [
        "it",
        "is",
        "not",
        "we",
        "can",
        "not",
        "will",
        "not",
        "can",
        "not",
    ]


def test_chinese_near_verbatim_claim_is_supported_with_its_sentence():
    match = lexical_support("它基于标准 HTML、CSS 和 JavaScript 构建，并提供了一套声明式的编程模型。", EVIDENCE_ZH)
    assert match is not None and match.score >= 0.8
    start = EVIDENCE_ZH.index("它基于")
    assert (match.start, match.end) == (start, EVIDENCE_ZH.index("。", start) + 1)


def test_mixed_chinese_english_claim():
    evidence = "Vue 是一款用于构建用户界面的 JavaScript 框架，它基于标准 HTML、CSS 和 JavaScript 构建。"
    assert lexical_support("Vue 是一款用于构建用户界面的 JavaScript 框架。", evidence) is not None
    assert lexical_support("React 是一款用于构建用户界面的 JavaScript 框架。", evidence) is None  # swapped name


@pytest.mark.parametrize(
    ("claim", "evidence"),
    [
        ("组件不可以在模板中多次复用，并且每个实例都维护自己独立的状态。", REUSE),  # negation in the claim
        (REUSE, "组件不可以在模板中多次复用，并且每个实例都维护自己独立的状态。"),  # negation in the evidence
        ("该插件支持服务端渲染和静态站点生成，需要手动配置。", "该插件不支持服务端渲染和静态站点生成，需要手动配置。"),
        # jieba keeps these negations glued to their verb: 未能, 不可, 不宜
        ("这个函数在服务端渲染时正确地返回组件的状态。", "这个函数在服务端渲染时未能正确地返回组件的状态。"),
        ("该属性在运行时修改，只能在创建时设置。", "该属性不可在运行时修改，只能在创建时设置。"),
        ("这个选项在大型项目的生产环境中使用。", "这个选项不宜在大型项目的生产环境中使用。"),
        (
            "组件可以在模板中多次复用，并且每个实例都维护自己独立的状态。",
            "组件可能可以在模板中多次复用，并且每个实例都维护自己独立的状态。",
        ),
    ],
)
def test_chinese_negation_or_hedge_on_one_side_only_is_undecided(claim, evidence):
    assert lexical_support(claim, claim) is not None and lexical_support(evidence, evidence) is not None
    assert lexical_support(claim, evidence) is None


def test_words_that_only_start_like_a_negation_do_not_block():
    # 非常 "very" and 不同 "different" start with a negator's character but negate nothing.
    evidence = "这个组件非常适合在不同的页面中构建复杂的交互界面。"
    assert lexical_support("这个组件适合在不同的页面中构建复杂的交互界面。", evidence) is not None


def test_numbers_must_match_in_any_script():
    evidence = "Vue 3 在 2020 年发布，目前官方一共维护十二个核心库和三种构建工具。"
    assert lexical_support("Vue 3 在 2020 年发布，目前官方一共维护 12 个核心库和三种构建工具。", evidence) is not None
    assert lexical_support("Vue 3 在 2020 年发布，目前官方一共维护十三个核心库和三种构建工具。", evidence) is None
    assert lexical_support("Vue 3 在 2021 年发布，目前官方一共维护十二个核心库和三种构建工具。", evidence) is None


def test_matches_stay_in_place_across_sentences():
    # the claim's 2 must not match the `2` of the previous sentence
    evidence = "最后这个参数 `2` 就是一个更新类型标记。一个元素可以有多个更新类型标记，会被合并成一个数字。"
    assert lexical_support("一个元素可以有多个更新类型标记，会被合并成一个数字。", evidence) is not None
    assert lexical_support("两个元素可以有多个更新类型标记，会被合并成一个数字。", evidence) is None
    # nor may a claim stitch the start of one sentence to the end of the next
    evidence = (
        "当存在修饰符时，我们可能需要在读取或同步回父组件时对其值进行转换。"
        "我们可以通过使用 `get` 和 `set` 选项来实现这一点。"
    )
    assert lexical_support("我们可以通过使用 `get` 和 `set` 选项来实现这一点。", evidence) is not None
    assert lexical_support("我们可能可以通过使用 `get` 和 `set` 选项来实现这一点。", evidence) is None


def test_contraction_in_the_evidence_blocks_the_positive_claim():
    claim = "The cache is cleared when the worker process restarts."
    assert lexical_support(claim, "The cache is cleared when the worker process restarts.") is not None
    assert lexical_support(claim, "The cache isn't cleared when the worker process restarts.") is None
    assert lexical_support(claim, "The cache isn’t cleared when the worker process restarts.") is None
    assert (
        lexical_support(
            "The cache isn't cleared when the worker process restarts.",
            "The cache is not cleared when the worker process restarts.",
        )
        is not None
    )


def test_contrast_marker_in_the_evidence_blocks():
    # Seen on real RAG answers: the growth the claim states is qualified by the evidence's "but".
    evidence = (
        "Public support grew steadily for most of the last decade, but public support has leveled off in the last "
        "few years."
    )
    assert lexical_support("Public support has grown in recent years.", evidence) is None
    claim = "Public support for the program grew steadily over the last decade."
    assert lexical_support(claim, "Public support for the program grew steadily over the last decade.") is not None
    assert (
        lexical_support(
            claim, "Public support for the program grew steadily over the last decade, but it has leveled off lately."
        )
        is None
    )
    zh_claim = "这个框架的用户数量在过去十年中稳步增长。"
    assert lexical_support(zh_claim, "这个框架的用户数量在过去十年中稳步增长。") is not None
    assert lexical_support(zh_claim, "这个框架的用户数量在过去十年中稳步增长，但是最近几年已经停滞。") is None


def test_english_swaps_are_undecided_and_inflections_are_not():
    evidence = "HTTPX was first released in 2019 by Encode. The library offered a broadly requests-compatible API."
    assert lexical_support("HTTPX was first released in 2019 by Google.", evidence) is None
    assert lexical_support("The library offers a broadly requests-compatible API.", evidence) is not None


def test_vue_docs_zh_precision_at_least_095(capsys):
    require_eval(VUE_DOCS_ZH)
    bench = load_script("bench/zh_lexical_precision.py")
    figures = bench.main(VUE_DOCS_ZH)
    assert figures["positives"] >= 300 and figures["negatives"] >= 300
    assert figures["precision"] >= 0.95 and figures["coverage"] >= 0.5
    assert "precision=" in capsys.readouterr().out


# ---------------------------------------------------------- contradictions (a changed number, a flipped negation)

CLAIM_EN = "Refunds are issued within 30 days of the request."
CLAIM_ZH = "该组件支持服务端渲染和静态站点生成功能。"


@pytest.mark.parametrize(
    ("claim", "evidence"),
    [
        (CLAIM_EN, "Refunds are issued within 14 days of the request."),
        (
            "Vue supports server-side rendering in all modern browsers.",
            "Vue does not support server-side rendering in all modern browsers.",
        ),
        (
            "Vue does not support server-side rendering in all modern browsers.",
            "Vue supports server-side rendering in all modern browsers.",
        ),
        (CLAIM_ZH, "该组件不支持服务端渲染和静态站点生成功能。"),  # the glued negation 不支持 lines up with 支持
        (
            "Vue 3 在 2020 年发布，目前官方一共维护 12 个核心库。",
            "Vue 3 在 2020 年发布，目前官方一共维护十三个核心库。",
        ),
        (
            "该特性需要 v3.2.25 及以上版本才能使用。",
            "该特性需要 v3.5 及以上版本才能使用。",
        ),  # the Vue docs' own revision
    ],
)
def test_a_changed_number_or_a_flipped_negation_is_a_lexical_contradiction(claim, evidence):
    match = lexical_verdict(claim, "前文。" + evidence if "。" in evidence else "Before. " + evidence)
    assert match is not None and match.label == CONTRADICTION
    assert lexical_support(claim, evidence) is None  # never support
    assert match.end - match.start == len(evidence)  # the sentence that says otherwise, not its neighbour


@pytest.mark.parametrize(
    ("claim", "evidence"),
    [
        # the negation sits outside the stretch that says the claim: it is about something else
        (
            "Vue supports server-side rendering in all modern browsers.",
            "Vue supports server-side rendering in all modern browsers, which is not trivial.",
        ),
        # a changed number and a flipped negation together: "not 30" does not say "20" is wrong
        ("The plan costs 20 dollars per user each month.", "The plan does not cost 30 dollars per user each month."),
        # another sentence altogether
        (CLAIM_EN, "Invoices are sent within 30 days of the purchase."),
        # a hedge is no negation
        (CLAIM_EN, "Refunds may be issued within 30 days of the request."),
    ],
)
def test_what_is_no_clear_contradiction_is_left_to_the_model(claim, evidence):
    assert lexical_verdict(claim, evidence) is None


def test_support_wins_over_a_contradicting_sentence_of_the_same_evidence():
    evidence = "Refunds are issued within 14 days of the request. Refunds are issued within 30 days of the request."
    assert lexical_verdict(CLAIM_EN, evidence).label == ENTAILMENT


def test_no_real_claim_is_lexically_contradicted_by_evidence_that_supports_it():
    """WiCE dev: claims whose cited Wikipedia evidence supports them (gold `supported`) are never called
    contradicted by the fast path."""
    rows = [
        json.loads(line) for line in require_eval(WICE_DEV).read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    supported = [r for r in rows if r["label"] == "supported"]
    assert len(supported) > 50
    contradicted = [
        r["claim"]
        for r in supported
        for start, end in sentence_spans(r["claim"])
        if (m := lexical_verdict(r["claim"][start:end], "\n".join(r["evidence"]))) and m.label == CONTRADICTION
    ]
    assert contradicted == []
