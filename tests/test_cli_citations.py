"""`citekeeper answers add | diff | stale` against a real store built from small markdown corpora."""

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from citekeeper.schema import CHUNK_DIFF, CITATION_STATUS
from citekeeper.store import CorpusStore
from pipelines.cli import main
from tests.chunk_frames import write_tree

V1 = {
    "guide.md": "# Guide\n\nThe client keeps connections alive for reuse across requests.\n\n"
    "## Timeouts\n\nThe default timeout is five seconds for every network operation.\n",
    "legacy.md": "# Legacy\n\nThe old dispatcher API exists only in this release.\n",
}
V2 = {
    "guide.md": "# Guide\n\nThe client keeps connections alive for reuse across requests.\n\n"
    "## Timeouts\n\nThe default timeout is ten seconds for every network operation.\n",
}


@pytest.fixture(scope="module")
def store_root(tmp_path_factory) -> Path:
    from parsers.ingest import ingest

    base = tmp_path_factory.mktemp("cli")
    store = CorpusStore(base / "store")
    ingest(write_tree(base / "v1", V1), store, version="v1")
    ingest(write_tree(base / "v2", V2), store, version="v2")
    chunks = store.read_chunks("v1", columns=["chunk_id", "text"])

    def chunk_with(words: str) -> str:
        return chunks.filter(pl.col("text").str.contains(words, literal=True))["chunk_id"].item()

    answers = [
        {
            "answer_id": "keepalive",
            "answer": "Connections are reused [1].",
            "corpus_version": "v1",
            "references": [
                {"ref": 1, "chunk_id": chunk_with("keeps connections alive"), "quote": "keeps connections alive"}
            ],
        },
        {
            "answer_id": "timeout",
            "answer": "The timeout is five seconds [1].",
            "corpus_version": "v1",
            "references": [
                {"ref": 1, "chunk_id": chunk_with("five seconds"), "quote": "default timeout is five seconds"}
            ],
        },
        {
            "answer_id": "legacy",
            "question": "Dispatcher?",
            "answer": "x",
            "corpus_version": "v1",
            "claims": [{"text": "There is a dispatcher API.", "citations": [{"chunk_id": chunk_with("dispatcher")}]}],
        },
    ]
    lines = [json.dumps(a) for a in answers] + [
        '{"answer_id": "broken", "answer": "y", "corpus_version": "v1", "claims": [{"citations": []}]}'
    ]
    (base / "answers.jsonl").write_text("\n".join(lines) + "\n")
    return store.root


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_answers_add_reports_bad_line_and_registers_good_ones(store_root):
    result = run("answers", "add", str(store_root.parent / "answers.jsonl"), "--store", str(store_root))
    assert result.exit_code == 1
    assert "3 added, 0 revised, 0 unchanged, 1 error(s)" in result.output
    assert "line 4: claims.0.text: Field required" in result.output
    again = run("answers", "add", str(store_root.parent / "answers.jsonl"), "--store", str(store_root))
    assert "0 added, 0 revised, 3 unchanged" in again.output


def test_diff_json_and_parquet(store_root, tmp_path):
    out = tmp_path / "diff.parquet"
    result = run("diff", "v1", "v2", "--store", str(store_root), "--json", "--out", str(out))
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["documents"] == {"modified": 1, "removed": 1}
    assert payload["chunks"].get("modified", 0) + payload["chunks"].get("removed", 0) >= 2
    stored = pl.read_parquet(out)
    assert stored.columns == CHUNK_DIFF.names
    assert sorted(stored["change"].unique()) == sorted(payload["chunks"])
    text = run("diff", "v1", "v2", "--store", str(store_root))
    assert "removed   legacy.md" in text.output


def test_stale_exit_codes_and_outputs(store_root, tmp_path):
    run("answers", "add", str(store_root.parent / "answers.jsonl"), "--store", str(store_root))
    gate = ["--fail-on", "stale,removed,invalid"]
    same = run("stale", "--against", "v1", "--store", str(store_root), *gate)
    assert same.exit_code == 0, same.output
    assert "valid 3  relocated 0" in same.output

    out, report = tmp_path / "status.parquet", tmp_path / "report.html"
    changed = run(
        "stale", "--against", "v2", "--store", str(store_root), "--out", str(out), "--report", str(report), *gate
    )
    assert changed.exit_code == 1
    status = dict(pl.read_parquet(out).select("answer_id", "status").iter_rows())
    assert status == {"keepalive": "valid", "timeout": "stale", "legacy": "removed"}
    assert pl.read_parquet(out).columns == CITATION_STATUS.names
    assert "failing: 1 stale, 1 removed" in changed.output
    html = report.read_text()
    assert 'id="summary"' in html and 'id="answer-timeout"' in html

    assert run("stale", "--against", "v2", "--store", str(store_root), "--no-reanchor").exit_code == 0
    assert (
        run("stale", "--against", "v2", "--store", str(store_root), "--no-reanchor", "--fail-on", "invalid").exit_code
        == 0
    )
    assert (
        run("stale", "--against", "v2", "--store", str(store_root), "--no-reanchor", "--fail-on", "removed").exit_code
        == 1
    )


def test_stale_rejects_unknown_status_and_version(store_root):
    bad_status = run("stale", "--against", "v2", "--store", str(store_root), "--fail-on", "bogus")
    assert bad_status.exit_code == 2 and "unknown status 'bogus'" in bad_status.output
    bad_version = run("stale", "--against", "v9", "--store", str(store_root))
    assert bad_version.exit_code == 1 and "unknown corpus version 'v9'" in bad_version.output


def test_citation_status_function_matches_stored_parquet(store_root):
    from changes.citation_status import check_citations

    run("answers", "add", str(store_root.parent / "answers.jsonl"), "--store", str(store_root))
    frame = check_citations(CorpusStore(store_root), "v1").read_status()
    stored = pl.read_parquet(store_root / "citations" / "target_version=v1" / "citation_status.parquet")
    assert frame.equals(stored)
    assert set(frame["status"]) == {"valid"} and frame.height == 3
