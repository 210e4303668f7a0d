"""`citekeeper repair` on a small real store: one document change per repair kind, both input forms."""

import json
from datetime import UTC, datetime

import polars as pl
import pytest
from click.testing import CliRunner

from changes.repair import record_from_rows, repair_citations
from citekeeper.answers.records import answer_rows, parse_answer
from citekeeper.answers.store import AnswerStore
from citekeeper.schema import REPAIRS
from citekeeper.store import CorpusStore
from pipelines.cli import main
from tests.chunk_frames import write_tree
from tests.store_helpers import chunk_with

TIMEOUT = "The default timeout is five seconds for every network operation."
RETRY = "The retry budget is five attempts per minute for every client."
POOL = 'The "pool" limit is ten connections per host by default.'
V1 = {
    "moved.md": "# Moved\n\nThe alpha setting controls how failed requests are retried by the client.\n",
    "drift.md": f"# Timeouts\n\n{TIMEOUT}\n",
    "rewritten.md": "# Proxies\n\nProxies are configured per client. Each proxy URL names its scheme and its host.\n",
    "retry.md": f"# Retries\n\n{RETRY}\n",
    "pool.md": f"# Pools\n\n{POOL}\n",
    "gone.md": "# Legacy\n\nThe old dispatcher API existed only in the first release of the library.\n",
}
V2 = {
    "renamed.md": V1["moved.md"],  # same text, another document: relocated
    "drift.md": f"# Timeouts\n\n{TIMEOUT} Streaming responses have no read timeout.\n",  # drifted
    # the proxy sentence leaves its paragraph for another document, verbatim: relocated there
    "rewritten.md": "# Proxies\n\nProxies are configured per client. Proxy settings moved to the transport page.\n",
    "transport.md": "# Transport\n\nEach proxy URL names its scheme and its host.\n",
    "retry.md": "# Retries\n\nThe retry budget is six attempts per minute for every client.\n",  # near miss: suggestion
    "pools.md": "# Pool limits\n\nThe “pool” limit is ten connections per host by default.\n",  # curly quotes now
}


@pytest.fixture()
def store(tmp_path) -> CorpusStore:
    from parsers.ingest import ingest

    store = CorpusStore(tmp_path / "store")
    ingest(write_tree(tmp_path / "v1", V1), store, version="v1")
    ingest(write_tree(tmp_path / "v2", V2), store, version="v2")

    def cite(words: str, quote: str | None = None, with_hash: bool = False) -> dict:
        chunk = chunk_with(store, "v1", words)
        return (
            {"chunk_id": chunk["chunk_id"]}
            | ({"quote": quote} if quote else {})
            | ({"text_hash": chunk["text_hash"]} if with_hash else {})
        )

    answers = [
        {
            "answer_id": "structured",
            "question": "How does the client behave?",
            "answer": "See the claims.",
            "corpus_version": "v1",
            "trace_id": "t-1",
            "claims": [
                {
                    "claim_id": "c1",
                    "text": "Failed requests are retried per the alpha setting.",
                    "citations": [cite("alpha setting")],
                },
                {
                    "claim_id": "c2",
                    "text": "The timeout is five seconds.",
                    "citations": [cite("five seconds", TIMEOUT, with_hash=True)],
                },
                {
                    "claim_id": "c3",
                    "text": "A proxy URL has a scheme and a host.",
                    "citations": [cite("proxy URL", "Each proxy URL names its scheme and its host.")],
                },
                {"claim_id": "c4", "text": "The pool limit is ten.", "citations": [cite("limit is ten", POOL)]},
                {
                    "claim_id": "c5",
                    "text": "There was a dispatcher API.",
                    "citations": [cite("dispatcher", "old dispatcher API")],
                },
                {"claim_id": "c6", "text": "Made up.", "citations": [cite("dispatcher", "a sentence nobody wrote")]},
            ],
        },
        {
            "answer_id": "marker",
            "answer": "The timeout is five seconds [1]. Clients retry five times a minute [2]. "
            "Every operation has that timeout [1].",
            "corpus_version": "v1",
            "model": "rag-7",
            "references": [
                {"ref": 1, **cite("five seconds", "default timeout is five seconds")},
                {"ref": "02", **cite("retry budget", RETRY)},  # spelled as the user spelled it
                {"ref": 9, **cite("alpha setting")},
            ],
        },  # used by no marker
        {
            "answer_id": "untouched",
            "answer": "Retries follow the alpha setting [1].",
            "corpus_version": "v1",
            "references": [{"ref": 1, **cite("alpha setting")}],
        },
    ]
    path = tmp_path / "answers.jsonl"
    path.write_text("\n".join(json.dumps(a) for a in answers) + "\n")
    assert AnswerStore(store.root).add(path).n_registered == 3
    return store


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def repairs_of(store: CorpusStore) -> dict[tuple[str, str], dict]:
    repairs = pl.read_parquet(store.layout.repairs_file("v2"))
    assert repairs.columns == REPAIRS.names
    claims = AnswerStore(store.root).snapshot().read("claims").select("claim_id", "source_claim_id").unique()
    named = repairs.join(claims, on="claim_id", how="left")
    return {
        (r["answer_id"], r["source_claim_id"] or f"{r['claim_index']}.{r['citation_index']}"): r
        for r in named.to_dicts()
    }


def test_each_change_gets_its_repair_kind(store):
    result = run("repair", "--against", "v2", "--store", str(store.root), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    repairs = repairs_of(store)
    kinds = {key: row["repair"] for key, row in repairs.items() if key[0] == "structured"}
    assert kinds == {
        ("structured", "c1"): "repointed_successor",
        ("structured", "c2"): "repointed_successor",
        ("structured", "c3"): "repointed_successor",
        ("structured", "c4"): "repointed_normalised",
        ("structured", "c5"): "unresolved",
        ("structured", "c6"): "invalid",
    }
    assert repairs[("marker", "1.0")]["repair"] == "repointed_suggestion"  # five -> six attempts
    assert repairs[("marker", "1.0")]["needs_review"] and "needs review" in repairs[("marker", "1.0")]["reason"]
    assert repairs[("untouched", "0.0")]["repair"] == "repointed_successor"
    assert summary["repairs"]["repointed_suggestion"] == 1 and summary["n_needs_review"] == 1
    assert summary["n_answers_repaired"] == 3 and summary["applied"] is False
    assert json.loads(store.layout.repair_summary_file("v2").read_text()) == summary
    # Nothing registered without --apply.
    assert AnswerStore(store.root).all_answers()["revision"].max() == 1


def test_repaired_records_keep_their_form_and_say_what_was_done(store, tmp_path):
    out = tmp_path / "repaired.jsonl"
    assert run("repair", "--against", "v2", "--out", str(out), "--store", str(store.root)).exit_code == 0
    records = {r["answer_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert out.read_text() == store.layout.repaired_answers_file("v2").read_text()
    structured = records["structured"]
    assert structured["trace_id"] == "t-1" and structured["corpus_version"] == "v2"
    assert [c["claim_id"] for c in structured["claims"]] == ["c1", "c2", "c3", "c4", "c5", "c6"]
    timeout = structured["claims"][1]["citations"][0]
    assert timeout["quote"] == TIMEOUT  # unchanged: still verbatim in the successor
    new_chunk = store.read_chunks("v2", columns=["chunk_id", "text", "text_hash"], chunk_ids=[timeout["chunk_id"]]).row(
        0, named=True
    )
    assert TIMEOUT in new_chunk["text"] and timeout["text_hash"] == new_chunk["text_hash"]
    assert timeout["repair"]["kind"] == "repointed_successor" and timeout["repair"]["status"] == "drifted"
    assert timeout["repair"]["old"]["corpus_version"] == "v1" and timeout["repair"]["new"]["source_path"] == "drift.md"
    doc = store.read_documents("v2", columns=["source_path", "text"]).filter(pl.col("source_path") == "drift.md")[
        "text"
    ][0]
    assert doc[timeout["repair"]["new"]["start_char"] : timeout["repair"]["new"]["end_char"]] == TIMEOUT
    proxy = structured["claims"][2]["citations"][0]
    assert (
        proxy["repair"]["new"]["source_path"] == "transport.md"
        and proxy["quote"] == "Each proxy URL names its scheme and its host."
    )
    unresolved = structured["claims"][4]["citations"][0]
    assert unresolved["corpus_version"] == "v1" and unresolved["repair"]["new"] is None  # left citing v1
    assert "corpus_version" not in structured["claims"][0]["citations"][0]
    marker = records["marker"]
    assert marker["answer"] == (
        "The timeout is five seconds [1]. Clients retry five times a minute [2]. Every operation has that timeout [1]."
    )
    assert [r["ref"] for r in marker["references"]] == [1, "02", 9] and marker["model"] == "rag-7"
    assert (
        marker["references"][2]
        == json.loads(AnswerStore(store.root).answers().filter(pl.col("answer_id") == "marker")["source_record"][0])[
            "references"
        ][2]
    )  # unused: untouched
    retry = marker["references"][1]
    assert retry["quote"] == "The retry budget is six attempts per minute for every client."
    assert retry["repair"]["needs_review"] and marker["repair"]["needs_review"]
    assert marker["repair"] == {
        "against": "v2",
        "from_revision": 1,
        "needs_review": True,
        "repairs": {"repointed_successor": 2, "repointed_suggestion": 1},
    }


def test_apply_registers_revision_two_whose_repointed_citations_are_valid(store):
    assert run("repair", "--against", "v2", "--apply", "--store", str(store.root)).exit_code == 0
    answers = AnswerStore(store.root).answers()
    assert dict(answers.select("answer_id", "revision").iter_rows()) == {"marker": 2, "structured": 2, "untouched": 2}
    repairs = pl.read_parquet(store.layout.repairs_file("v2"))
    assert repairs["applied"].all() and repairs["to_revision"].to_list() == [2] * repairs.height
    stale = run("stale", "--against", "v2", "--no-reanchor", "--store", str(store.root))
    assert stale.exit_code == 0
    status = pl.read_parquet(store.layout.citation_status_file("v2"))
    citations = AnswerStore(store.root).citations().select("citation_id", "claim_id", "citation_index")
    after = status.join(citations, on="citation_id").join(
        repairs.select("claim_id", "citation_index", "repair"), on=["claim_id", "citation_index"]
    )
    by_kind = after.group_by("repair").agg(pl.col("status").unique().sort())
    assert dict(by_kind.iter_rows()) == {
        "repointed_successor": ["valid"],
        "repointed_normalised": ["valid"],
        "repointed_suggestion": ["valid"],
        "unresolved": ["removed"],
        "invalid": ["invalid"],
    }
    # Registering the original answers again (a pipeline re-adding its file) does not undo the repairs.
    readded = AnswerStore(store.root).add(store.root.parent / "answers.jsonl")
    assert sorted(readded.unchanged) == ["marker", "structured", "untouched"] and not readded.revised
    # Repairing again finds nothing more to re-point.
    again = run("repair", "--against", "v2", "--apply", "--json", "--store", str(store.root))
    assert json.loads(again.stdout)["n_answers_repaired"] == 0


def test_minimum_score_leaves_a_near_miss_unresolved(store):
    assert run("repair", "--against", "v2", "--min-score", "0.99", "--store", str(store.root)).exit_code == 0
    row = repairs_of(store)[("marker", "1.0")]
    assert row["repair"] == "unresolved" and "below --min-score 0.99" in row["reason"]
    assert row["new_chunk_id"] is None and row["new_version"] == "v1"


def test_apply_refuses_an_answer_revised_since(store, tmp_path):
    from changes.repair import repair_citations

    result = repair_citations(store, "v2")
    revised = json.loads(
        AnswerStore(store.root).answers().filter(pl.col("answer_id") == "untouched")["source_record"][0]
    )
    revised["question"] = "changed meanwhile"
    (tmp_path / "edit.jsonl").write_text(json.dumps(revised) + "\n")
    AnswerStore(store.root).add(tmp_path / "edit.jsonl")
    applied = AnswerStore(store.root).add(
        result.paths["jsonl"], expected_revisions={"marker": 1, "structured": 1, "untouched": 1}
    )
    assert [e.field for e in applied.errors] == ["answer_id"] and "at revision 2, not 1" in applied.errors[0].message
    assert sorted(a for a, _ in applied.revised) == ["marker", "structured"]


@pytest.mark.parametrize(
    "record",
    [
        {
            "answer_id": "s",
            "question": "q",
            "answer": "a",
            "corpus_version": "v1",
            "created_at": "2026-01-02T03:04:05Z",
            "claims": [
                {
                    "claim_id": "c1",
                    "text": "One.",
                    "citations": [
                        {"chunk_id": "ck_1", "quote": "x", "text_hash": "sha256:ab"},
                        {"chunk_id": "ck_2", "corpus_version": "v0"},
                    ],
                },
                {"text": "Two, uncited.", "citations": []},
            ],
        },
        {
            "answer_id": "m",
            "answer": "First [1][2]. Second 【2】. Third.",
            "corpus_version": "v1",
            "references": [{"ref": 1, "chunk_id": "ck_1", "quote": "x"}, {"ref": "D2", "chunk_id": "ck_2"}],
        },
        {
            "answer_id": "src",
            "answer": "a",
            "corpus_version": "v1",
            "created_at": "2026-01-02T03:04:05Z",
            "audience": ["eu", "staff"],
            "about_version": "v2",
            "scope": "http",
            "claims": [
                {
                    "text": "One.",
                    "citations": [
                        {"chunk_id": "ck_1", "retrieved_at": "2025-12-01T00:00:00Z"},
                        {"chunk_id": "ck_2", "retrieved_at": "2026-01-02T03:04:05Z"},
                    ],
                }
            ],
        },
    ],
)
def test_a_record_rebuilt_from_the_tables_parses_to_the_same_content(record):
    """A record rebuilt from the tables (as repair rebuilds an answer anchored by document) parses to the same
    content."""
    if "references" in record:
        record["answer"] = record["answer"].replace("[2]", "[D2]").replace("【2】", "【D2】")
    parsed = parse_answer(record)
    rows = answer_rows(parsed, 1, None, datetime.now(UTC))
    rebuilt = record_from_rows(rows["answers"][0], rows["claims"], rows["citations"])
    assert parse_answer(rebuilt).content_hash == parsed.content_hash


class Killed(BaseException):
    """What kill -9 does to `repair --apply` right after the answer store committed its revisions."""


def test_a_repair_killed_after_registering_keeps_its_record_on_the_rerun(store, monkeypatch):
    """#21: killed between the registration and its record, a rerun recorded the repaired answers as `kept`."""
    planned = {
        (r["answer_id"], r["claim_index"], r["citation_index"]): r["repair"]
        for r in repair_citations(store, "v2").repairs.iter_rows(named=True)
    }
    real_add = AnswerStore.add

    def add_then_die(self, *args, **kwargs):
        real_add(self, *args, **kwargs)
        raise Killed

    with monkeypatch.context() as patch:
        patch.setattr(AnswerStore, "add", add_then_die)
        with pytest.raises(Killed):
            repair_citations(store, "v2", apply=True)
    assert dict(AnswerStore(store.root).answers().select("answer_id", "revision").iter_rows()) == {
        "marker": 2,
        "structured": 2,
        "untouched": 2,
    }
    rerun = repair_citations(store, "v2", apply=True).repairs
    assert rerun["applied"].all() and set(rerun["to_revision"]) == {2}
    assert {
        (r["answer_id"], r["claim_index"], r["citation_index"]): r["repair"] for r in rerun.iter_rows(named=True)
    } == planned
    assert AnswerStore(store.root).answers()["revision"].to_list() == [2, 2, 2]  # nothing registered twice
