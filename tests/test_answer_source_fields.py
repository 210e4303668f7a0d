"""An answer's audience, the version and scope it is about, and each citation's retrieved_at (issue 31): read from
every input form (structured, marker, `--from` envelopes) and `answers add --audience`, stored in ANSWERS and
CITATIONS, part of the content hash, and refused with the line and field when malformed."""

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from citekeeper.answers.records import AnswerInputError, parse_answer
from citekeeper.answers.store import AnswerStore
from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from pipelines.cli import main
from tests.chunk_frames import write_tree

CREATED = "2025-01-02T03:04:05Z"
RETRIEVED = "2024-12-31T23:00:00+01:00"  # 22:00 UTC
GUIDE = "The client keeps connections alive for reuse across requests."
LIMITS = "每个网络操作的默认超时时间为五秒。"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


@pytest.fixture(scope="module")
def store_root(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("source-fields")
    store = CorpusStore(base / "store")
    ingest(
        write_tree(base / "v1", {"guide.md": f"# Guide\n\n{GUIDE}\n", "limits.md": f"# 限制\n\n{LIMITS}\n"}),
        store,
        version="v1",
    )
    return base


def chunk_of(store_root: Path, words: str) -> str:
    chunks = CorpusStore(store_root / "store").read_chunks("v1", columns=["chunk_id", "text"])
    return chunks.filter(pl.col("text").str.contains(words, literal=True))["chunk_id"].item()


def structured(store_root: Path, answer_id: str, **fields) -> dict:
    return {
        "answer_id": answer_id,
        "answer": "Connections are reused.",
        "corpus_version": "v1",
        "created_at": CREATED,
        "claims": [
            {
                "text": "Connections are reused.",
                "citations": [
                    {
                        "chunk_id": chunk_of(store_root, "keeps connections"),
                        "quote": "keeps connections alive",
                        "retrieved_at": RETRIEVED,
                    },
                    {"chunk_id": chunk_of(store_root, "五秒")},
                ],
            }
        ],
    } | fields


def marker(store_root: Path, answer_id: str, **fields) -> dict:
    return {
        "answer_id": answer_id,
        "answer": "超时为五秒 [1]。连接会复用 [2]。",
        "corpus_version": "v1",
        "created_at": CREATED,
        "references": [
            {
                "ref": 1,
                "chunk_id": chunk_of(store_root, "五秒"),
                "quote": "默认超时时间为五秒",
                "retrieved_at": RETRIEVED,
            },
            {"ref": 2, "chunk_id": chunk_of(store_root, "keeps connections")},
        ],
    } | fields


def envelope(answer_id: str, **fields) -> dict:
    return {
        "answer_id": answer_id,
        "corpus_version": "v1",
        "created_at": CREATED,
        "documents": [{"source_path": "guide.md", "retrieved_at": RETRIEVED}, {"source_path": "limits.md"}],
        "response": {
            "type": "message",
            "content": [
                {
                    "type": "text",
                    "text": "Connections are reused.",
                    "citations": [{"type": "char_location", "cited_text": GUIDE, "document_index": 0}],
                },
                {
                    "type": "text",
                    "text": " 超时为五秒。",
                    "citations": [{"type": "char_location", "cited_text": LIMITS, "document_index": 1}],
                },
            ],
        },
    } | fields


def run(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def add(store_root: Path, name: str, records: list[dict], *options: str):
    path = store_root / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return run("answers", "add", path, "--store", store_root / "store", *options)


def stored(store_root: Path, answer_id: str) -> tuple[dict, list[dict]]:
    answers = AnswerStore(store_root / "store")
    answer = answers.answers().filter(pl.col("answer_id") == answer_id).row(0, named=True)
    citations = answers.citations().filter(pl.col("answer_id") == answer_id).sort("claim_id", "citation_index")
    return answer, citations.to_dicts()


def test_each_input_form_stores_audience_version_scope_and_retrieved_at(store_root):
    result = add(
        store_root,
        "forms",
        [
            structured(store_root, "s1", audience=["staff", "eu"], about_version="v2", scope=["http", "python"]),
            marker(store_root, "m1", audience="staff", about_version="2.1", scope="网络"),
        ],
    )
    assert result.exit_code == 0, result.output
    record = envelope(
        "e1", audience=["public"], about_version="v1", scope=["http"], retrieved_at="2024-06-01T00:00:00Z"
    )
    result = add(store_root, "envelopes", [record], "--from", "anthropic")
    assert result.exit_code == 0, result.output
    answer, citations = stored(store_root, "s1")
    assert (answer["audience"], answer["about_version"], answer["scope_labels"]) == (
        ["eu", "staff"],
        "v2",
        ["http", "python"],
    )
    assert [c["retrieved_at"] for c in citations] == [utc(RETRIEVED), utc(CREATED)]  # given, else created_at
    answer, citations = stored(store_root, "m1")
    assert (answer["audience"], answer["about_version"], answer["scope_labels"]) == (["staff"], "2.1", ["网络"])
    by_quote = {c["quote"]: c["retrieved_at"] for c in citations}
    assert by_quote == {"默认超时时间为五秒": utc(RETRIEVED), None: utc(CREATED)}
    answer, citations = stored(store_root, "e1")
    assert (answer["audience"], answer["about_version"], answer["scope_labels"]) == (["public"], "v1", ["http"])
    # the document entry's own retrieved_at, else the envelope's (not created_at)
    assert {c["quote"]: c["retrieved_at"] for c in citations} == {
        GUIDE: utc(RETRIEVED),
        LIMITS: utc("2024-06-01T00:00:00Z"),
    }


def test_without_them_the_columns_are_null_and_retrieved_at_is_created_at(store_root):
    record = envelope("plain")
    record["documents"][0].pop("retrieved_at")
    assert add(store_root, "plain", [record], "--from", "anthropic").exit_code == 0
    answer, citations = stored(store_root, "plain")
    assert (answer["audience"], answer["about_version"], answer["scope_labels"]) == (None, None, None)
    assert {c["retrieved_at"] for c in citations} == {utc(CREATED)}


def test_a_changed_audience_scope_version_or_retrieval_is_a_new_revision_their_order_is_not(store_root):
    first = structured(store_root, "rev", audience=["a", "b"], scope=["x", "y"])
    assert add(store_root, "rev1", [first]).exit_code == 0
    reordered = structured(store_root, "rev", audience=["b", "a", "a"], scope=["y", "x"])
    assert "0 added, 0 revised, 1 unchanged" in add(store_root, "rev2", [reordered]).output
    for change in ({"audience": ["a"]}, {"about_version": "v9"}, {"scope": ["x"]}):
        assert (
            "1 revised"
            in add(store_root, "rev3", [structured(store_root, "rev", **{"audience": ["a"], **change})]).output
        )
    moved = structured(store_root, "rev", audience=["a"], about_version="v9")
    moved["claims"][0]["citations"][0]["retrieved_at"] = "2025-01-01T00:00:00Z"
    assert "1 revised" in add(store_root, "rev4", [moved]).output


def test_cli_audience_applies_where_none_is_given_and_never_widens_one(store_root):
    records = [
        structured(store_root, "none"),
        structured(store_root, "own", audience=["eu", "staff"]),
        structured(store_root, "apart", audience=["partners"]),
    ]
    result = add(store_root, "cli", records, "--audience", "staff, public")
    assert result.exit_code == 0, result.output
    audiences = {a: stored(store_root, a)[0]["audience"] for a in ("none", "own", "apart")}
    # a record's own audience is narrowed to the groups both name; none in common: an audience of nobody
    assert audiences == {"none": ["public", "staff"], "own": ["staff"], "apart": []}
    bad = add(store_root, "cli-bad", records, "--audience", "staff,,x")
    assert bad.exit_code == 2 and "names an empty group" in bad.output


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda r: r.update(audience=[1]), "audience"),
        (lambda r: r.update(audience={"group": "x"}), "audience"),
        (lambda r: r.update(scope=[" "]), "scope"),
        (lambda r: r.update(about_version=""), "about_version"),
        (
            lambda r: r["claims"][0]["citations"][1].update(retrieved_at="last week"),
            "claims.0.citations.1.retrieved_at",
        ),
    ],
)
def test_malformed_fields_are_named(store_root, change, field):
    record = structured(store_root, "bad")
    change(record)
    with pytest.raises(AnswerInputError) as caught:
        parse_answer(record)
    assert [issue.field for issue in caught.value.issues] == [field]
    result = add(store_root, "bad", [structured(store_root, "good"), record])
    assert result.exit_code == 1 and f"line 2: {field}: " in result.output


def test_envelope_fields_are_validated_with_their_path(store_root):
    record = envelope("bad-env", audience=[""])
    record["documents"][1]["retrieved_at"] = "soon"
    result = add(store_root, "bad-env", [record], "--from", "anthropic")
    assert result.exit_code == 1
    assert "line 1: audience: " in result.output and "line 1: documents.1.retrieved_at: " in result.output
