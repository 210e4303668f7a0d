"""Answers at the edges of what registers (#30): a 10 MB quote, more citations than the limits allow, no claims at
all. Each registers or is refused as its line, and every answers command reads back what registered."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from parsers.records import ParseConfig
from pipelines.cli import main
from tests.chunk_frames import write_tree
from tests.store_helpers import chunk_with

PUBLIC = "Timeouts default to five seconds for every request the client sends."


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A store with one corpus version, v1, and the chunk that says PUBLIC."""
    base = tmp_path_factory.mktemp("bounds")
    store = CorpusStore(base / "store")
    ingest(
        write_tree(base / "src", {"guide.md": f"# Guide\n\n{PUBLIC}\n"}),
        store,
        version="v1",
        config=ParseConfig(workers=1),
    )
    return store, chunk_with(store, "v1", "Timeouts")["chunk_id"]


def run(store: CorpusStore, *args: str):
    return CliRunner().invoke(main, [*args, "--store", str(store.root)])


def add(store: CorpusStore, tmp_path, records: list[dict], *options: str):
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return run(store, "answers", "add", str(path), *options)


def test_an_answer_with_a_10_mb_quote_is_shown_and_exported(corpus, tmp_path):
    """polars compiled the quote into a regex: `Compiled regex exceeds size limit` in answers show."""
    store, chunk_id = corpus
    quote = "五秒" * (5 * 2**20)  # 10 M code points, not in the chunk: every locating tier sees it
    record = {
        "answer_id": "long-quote",
        "answer": "x",
        "corpus_version": "v1",
        "claims": [{"text": "Timeouts are five seconds.", "citations": [{"chunk_id": chunk_id, "quote": quote}]}],
    }
    assert add(store, tmp_path, [record]).exit_code == 0
    shown = run(store, "answers", "show", "long-quote")
    assert shown.exit_code == 0, shown.output
    assert "[1] guide.md" in shown.output
    exported = run(store, "answers", "export", "--answer", "long-quote", "--out", str(tmp_path / "out.parquet"))
    assert exported.exit_code == 0, exported.output


def test_an_answer_with_no_claims_is_listed_and_shown(corpus, tmp_path):
    """`answers list` listed it, `answers show` said `no registered answer`."""
    store, _ = corpus
    assert (
        add(store, tmp_path, [{"answer_id": "empty", "answer": "", "corpus_version": "v1", "claims": []}]).exit_code
        == 0
    )
    assert "empty  revision 1  0 claims  0 citations" in run(store, "answers", "list").output.splitlines()
    shown = run(store, "answers", "show", "empty")
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines() == ["answer empty (revision 1)", "  no claims"]
    assert run(store, "answers", "show", "nope").exit_code == 1


def cited(n_claims: int, per_claim: int, chunk_id: str, answer_id: str) -> dict:
    claims = [
        {"text": f"Claim {i}.", "citations": [{"chunk_id": chunk_id, "quote": "five seconds"}] * per_claim}
        for i in range(n_claims)
    ]
    return {"answer_id": answer_id, "answer": "x", "corpus_version": "v1", "claims": claims}


def test_too_many_citations_are_refused_as_their_line(corpus, tmp_path):
    """A claim of 100,000 citations registered (the limit counted claims only), and `stale` ran past 300 s."""
    store, chunk_id = corpus
    result = add(store, tmp_path, [cited(1, 1_001, chunk_id, "bomb"), cited(2, 3, chunk_id, "fine")])
    assert result.exit_code == 1 and "1 added" in result.output, result.output
    assert (
        "line 1: claims: claim 1 has 1,001 citations, over the limit of 1,000 (max_citations_per_claim)"
        in result.output
    )

    result = add(
        store,
        tmp_path,
        [cited(1, 3, chunk_id, "per-claim"), cited(3, 2, chunk_id, "per-answer"), cited(2, 2, chunk_id, "within")],
        "--max-citations-per-claim",
        "2",
        "--max-citations-per-answer",
        "5",
    )
    assert result.exit_code == 1 and "1 added" in result.output, result.output
    assert "line 1: claims: claim 1 has 3 citations, over the limit of 2 (max_citations_per_claim)" in result.output
    assert "line 2: claims: the answer has 6 citations, over the limit of 5 (max_citations_per_answer)" in result.output


def test_marker_form_and_api_responses_count_citations_too(corpus, tmp_path):
    store, chunk_id = corpus
    marker = {
        "answer_id": "markers",
        "answer": "Timeouts are five seconds. [1][2][3]",
        "corpus_version": "v1",
        "references": [{"ref": i, "chunk_id": chunk_id, "quote": "five seconds"} for i in (1, 2, 3)],
    }
    result = add(store, tmp_path, [marker], "--max-citations-per-claim", "2")
    assert "line 1: claims: claim 1 has 3 citations, over the limit of 2 (max_citations_per_claim)" in result.output
    blocks = [
        {
            "type": "text",
            "text": "Timeouts are five seconds.",
            "citations": [
                {
                    "type": "char_location",
                    "cited_text": word,
                    "document_index": 0,
                    "start_char_index": PUBLIC.index(word),
                    "end_char_index": PUBLIC.index(word) + len(word),
                }
                for word in ("Timeouts", "default", "five seconds")
            ],
        }
    ]
    line = {
        "answer_id": "api",
        "corpus_version": "v1",
        "documents": [{"source_path": "guide.md"}],
        "response": {"content": blocks},
    }
    result = add(store, tmp_path, [line], "--from", "anthropic", "--max-citations-per-claim", "2")
    assert "line 1: response: claim 1 has 3 citations, over the limit of 2 (max_citations_per_claim)" in result.output
