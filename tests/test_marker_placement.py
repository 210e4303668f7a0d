"""Marker-form answers: every placement of `[N]` markers LLMs write gives one claim per sentence, each with its
own references, in English and Chinese (issue #20). The expected claims come from how the answer was built."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from citekeeper.answers.records import parse_answer

ENGLISH = [
    "Timeouts default to 5 seconds for every request",
    "Connection pools are reused across requests",
    "The client follows redirects only when asked",
    "HTTP/2 support needs the optional h2 package",
    "Proxies are read from the environment by default",
]
CHINESE = [
    "Vite 是一种新型前端构建工具",
    "它使用 Rollup 打包生产环境的代码",
    "你可以使用 . 作为项目名称",  # a lone ASCII full stop inside a Chinese sentence is code, not its end
    "命令中使用 NODE_ENV=... 的主要好处是什么",  # so is an ellipsis after code
    "在开发过程中，Vite 会启动一个开发服务器",
]
# Each marker style written for the reference ids of one sentence.
STYLES = {
    "bracket": lambda ids: "".join(f"[{i}]" for i in ids),
    "list": lambda ids: "[" + ",".join(ids) + "]",
    "fullwidth": lambda ids: "".join(f"【{i}】" for i in ids),
    "caret": lambda ids: "".join(f"^[{i}]" for i in ids),
}


@dataclass(frozen=True)
class Sentence:
    text: str  # without its full stop
    refs: tuple[str, ...]
    style: str
    before_stop: bool  # "text [1]." rather than "text. [1]"
    spaced: bool  # a space between the text (or the stop) and the markers


def render(sentence: Sentence, chinese: bool) -> str:
    stop = "。" if chinese else "."
    markers = STYLES[sentence.style](sentence.refs) if sentence.refs else ""
    gap = " " if sentence.spaced and markers else ""
    if sentence.before_stop:
        return f"{sentence.text}{gap}{markers}{stop}"
    return f"{sentence.text}{stop}{gap}{markers}"


@st.composite
def answers(draw):
    chinese = draw(st.booleans())
    pool = CHINESE if chinese else ENGLISH
    n = draw(st.integers(1, len(pool)))
    texts = draw(st.permutations(pool))[:n]
    sentences = [
        Sentence(
            text,
            tuple(draw(st.lists(st.sampled_from(["1", "2", "3"]), max_size=3, unique=True))),
            draw(st.sampled_from(sorted(STYLES))),
            draw(st.booleans()),
            draw(st.booleans()),
        )
        for text in texts
    ]
    separators = [draw(st.sampled_from(["", " ", "\n", "\n\n"] if chinese else [" ", "\n", "\n\n"])) for _ in sentences]
    ending = draw(st.sampled_from(["", "\n", " \n", "\n\n"]))
    answer = "".join(render(s, chinese) + sep for s, sep in zip(sentences[:-1], separators)) + render(
        sentences[-1], chinese
    )
    return sentences, chinese, answer + ending


@settings(max_examples=400, deadline=None)
@given(answers())
def test_every_marker_placement_gives_each_sentence_its_own_references(example):
    sentences, chinese, answer = example
    record = {
        "answer_id": "a1",
        "answer": answer,
        "corpus_version": "v1",
        "references": [{"ref": ref, "chunk_id": f"ck_{ref}"} for ref in ("1", "2", "3")],
    }
    claims = parse_answer(record).claims
    stop = "。" if chinese else "."
    assert [claim.text for claim in claims] == [s.text + stop for s in sentences], answer
    assert [tuple(c.chunk_id for c in claim.citations) for claim in claims] == [
        tuple(f"ck_{ref}" for ref in s.refs) for s in sentences
    ], answer


def test_the_reported_placements():
    """The placements issue #20 found wrong: a marker after the final stop, the last of several sentences,
    an answer ending in a newline, and ASCII punctuation used as code inside Chinese."""
    cases = {
        "Timeouts default to 5 seconds for every request. [1]": [["1"]],
        "A holds one thing. [1] B holds another. [2]": [["1"], ["2"]],
        "A holds one thing. [1] B holds another. [2]\n": [["1"], ["2"]],
        "你可以使用 . 作为项目名称。[1]": [["1"]],
        "命令中使用 NODE_ENV=... 的主要好处是减少体积。[1] 它很快。[2]": [["1"], ["2"]],
    }
    for answer, refs in cases.items():
        record = {
            "answer_id": "a",
            "answer": answer,
            "corpus_version": "v1",
            "references": [{"ref": r, "chunk_id": f"ck_{r}"} for r in ("1", "2")],
        }
        claims = parse_answer(record).claims
        assert [[c.chunk_id.removeprefix("ck_") for c in claim.citations] for claim in claims] == refs, answer
