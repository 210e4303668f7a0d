"""Answer input parsing (both forms), malformed lines, revisions and the answer store files."""

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from citekeeper.answers.files import read_answer_records
from citekeeper.answers.records import AnswerInputError, Issue, parse_answer
from citekeeper.answers.store import AnswerStore
from citekeeper.schema import ANSWERS, CITATIONS, CLAIMS
from citekeeper.text import split_sentences

STRUCTURED = {
    "answer_id": "a1",
    "question": "What is X?",
    "answer": "X is a thing. It has parts.",
    "corpus_version": "v1",
    "created_at": "2025-01-02T03:04:05Z",
    "claims": [
        {"claim_id": "c1", "text": "X is a thing.", "citations": [{"chunk_id": "k1", "quote": "X is a thing"}]},
        {
            "claim_id": "c2",
            "text": "It has parts.",
            "citations": [{"chunk_id": "k2", "text_hash": "sha256:ab"}, {"chunk_id": "k3"}],
        },
    ],
}

MARKER = {
    "answer_id": "m1",
    "question": "Tell me about Y.",
    "answer": "Y was built in 1900 [1]. It is tall.[2][3] Nobody knows why. It fell in 2000 [3].",
    "corpus_version": "v1",
    "references": [
        {"ref": 1, "chunk_id": "k1", "quote": "built in 1900"},
        {"ref": 2, "chunk_id": "k2"},
        {"ref": 3, "chunk_id": "k3", "quote": "fell"},
    ],
}


def write_jsonl(path: Path, lines: list) -> Path:
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


def test_structured_form_keeps_claims_and_citations():
    answer = parse_answer(STRUCTURED)
    assert answer.input_form == "structured"
    assert [c.text for c in answer.claims] == ["X is a thing.", "It has parts."]
    assert [c.source_claim_id for c in answer.claims] == ["c1", "c2"]
    assert answer.claims[0].citations[0].quote == "X is a thing"
    assert answer.claims[1].citations[0].cited_text_hash == "sha256:ab"
    assert answer.claims[1].citations[1].quote is None
    assert answer.created_at.year == 2025 and answer.created_at.tzinfo is not None


def test_marker_form_one_claim_per_sentence_and_uncited_kept():
    answer = parse_answer(MARKER)
    assert answer.input_form == "marker"
    texts = [c.text for c in answer.claims]
    assert texts == ["Y was built in 1900.", "It is tall.", "Nobody knows why.", "It fell in 2000."]
    assert [[x.chunk_id for x in c.citations] for c in answer.claims] == [["k1"], ["k2", "k3"], [], ["k3"]]
    assert answer.claims[0].citations[0].quote == "built in 1900"


def test_split_sentences_keeps_trailing_markers_with_their_sentence():
    assert split_sentences("A [1]. B.[2] C") == ["A [1].", "B.[2]", "C"]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda r: r.pop("answer_id"), "answer_id"),
        (lambda r: r.update(corpus_version=3), "corpus_version"),
        (lambda r: r["claims"][1]["citations"][0].pop("chunk_id"), "claims.1.citations.0.chunk_id"),
        (lambda r: r["claims"][0].update(text=""), "claims.0.text"),
        (lambda r: r.update(created_at="yesterday"), "created_at"),
        (lambda r: r["claims"][1]["citations"][0].update(text_hash="md5:1"), "claims.1.citations.0.text_hash"),
        (lambda r: r.update(references=[]), "claims"),
    ],
)
def test_malformed_structured_names_field(mutate, field):
    record = json.loads(json.dumps(STRUCTURED))
    mutate(record)
    with pytest.raises(AnswerInputError) as exc:
        parse_answer(record)
    assert [issue.field for issue in exc.value.issues] == [field]


def test_marker_with_unknown_reference_is_an_error():
    record = dict(MARKER, answer="Z [9].")
    with pytest.raises(AnswerInputError) as exc:
        parse_answer(record)
    assert exc.value.issues == [Issue("answer", "marker [9] has no entry in references")]


def test_add_registers_good_lines_and_reports_bad_ones(tmp_path):
    bad_ref = dict(MARKER, answer_id="m2", references=[{"ref": "one", "chunk_id": "k"}])
    path = write_jsonl(tmp_path / "in.jsonl", [STRUCTURED, "{not json", bad_ref, "", MARKER])
    store = AnswerStore(tmp_path / "store")
    result = store.add(path)
    assert sorted(result.added) == ["a1", "m1"]
    assert [(e.line, e.field) for e in result.errors] == [(2, "json"), (3, "references.0.ref")]
    answers = store.all_answers()
    assert answers.columns == ANSWERS.names
    assert sorted(answers["answer_id"]) == ["a1", "m1"]
    claims = store.claims()
    assert claims.columns == CLAIMS.names
    assert claims.filter(pl.col("answer_id") == "m1")["n_citations"].to_list() == [1, 2, 0, 1]
    assert claims.filter(pl.col("answer_id") == "m1")["status"].to_list() == ["cited", "cited", "uncited", "cited"]
    citations = store.citations()
    assert citations.columns == CITATIONS.names
    assert citations.height == 3 + 4
    assert citations["citation_id"].n_unique() == citations.height


def test_identical_readd_is_noop_and_changed_content_makes_a_revision(tmp_path):
    store = AnswerStore(tmp_path / "store")
    store.add(write_jsonl(tmp_path / "a.jsonl", [STRUCTURED, MARKER]))
    first_claims = store.claims()
    again = store.add(write_jsonl(tmp_path / "b.jsonl", [STRUCTURED]))
    assert again.unchanged == ["a1"] and again.n_registered == 0
    assert store.all_answers().height == 2

    changed = json.loads(json.dumps(STRUCTURED))
    changed["claims"][1]["text"] = "It has many parts."
    result = store.add(write_jsonl(tmp_path / "c.jsonl", [changed]))
    assert result.revised == [("a1", 2)]
    assert store.all_answers().filter(pl.col("answer_id") == "a1")["revision"].sort().to_list() == [1, 2]
    current = store.claims().filter(pl.col("answer_id") == "a1")
    assert current["revision"].unique().to_list() == [2]
    assert current["text"].to_list() == ["X is a thing.", "It has many parts."]
    # The unchanged claim keeps its id across revisions; the changed one gets a new id.
    old = first_claims.filter(pl.col("answer_id") == "a1")
    assert current["claim_id"][0] == old["claim_id"][0]
    assert current["claim_id"][1] != old["claim_id"][1]
    assert store.citations().filter(pl.col("answer_id") == "a1")["revision"].unique().to_list() == [2]


def test_add_parquet_input(tmp_path):
    path = tmp_path / "in.parquet"
    pl.DataFrame([{k: v for k, v in MARKER.items()}]).write_parquet(path)
    result = AnswerStore(tmp_path / "store").add(path)
    assert result.added == ["m1"] and not result.errors


def test_chinese_marker_answer_gives_one_claim_per_sentence():
    record = {
        "answer_id": "zh1",
        "answer": (
            "Vite 是一种新型前端构建工具。[1] 它使用 Rollup 打包代码【2】。它很快！[1,2] 没有引用的一句。见^[D1]。"
        ),
        "corpus_version": "v1",
        "references": [
            {"ref": 1, "chunk_id": "k1"},
            {"ref": "2", "chunk_id": "k2"},
            {"ref": "D1", "chunk_id": "k3"},
        ],
    }
    answer = parse_answer(record)
    assert [c.text for c in answer.claims] == [
        "Vite 是一种新型前端构建工具。",
        "它使用 Rollup 打包代码。",
        "它很快！",
        "没有引用的一句。",
        "见。",
    ]
    assert [[x.chunk_id for x in c.citations] for c in answer.claims] == [["k1"], ["k2"], ["k1", "k2"], [], ["k3"]]
    with pytest.raises(AnswerInputError) as exc:
        parse_answer(dict(record, answer="它很快。[S9]"))
    assert exc.value.issues == [Issue("answer", "marker [S9] has no entry in references")]


def line_errors(tmp_path: Path, lines: list) -> list[str]:
    _, errors = read_answer_records(write_jsonl(tmp_path / "in.jsonl", lines))
    return [str(error) for error in errors]


def test_errors_name_the_line_the_dotted_path_and_what_is_wrong(tmp_path):
    wrong_type = json.loads(json.dumps(STRUCTURED))
    wrong_type["claims"][1]["citations"][1]["quote"] = 7
    two_problems = json.loads(json.dumps(STRUCTURED))
    del two_problems["claims"][0]["text"]
    two_problems["answer_id"] = " "
    unknown_marker = dict(MARKER, answer="Y was built in 1900 [1]. It is tall [4].")
    assert line_errors(tmp_path, [STRUCTURED, wrong_type, two_problems, unknown_marker, "[1, 2]", MARKER]) == [
        "line 2: claims.1.citations.1.quote: Input should be a valid string",
        "line 3: answer_id: String should not be blank",
        "line 3: claims.0.text: Field required",
        "line 4: answer: marker [4] has no entry in references",
        "line 5: record: Input should be an object",
    ]


@pytest.mark.parametrize(
    ("record", "issue"),
    [
        (
            dict(STRUCTURED, created_at="yesterday"),
            Issue("created_at", "Input should be an ISO-8601 timestamp, got 'yesterday'"),
        ),
        (dict(STRUCTURED, corpus_version=3), Issue("corpus_version", "Input should be a valid string")),
        (
            {k: v for k, v in STRUCTURED.items() if k != "claims"},
            Issue("claims", "missing: give claims (structured) or references (marker form)"),
        ),
        (
            dict(STRUCTURED, references=MARKER["references"]),
            Issue("claims", "give either claims (structured) or references (marker form), not both"),
        ),
        (
            dict(MARKER, references=[{"ref": 1, "chunk_id": "k1"}, {"ref": "01", "chunk_id": "k2"}]),
            Issue("references.1.ref", "duplicate reference 1"),
        ),
        (
            dict(MARKER, references=[{"ref": "one", "chunk_id": "k1"}]),
            Issue("references.0.ref", "Input should be an integer or a marker id such as 'D1', got 'one'"),
        ),
    ],
)
def test_record_rule_messages(record, issue):
    with pytest.raises(AnswerInputError) as exc:
        parse_answer(record)
    assert exc.value.issues == [issue]


def test_content_hash_is_stable():
    """Stores compare it to tell an identical re-add: a changed hash would make every re-add a new revision."""
    assert (
        parse_answer(STRUCTURED).content_hash
        == "sha256:8dfc1aa7582907952eb515924166dad8e92ef5bb31cc995ff3554e6e7d9692a8"
    )
    assert (
        parse_answer(MARKER).content_hash == "sha256:6d6a1c3e172a4a8277b2a619b0f286ce77eed6ab8e7e728b53211e0a6b8402cb"
    )


def test_parquet_rows_of_both_forms_read_like_jsonl(tmp_path):
    """A Parquet file mixing the forms has a null `references` on structured rows and a null `claims` on marker rows."""
    path = tmp_path / "in.parquet"
    pl.DataFrame([STRUCTURED, MARKER]).write_parquet(path)
    answers, errors = read_answer_records(path)
    assert not errors
    assert [a.content_hash for a in answers] == [
        parse_answer(STRUCTURED).content_hash,
        parse_answer(MARKER).content_hash,
    ]


def test_parquet_extra_columns_of_any_type_are_kept_and_never_sink_the_add(tmp_path):
    """A date, a Decimal and bytes in extra columns (#20: `date is not JSON serializable` sank the whole add)."""
    rows = [
        dict(MARKER, answer_id=f"m{i}", asked_on=dt.date(2026, 1, i + 1), cost=Decimal("0.10"), blob=b"\x00\xff")
        for i in range(2)
    ]
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    result = AnswerStore(tmp_path / "store").add(path)
    assert result.added == ["m0", "m1"] and not result.errors
    kept = json.loads(
        AnswerStore(tmp_path / "store").answers().filter(pl.col("answer_id") == "m1")["source_record"].item()
    )
    assert (kept["asked_on"], kept["cost"], kept["blob"]) == ("2026-01-02", "0.10", "AP8=")
