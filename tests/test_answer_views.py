"""Answers read back (`citekeeper answers list | show | export`): every claim and citation of the current
revisions, each citation located in the version it cites; internal_only quotes withheld unless asked for."""

from __future__ import annotations

import json

import polars as pl
import pyarrow.parquet as pq
from click.testing import CliRunner

from citekeeper.answers.store import AnswerStore
from citekeeper.api import answer_citations, register_answers
from citekeeper.schema import ANSWER_EXPORT
from citekeeper.scope import RAW_TEXT_KEY, REDACTED
from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from parsers.records import ParseConfig
from pipelines.cli import main
from tests.chunk_frames import write_tree
from tests.store_helpers import chunk_with

PUBLIC = "Timeouts default to five seconds for every request the client sends."
SECRET = "The acquisition closes in March."


def test_export_show_and_list(tmp_path):
    store = CorpusStore(tmp_path / "store")
    source = write_tree(
        tmp_path / "src",
        {
            "guide.md": f"# Guide\n\n{PUBLIC}\n",
            "plan.md": f"---\naccess_scope: internal_only\n---\n# Plan\n\n{SECRET}\n",
        },
    )
    ingest(source, store, version="v1", config=ParseConfig(workers=1))
    guide, plan = chunk_with(store, "v1", "Timeouts"), chunk_with(store, "v1", "acquisition")
    records = [
        {
            "answer_id": "m",
            "answer": "Timeouts are five seconds. [1] Nothing else is said.",
            "corpus_version": "v1",
            "references": [{"ref": 1, "chunk_id": guide["chunk_id"], "quote": "five seconds"}],
        },
        {
            "answer_id": "s",
            "answer": "...",
            "corpus_version": "v1",
            "claims": [
                {
                    "text": "It closes in March.",
                    "citations": [
                        {"chunk_id": plan["chunk_id"], "quote": "closes in March"},
                        {"chunk_id": "ck_invented"},
                    ],
                }
            ],
        },
    ]
    (tmp_path / "answers.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    AnswerStore(store.root).add(tmp_path / "answers.jsonl")
    run = lambda *args: CliRunner().invoke(main, [*args, "--store", str(store.root)])  # noqa: E731

    assert run("answers", "export", "--out", str(tmp_path / "all.parquet")).exit_code == 0
    rows = pl.read_parquet(tmp_path / "all.parquet")
    assert rows.columns == ANSWER_EXPORT.names and rows.height == 4  # 2 citations, an uncited claim, an invented chunk
    texts = dict(store.read_documents("v1", columns=["doc_id", "text"]).iter_rows())
    quoted = rows.filter(pl.col("answer_id") == "m").row(0, named=True)
    assert (quoted["source_path"], quoted["quote_match"], quoted["anchored_by"]) == ("guide.md", "exact", "chunk_id")
    assert texts[quoted["doc_id"]][quoted["start_char"] : quoted["end_char"]] == "five seconds"
    uncited = rows.filter(pl.col("claim_status") == "uncited").row(0, named=True)
    assert uncited["claim_text"] == "Nothing else is said." and uncited["citation_id"] is None
    internal = rows.filter(pl.col("chunk_id") == plan["chunk_id"]).row(0, named=True)
    assert internal["quote"] == REDACTED and internal["access_scope"] == "internal_only"
    invented = rows.filter(pl.col("chunk_id") == "ck_invented").row(0, named=True)
    assert invented["doc_id"] is None and invented["start_char"] is None
    assert pq.read_schema(tmp_path / "all.parquet").metadata[RAW_TEXT_KEY.encode()] == b"withheld"

    run("answers", "export", "--out", str(tmp_path / "raw.parquet"), "--answer", "s", "--include-internal-text")
    raw = pl.read_parquet(tmp_path / "raw.parquet")
    assert set(raw["answer_id"]) == {"s"} and "closes in March" in raw["quote"].to_list()

    shown = run("answers", "show", "m")
    assert shown.exit_code == 0, shown.output
    assert "claim 1 (cited): Timeouts are five seconds." in shown.output and "claim 2 (uncited)" in shown.output
    assert f"guide.md · {guide['chunk_id']} · chars {quoted['start_char']}–{quoted['end_char']} · v1" in shown.output
    assert SECRET not in run("answers", "show", "s").output
    assert run("answers", "show", "nope").exit_code == 1
    listed = run("answers", "list").output.splitlines()
    assert listed == ["m  revision 1  2 claims  1 citations", "s  revision 1  1 claims  2 citations"]


def test_the_python_api_registers_records_and_reads_them_back(tmp_path):
    store = CorpusStore(tmp_path / "store")
    ingest(
        write_tree(tmp_path / "src", {"guide.md": f"# Guide\n\n{PUBLIC}\n"}),
        store,
        version="v1",
        config=ParseConfig(workers=1),
    )
    chunk = chunk_with(store, "v1", "Timeouts")
    good = {
        "answer_id": "a1",
        "answer": "Timeouts are five seconds. [1]",
        "corpus_version": "v1",
        "references": [{"ref": 1, "chunk_id": chunk["chunk_id"], "quote": "five seconds"}],
    }
    result = register_answers(store.root, iter([good, {"answer_id": "bad"}]))
    assert result.added == ["a1"] and [e.line for e in result.errors] and all(e.line == 2 for e in result.errors)
    assert register_answers(store.root, [good]).unchanged == ["a1"]
    rows = answer_citations(store.root, "a1")
    assert rows["quote"].to_list() == ["five seconds"] and rows["source_path"].to_list() == ["guide.md"]
    assert AnswerStore(store.root).answers()["source_file"].to_list() == ["api"]
