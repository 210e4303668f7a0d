"""Citations of documents outside the answer's audience (issue 31): `out_of_scope` before every other status,
never re-anchored or repaired into such a document; and every status row with its document's source fields,
retrieved_at and updated_after_retrieval. Through the CLI (answers add --audience, stale, repair --apply) and
through Dagster, asserted on the stored Parquet.

The corpus, v1 -> v2 (front matter: access_groups, lastmod):
- guide.md, open: same text, lastmod 2024-01-10 -> 2024-06-01 (updated after one citation's retrieval, not another's);
- limits.md, open: its timeout sentence goes, and it stands verbatim only in staff.md in v2;
- staff.md, staff only: unchanged text but for that timeout sentence it gains;
- policy.md: open in v1, staff only in v2 (same text); notes.md: staff only in v1, open in v2."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from click.testing import CliRunner

from assets import citations as citation_assets
from citekeeper.answers.store import AnswerStore
from citekeeper.schema import CITATION_STATUS, REPAIRS
from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from pipelines.cli import main
from tests.chunk_frames import write_tree
from tests.dagster_settings import settings

TIMEOUT = "The default timeout is five seconds for every network operation."
GUIDE = "The client keeps connections alive for reuse across requests."
DISCOUNT = "Partners get a discount of twenty percent on renewals."
POLICY = "Refunds are granted within thirty days of purchase."
NOTES = "连接池在每次调用之间复用连接。"


def page(title: str, body: str, **front) -> str:
    head = "".join(f"{key}: {value}\n" for key, value in front.items())
    return (f"---\n{head}---\n" if head else "") + f"# {title}\n\n{body}\n"


V1 = {
    "guide.md": page("Guide", GUIDE, lastmod="2024-01-10"),
    "limits.md": page("Limits", f"Limits apply per client. {TIMEOUT}"),
    "staff.md": page("Staff", DISCOUNT, access_groups="[staff]"),
    "policy.md": page("Policy", POLICY),
    "notes.md": page("笔记", NOTES, access_groups="[staff]"),
}
V2 = {
    "guide.md": page("Guide", GUIDE, lastmod="2024-06-01"),
    "limits.md": page("Limits", "Limits apply per client. Timeouts are configured on the transport now."),
    "staff.md": page("Staff", f"{DISCOUNT}\n\n## Timeouts\n\n{TIMEOUT}", access_groups="[staff]"),
    "policy.md": page("Policy", POLICY, access_groups="[staff]"),
    "notes.md": page("笔记", NOTES),
}
CREATED = "2024-02-01T00:00:00Z"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def build_store(base: Path) -> CorpusStore:
    store = CorpusStore(base / "store")
    for version, tree in (("v1", V1), ("v2", V2)):
        result = ingest(write_tree(base / version, tree), store, version=version)
        assert not result.errors, result.errors
    return store


def cite(store: CorpusStore, words: str, quote: str | None = None, **extra) -> dict:
    chunks = store.read_chunks("v1", columns=["chunk_id", "text"])
    chunk_id = chunks.filter(pl.col("text").str.contains(words, literal=True))["chunk_id"].item()
    return {"chunk_id": chunk_id, **({"quote": quote} if quote else {}), **extra}


def answer(answer_id: str, *citations: dict, **fields) -> dict:
    return {
        "answer_id": answer_id,
        "answer": "It holds.",
        "corpus_version": "v1",
        "created_at": CREATED,
        "claims": [{"text": "It holds.", "citations": list(citations)}],
        **fields,
    }


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return path


def run(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def by_answer(frame: pl.DataFrame) -> dict[str, dict]:
    return {row["answer_id"]: row for row in frame.iter_rows(named=True)}


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> tuple[CorpusStore, dict, dict]:
    """The store after `answers add` (one file --audience public, one whose records name their own), `stale` and
    `repair --apply` against v2: (store, status rows by answer, repair rows by answer), read from stored Parquet."""
    base = tmp_path_factory.mktemp("out-of-scope")
    store = build_store(base)
    public = [
        answer("pub-staff", cite(store, "twenty percent", "discount of twenty percent")),
        answer("pub-lost", cite(store, "five seconds", TIMEOUT)),
        answer("pub-drifted", cite(store, "five seconds", "Limits apply per client.")),
        answer("pub-policy", cite(store, "Refunds")),
        answer("pub-notes", cite(store, "连接池")),
        answer(
            "pub-guide-early",
            cite(store, "keeps connections", "keeps connections alive", retrieved_at="2024-03-01T00:00:00Z"),
        ),
        answer(
            "pub-guide-late",
            cite(store, "keeps connections", "keeps connections alive", retrieved_at="2024-07-01T00:00:00Z"),
        ),
    ]
    own = [
        answer("staff-staff", cite(store, "twenty percent", "discount of twenty percent"), audience=["staff"]),
        answer("staff-lost", cite(store, "five seconds", TIMEOUT), audience="staff"),
        answer("open-staff", cite(store, "twenty percent", "discount of twenty percent")),  # no audience: unchecked
        answer("both-lost", cite(store, "five seconds", TIMEOUT), audience=["staff", "public"]),
    ]
    assert (
        run(
            "answers", "add", write_jsonl(base / "public.jsonl", public), "--audience", "public", "--store", store.root
        ).exit_code
        == 0
    )
    assert run("answers", "add", write_jsonl(base / "own.jsonl", own), "--store", store.root).exit_code == 0
    # retrieved_at from a marker-form reference and from a --from envelope's document entry
    marker = {
        "answer_id": "marker",
        "answer": "It holds [1].",
        "corpus_version": "v1",
        "created_at": CREATED,
        "references": [{"ref": 1, **cite(store, "keeps connections"), "retrieved_at": "2024-05-05T00:00:00Z"}],
    }
    envelope = {
        "answer_id": "envelope",
        "corpus_version": "v1",
        "created_at": CREATED,
        "audience": "public",
        "documents": [{"source_path": "guide.md", "retrieved_at": "2024-08-08T00:00:00Z"}],
        "response": {
            "type": "message",
            "content": [
                {
                    "type": "text",
                    "text": "Connections are reused.",
                    "citations": [{"type": "char_location", "cited_text": GUIDE, "document_index": 0}],
                }
            ],
        },
    }
    assert run("answers", "add", write_jsonl(base / "marker.jsonl", [marker]), "--store", store.root).exit_code == 0
    assert (
        run(
            "answers", "add", write_jsonl(base / "env.jsonl", [envelope]), "--from", "anthropic", "--store", store.root
        ).exit_code
        == 0
    )
    stale = run("stale", "--against", "v2", "--store", store.root)
    assert stale.exit_code == 0, stale.output
    status = pl.read_parquet(store.layout.citation_status_file("v2"))
    n_updated = status["updated_after_retrieval"].sum()
    assert (
        n_updated > 0
        and f"{n_updated} citation(s) rest on a document updated after the answer retrieved it" in stale.output
    )
    assert status.columns == CITATION_STATUS.names
    repair = run("repair", "--against", "v2", "--apply", "--store", store.root)
    assert repair.exit_code == 0, repair.output
    repairs = pl.read_parquet(store.layout.repairs_file("v2"))
    assert repairs.columns == REPAIRS.names
    return store, by_answer(status), by_answer(repairs)


def test_a_citation_outside_the_audience_is_out_of_scope_and_says_whose(cli):
    _, status, repairs = cli
    row = status["pub-staff"]
    assert row["status"] == "out_of_scope"
    assert "staff.md" in row["reason"] and "[staff]" in row["reason"] and "[public]" in row["reason"]
    assert row["new_chunk_id"] is None and row["suggested_chunk_id"] is None  # nothing of it is followed
    assert repairs["pub-staff"]["repair"] == "out_of_scope" and repairs["pub-staff"]["new_chunk_id"] is None
    # within the audience, or with no audience given, the same citation is judged as ever
    assert status["staff-staff"]["status"] == status["open-staff"]["status"] == "valid"


def test_closed_at_either_version_is_out_of_scope(cli):
    _, status, _ = cli
    assert (
        status["pub-policy"]["status"] == "out_of_scope" and "(in v2)" in status["pub-policy"]["reason"]
    )  # closed since
    assert (
        status["pub-notes"]["status"] == "out_of_scope" and "(in v1)" in status["pub-notes"]["reason"]
    )  # open only now


def test_a_lost_citation_is_never_reanchored_or_repaired_into_a_closed_document(cli):
    store, status, repairs = cli
    staff_doc = "staff.md"
    # the timeout sentence is verbatim only in staff.md: the staff answer follows it there ...
    assert status["staff-lost"]["status"] == "relocated" and status["staff-lost"]["new_source_path"] == staff_doc
    assert (
        repairs["staff-lost"]["repair"] == "repointed_successor"
        and repairs["staff-lost"]["new_source_path"] == staff_doc
    )
    assert status["both-lost"]["new_source_path"] == staff_doc  # one shared group is enough
    # ... the public one does not: it stays lost and unresolved
    row = status["pub-lost"]
    assert row["status"] in ("stale", "removed") and row["reanchored"]
    assert row["suggested_source_path"] != staff_doc and row["new_source_path"] != staff_doc
    assert repairs["pub-lost"]["repair"] == "unresolved" and repairs["pub-lost"]["new_source_path"] != staff_doc
    assert AnswerStore(store.root).answers().filter(pl.col("answer_id") == "pub-lost")["revision"].item() == 1


def test_rows_carry_the_documents_source_fields_and_retrieved_at_from_each_form(cli):
    _, status, _ = cli
    early, late = status["pub-guide-early"], status["pub-guide-late"]
    assert (early["title"], early["updated_at"]) == ("Guide", utc("2024-06-01T00:00:00Z"))  # the target version's
    assert early["retrieved_at"] == utc("2024-03-01T00:00:00Z") and early["updated_after_retrieval"] is True
    assert late["retrieved_at"] == utc("2024-07-01T00:00:00Z") and late["updated_after_retrieval"] is False
    assert (
        status["marker"]["retrieved_at"] == utc("2024-05-05T00:00:00Z")
        and status["marker"]["updated_after_retrieval"] is True
    )
    assert (
        status["envelope"]["retrieved_at"] == utc("2024-08-08T00:00:00Z")
        and status["envelope"]["updated_after_retrieval"] is False
    )
    assert status["pub-policy"]["retrieved_at"] == utc(CREATED)  # none given: the answer's created_at
    assert status["pub-policy"]["updated_at"] is None and status["pub-policy"]["updated_after_retrieval"] is None


def test_repair_keeps_the_audience_answers_add_gave(cli):
    store, status, repairs = cli
    assert status["pub-drifted"]["status"] == "drifted" and repairs["pub-drifted"]["repair"] == "repointed_successor"
    current = by_answer(AnswerStore(store.root).answers())
    assert current["pub-drifted"]["revision"] == 2 and current["pub-drifted"]["audience"] == ["public"]
    assert current["staff-lost"]["revision"] == 2 and current["staff-lost"]["audience"] == ["staff"]


def test_dagster_citation_status_and_repair_assets_store_out_of_scope(tmp_path):
    store = build_store(tmp_path)
    answers = write_jsonl(
        tmp_path / "answers.jsonl",
        [
            answer("pub-staff", cite(store, "twenty percent", "discount of twenty percent"), audience=["public"]),
            answer("pub-lost", cite(store, "five seconds", TIMEOUT), audience=["public"]),
            answer(
                "staff-lost",
                cite(store, "five seconds", TIMEOUT, retrieved_at="2023-12-31T00:00:00Z"),
                audience=["staff"],
            ),
        ],
    )
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("corpus_version", ["v2"])
    config = settings(store_dir=str(store.root), answers_path=str(answers))
    result = dg.materialize(
        [citation_assets.citation_status, citation_assets.repaired_answers],
        partition_key="v2",
        instance=instance,
        resources=config.resources(),
        run_config={"ops": {"repaired_answers": {"config": {"apply": True}}}},
    )
    metadata = {
        e.asset_key.path[-1]: {k: v.value for k, v in e.materialization.metadata.items()}
        for e in result.get_asset_materialization_events()
    }
    assert (
        metadata["citation_status"]["status_out_of_scope"] == 1
        and metadata["repaired_answers"]["repair_out_of_scope"] == 1
    )
    status = by_answer(pl.read_parquet(store.layout.citation_status_file("v2")))
    assert status["pub-staff"]["status"] == "out_of_scope"
    assert (
        status["pub-lost"]["status"] in ("stale", "removed")
        and status["pub-lost"]["suggested_source_path"] != "staff.md"
    )
    assert status["staff-lost"]["status"] == "relocated" and status["staff-lost"]["new_source_path"] == "staff.md"
    assert status["staff-lost"]["retrieved_at"] == utc("2023-12-31T00:00:00Z")
    repairs = by_answer(pl.read_parquet(store.layout.repairs_file("v2")))
    assert [repairs[a]["repair"] for a in ("pub-staff", "pub-lost", "staff-lost")] == [
        "out_of_scope",
        "unresolved",
        "repointed_successor",
    ]


def test_the_answers_resources_audience_reaches_records_without_one(tmp_path):
    """AnswersResource.audience is `answers add --audience` for the asset: a record naming no audience gets it."""
    store = build_store(tmp_path)
    answers = write_jsonl(
        tmp_path / "answers.jsonl", [answer("given-none", cite(store, "twenty percent", "discount of twenty percent"))]
    )
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("corpus_version", ["v2"])
    config = settings(store_dir=str(store.root), answers_path=str(answers), audience=["public"])
    dg.materialize(
        [citation_assets.citation_status], partition_key="v2", instance=instance, resources=config.resources()
    )
    assert by_answer(AnswerStore(store.root).answers())["given-none"]["audience"] == ["public"]
    assert by_answer(pl.read_parquet(store.layout.citation_status_file("v2")))["given-none"]["status"] == "out_of_scope"


def test_the_python_api_takes_an_audience(tmp_path):
    from citekeeper.api import register_answers

    store = build_store(tmp_path)
    record = answer("api-given", cite(store, "twenty percent", "discount of twenty percent"))
    assert register_answers(store.root, [record], audience=["public"]).n_registered == 1
    assert by_answer(AnswerStore(store.root).answers())["api-given"]["audience"] == ["public"]
