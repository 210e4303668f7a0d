"""`citekeeper history` and changes.history on a real store of three versions, where one citation goes
valid -> drifted -> stale: from stored citation statuses and computed ones, with and without a verification run,
across a repair revision, and as the report's #history section."""

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from changes.history import answer_history
from citekeeper.answers.store import AnswerStore
from citekeeper.schema import BLAST_RADIUS, CITATION_STATUS
from citekeeper.store import CorpusStore
from citekeeper.tables import read_parquet
from pipelines.cli import main
from reports.history import format_history
from tests.chunk_frames import write_tree

INTRO = "# Guide\n\nThe client keeps connections alive for reuse across requests.\n\n## Timeouts\n\n"
FAQ = {"faq.md": "# FAQ\n\nProxies are read from the environment.\n"}
VERSIONS = {
    "v1": {"guide.md": INTRO + "The default timeout is five seconds for every network operation.\n", **FAQ},
    # the chunk changes, the quote stays: drifted
    "v2": {
        "guide.md": INTRO + "The default timeout is five seconds for every network operation, connects included.\n",
        **FAQ,
    },
    # the quote is gone: stale
    "v3": {
        "guide.md": INTRO + "The default timeout is now ten seconds for every network operation, connects included.\n",
        **FAQ,
    },
}
QUOTE = "The default timeout is five seconds"
TIMEOUT_CLAIM = "The default timeout is five seconds."
GUIDE_MODIFIED = {
    "kind": "document",
    "change": "modified",
    "old_source_path": "guide.md",
    "new_source_path": "guide.md",
    "chunk_change": "modified",
}


def chunk_with(store: CorpusStore, version: str, words: str) -> str:
    chunks = store.read_chunks(version, columns=["chunk_id", "text"])
    return chunks.filter(pl.col("text").str.contains(words, literal=True))["chunk_id"].item()


def add_answers(store: CorpusStore, path: Path, answers: list[dict]) -> None:
    path.write_text("".join(json.dumps(answer) + "\n" for answer in answers))
    assert AnswerStore(store.root).add(path).errors == []


@pytest.fixture(scope="module")
def computed_root(tmp_path_factory) -> Path:
    """Three versions and two answers citing v1; no citation status or verification stored."""
    from parsers.ingest import ingest

    base = tmp_path_factory.mktemp("history")
    store = CorpusStore(base / "store")
    for version, files in VERSIONS.items():
        ingest(write_tree(base / version, files), store, version=version)
    add_answers(
        store,
        base / "answers.jsonl",
        [
            {
                "answer_id": "timeout",
                "answer": "x",
                "corpus_version": "v1",
                "claims": [
                    {
                        "text": TIMEOUT_CLAIM,
                        "citations": [{"chunk_id": chunk_with(store, "v1", "five seconds"), "quote": QUOTE}],
                    },
                    {
                        "text": "Proxies come from the environment.",
                        "citations": [
                            {
                                "chunk_id": chunk_with(store, "v1", "Proxies"),
                                "quote": "Proxies are read from the environment",
                            }
                        ],
                    },
                ],
            },
            {
                "answer_id": "keepalive",
                "answer": "Connections are reused [1].",
                "corpus_version": "v1",
                "references": [
                    {
                        "ref": 1,
                        "chunk_id": chunk_with(store, "v1", "keeps connections"),
                        "quote": "keeps connections alive",
                    }
                ],
            },
        ],
    )
    return store.root


@pytest.fixture(scope="module")
def stored_root(computed_root, tmp_path_factory) -> Path:
    """A copy with the citation statuses of every version stored, and a verification run of v1."""
    from changes.citation_status import check_citations
    from verifiers.verify_store import verify_store

    store = CorpusStore(shutil.copytree(computed_root, tmp_path_factory.mktemp("stored") / "store"))
    for version in VERSIONS:
        check_citations(store, version, suggest=False)
    verify_store(store, store.layout.runs_dir, version="v1", scorer=None)  # anchoring and lexical tiers only
    return store.root


def timeline(document: dict, claim_text: str) -> dict:
    (claim,) = [claim for claim in document["claims"] if claim["text"] == claim_text]
    return claim


def transitions(claim: dict) -> list[tuple]:
    return [(t["from_version"], t["to_version"], t["from_status"], t["to_status"]) for t in claim["transitions"]]


def assert_valid_drifted_stale(document: dict, statuses_from: str, verification: list) -> None:
    assert document["answer_id"] == "timeout"
    assert document["revisions"] == [{"revision": 1, "corpus_version": "v1"}]
    assert document["versions"] == [{"version": v, "revision": 1, "statuses_from": statuses_from} for v in VERSIONS]
    claim = timeline(document, TIMEOUT_CLAIM)
    assert [(s["version"], s["status"], s["statuses"]) for s in claim["versions"]] == [
        ("v1", "valid", ["valid"]),
        ("v2", "drifted", ["drifted"]),
        ("v3", "stale", ["stale"]),
    ]
    assert [s["verification"] for s in claim["versions"]] == verification
    assert transitions(claim) == [("v1", "v2", "valid", "drifted"), ("v2", "v3", "drifted", "stale")]
    for step in claim["transitions"]:
        assert {k: v for k, v in step["cause"].items() if k != "similarity"} == GUIDE_MODIFIED
        assert 0.5 < step["cause"]["similarity"] < 1.0
    stale = claim["versions"][2]["citations"][0]
    assert stale["status"] == "stale" and "evidence no longer in successor" in stale["reason"]
    assert stale["source_path"] == "guide.md" and stale["cited_version"] == "v1"
    proxies = timeline(document, "Proxies come from the environment.")
    assert [s["status"] for s in proxies["versions"]] == ["valid"] * 3 and proxies["transitions"] == []


def test_history_computed_when_nothing_is_stored(computed_root):
    store = CorpusStore(computed_root)
    (document,) = answer_history(store, ["timeout"]).documents()
    assert_valid_drifted_stale(document, "computed", [None, None, None])
    assert not any(store.layout.citation_status_file(v).exists() for v in VERSIONS)  # computed, never written


def test_history_from_stored_statuses_and_verification(stored_root, monkeypatch):
    import changes.history

    def no_judging(*args, **kwargs):
        raise AssertionError("every status is stored: nothing should be judged")

    monkeypatch.setattr(changes.history, "judge_citations", no_judging)
    (document,) = answer_history(CorpusStore(stored_root), ["timeout"]).documents()
    # The lexical tier decides the v1 run; v2 and v3 have no run.
    assert_valid_drifted_stale(document, "stored", ["supported", None, None])


def test_unchanged_citation_names_the_document_change_without_a_transition(computed_root):
    (document,) = answer_history(CorpusStore(computed_root), ["keepalive"]).documents()
    (claim,) = document["claims"]
    assert transitions(claim) == []
    at_v2 = claim["versions"][1]["citations"][0]
    assert at_v2["status"] == "valid"
    assert at_v2["doc_change"] == {
        **{k: v for k, v in GUIDE_MODIFIED.items() if k != "kind"},
        "chunk_change": "unchanged",
        "similarity": 1.0,
    }


def test_history_of_many_answers_at_once(computed_root):
    history = answer_history(CorpusStore(computed_root))
    assert [d["answer_id"] for d in history.documents()] == ["keepalive", "timeout"]
    assert history.changed_answers() == ["timeout"]
    assert history.transitions()["version"].to_list() == ["v2", "v3"]


@pytest.mark.parametrize("root", ["computed_root", "stored_root"])
def test_cli_json_and_text(root, request):
    store_root = request.getfixturevalue(root)
    statuses_from = root.removesuffix("_root")
    result = CliRunner().invoke(
        main, ["history", "timeout", "--json", "--store", str(store_root)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    verification = ["supported", None, None] if statuses_from == "stored" else [None, None, None]
    assert_valid_drifted_stale(json.loads(result.output), statuses_from, verification)

    text = CliRunner().invoke(main, ["history", "timeout", "--store", str(store_root)], catch_exceptions=False)
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert lines[0] == "answer timeout: revision 1 cites v1"
    assert lines[1] == f"statuses: v1 {statuses_from}, v2 {statuses_from}, v3 {statuses_from}"
    assert "  v2  revision 1  drifted [drifted]  verification: none" in lines
    steps = [line.strip() for line in lines if "->" in line]
    assert steps[0].startswith("citation 0: valid -> drifted: guide.md modified; chunk modified (similarity 0.")
    assert steps[1].startswith("citation 0: drifted -> stale: guide.md modified; chunk modified (similarity 0.")
    assert len(steps) == 2


def test_cli_unknown_answer(computed_root):
    result = CliRunner().invoke(main, ["history", "nope", "--store", str(computed_root)])
    assert result.exit_code == 1
    assert "unknown answer id 'nope'" in result.output


def test_repair_revision_is_named_as_the_cause(stored_root, tmp_path):
    store = CorpusStore(shutil.copytree(stored_root, tmp_path / "store"))
    add_answers(
        store,
        tmp_path / "repaired.jsonl",
        [
            {
                "answer_id": "timeout",
                "answer": "x",
                "corpus_version": "v3",
                "claims": [
                    {
                        "text": TIMEOUT_CLAIM,
                        "citations": [
                            {
                                "chunk_id": chunk_with(store, "v3", "ten seconds"),
                                "quote": "The default timeout is now ten seconds",
                            }
                        ],
                    },
                    {
                        "text": "Proxies come from the environment.",
                        "citations": [
                            {
                                "chunk_id": chunk_with(store, "v1", "Proxies"),
                                "quote": "Proxies are read from the environment",
                            }
                        ],
                    },
                ],
            },
        ],
    )
    (document,) = answer_history(store, ["timeout"]).documents()
    # v1 and v2 keep revision 1 (stored); v3 uses revision 2, which v3's stored statuses predate: computed.
    assert [(v["version"], v["revision"], v["statuses_from"]) for v in document["versions"]] == [
        ("v1", 1, "stored"),
        ("v2", 1, "stored"),
        ("v3", 2, "computed"),
    ]
    claim = timeline(document, TIMEOUT_CLAIM)
    assert transitions(claim) == [("v1", "v2", "valid", "drifted"), ("v2", "v3", "drifted", "valid")]
    assert claim["transitions"][1]["cause"] == {"kind": "revision", "revision": 2, "cited_version": "v3"}
    assert "drifted -> valid: revision 2 registered, citing v3" in format_history(document)
    # The proxies citation is the same chunk and quote, now citing v3: still valid, no transition.
    assert timeline(document, "Proxies come from the environment.")["transitions"] == []


def test_report_has_a_history_section_for_changed_answers(stored_root, tmp_path):
    from changes.report_inputs import report_inputs
    from reports.html import write_report

    store = CorpusStore(stored_root)

    def report(version: str) -> str:
        status = read_parquet(store.layout.citation_status_file(version), CITATION_STATUS)
        radius = read_parquet(store.layout.blast_radius_file(version), BLAST_RADIUS)
        shown = report_inputs(store, version, status)
        html = write_report(
            tmp_path / f"{version}.html",
            version,
            blast_radius=radius,
            status=shown.status,
            answers=shown.answers,
            claims=shown.claims,
            versions=shown.versions,
            status_counts=shown.status_counts,
            history=shown.history,
        ).read_text()
        return html.split('<section id="history">', 1)[1]

    section = report("v3")
    assert 'id="history-timeout"' in section and 'id="history-keepalive"' not in section
    assert "citation 0: valid → drifted: guide.md modified; chunk modified (similarity 0." in section
    assert "citation 0: drifted → stale: guide.md modified; chunk modified (similarity 0." in section
    assert '<td>v3</td><td>1</td><td><span class="badge stale">stale</span></td><td>—</td>' in section
    assert '<td>v1</td><td>1</td><td><span class="badge valid">valid</span></td><td>supported</td>' in section
    assert "for every network operation" not in section  # no document text, whatever its scope
    # The report of v2 tells the history up to v2.
    earlier = report("v2")
    assert "valid → drifted" in earlier and "drifted → stale" not in earlier and "<td>v3</td>" not in earlier
