"""Citations registration could not anchor (no chunk: cited by a document their version lacks, or quoting text
their document does not hold) are normal rows (#30): every command that reads or writes citations takes them,
each table that holds them has them with null chunk columns, and they stay invalid with their reason. One store,
English and Chinese, both answer forms, an answer whose only citation is unanchored; each command runs through
the CLI."""

import json
from pathlib import Path

import polars as pl
import pytest

from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from parsers.records import ParseConfig
from tests.chunk_frames import write_tree
from tests.test_rag_formats import GUIDE, GUIDE_ZH, LIMITS_V1, LIMITS_V2, corpus, run

GUIDE_FIRST = GUIDE.split(". ")[0] + "."
ZH_FIRST = GUIDE_ZH.split("。")[0] + "。"
APPENDIX = "Timeouts are listed in the appendix."
NOWHERE_ZH = "这句话不在任何文档之中，也不像其中任何一句。"
NOT_ANCHORED = "not anchored at registration"

ANSWERS = [
    {
        "answer_id": "a1",
        "corpus_version": "v1",
        "answer": "Connections are reused. The timeout is five seconds. Listed. 无关。",
        "claims": [
            {"text": "Connections are reused.", "citations": [{"doc_id": "guide.md", "quote": GUIDE_FIRST}]},
            {
                "text": "The timeout is five seconds.",
                "citations": [{"source_path": "limits.md", "quote": "five seconds"}],
            },
            {"text": "Listed.", "citations": [{"doc_id": "retired.md", "quote": APPENDIX}]},  # no such document
            {"text": "无关。", "citations": [{"source_path": "limits.md", "quote": NOWHERE_ZH}]},  # not in it
        ],
    },
    {
        "answer_id": "a2",
        "corpus_version": "v1",
        "answer": "客户端保持连接。[1] 超时见附录。[2]",
        "references": [
            {"ref": 1, "doc_id": "手册.md", "quote": ZH_FIRST},
            {"ref": 2, "source_path": "附录.md", "quote": APPENDIX},
        ],
    },
    {
        "answer_id": "a3",
        "corpus_version": "v1",
        "answer": "Only this.",
        "claims": [{"text": "Only this.", "citations": [{"doc_id": "kb-gone", "quote": APPENDIX}]}],
    },
]
UNANCHORED = {("a1", APPENDIX), ("a1", NOWHERE_ZH), ("a2", APPENDIX), ("a3", APPENDIX)}


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    """v1, the answers registered against it, v2 (guide.md moved: a1's first citation is relocated; limits.md
    edited: its second goes stale)."""
    store = CorpusStore(tmp_path / "store")
    files = corpus(GUIDE, LIMITS_V1) | {"手册.md": f"# 手册\n\n{GUIDE_ZH}\n"}
    ingest(write_tree(tmp_path / "v1", files), store, version="v1", config=ParseConfig(workers=1))
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(a, ensure_ascii=False) + "\n" for a in ANSWERS), encoding="utf-8")
    added = run("answers", "add", answers, "--store", store.root)
    assert added.exit_code == 1 and "'retired.md' is not in cited version 'v1'" in added.output, added.output
    files = corpus(GUIDE, LIMITS_V2, guide_path="manual/guide.md") | {"手册.md": f"# 手册\n\n{GUIDE_ZH}\n"}
    ingest(write_tree(tmp_path / "v2", files), store, version="v2", config=ParseConfig(workers=1))
    return store.root


def unanchored_rows(frame: pl.DataFrame) -> set[tuple[str, str]]:
    return {(r["answer_id"], r["quote"]) for r in frame.filter(pl.col("chunk_id").is_null()).iter_rows(named=True)}


def stale(store_root: Path, tmp_path: Path, version: str = "v2") -> pl.DataFrame:
    out, report = tmp_path / f"status-{version}.parquet", tmp_path / f"report-{version}.html"
    result = run("stale", "--against", version, "--store", store_root, "--out", out, "--report", report)
    assert result.exit_code == 0, result.output
    assert NOT_ANCHORED in report.read_text(encoding="utf-8")
    return pl.read_parquet(out)


def test_stale_judges_them_invalid_with_their_reason_and_leaves_them_out_of_the_blast_radius(store_root, tmp_path):
    status = stale(store_root, tmp_path)
    assert unanchored_rows(status) == UNANCHORED
    bad = status.filter(pl.col("chunk_id").is_null())
    assert bad["status"].unique().to_list() == ["invalid"]
    assert all(reason.startswith(NOT_ANCHORED) for reason in bad["reason"])
    assert bad.select("doc_id", "source_path", "old_start_char", "new_chunk_id").null_count().row(0) == (4, 4, 4, 4)
    radius = pl.read_parquet(CorpusStore(store_root).layout.blast_radius_file("v2"))
    assert radius.select("source_path", "n_citations", "n_citations_total").rows() == [
        ("guide.md", 1, 1),
        ("limits.md", 1, 1),
    ]


def test_diff_and_stale_against_the_cited_version_itself(store_root, tmp_path):
    diff = run("diff", "v1", "v2", "--store", store_root, "--out", tmp_path / "diff.parquet", "--json")
    assert diff.exit_code == 0, diff.output
    changed = {(d["change"], d["new_source_path"]) for d in json.loads(diff.output)["changed_documents"]}
    assert changed == {("renamed", "manual/guide.md"), ("modified", "limits.md")}
    status = stale(store_root, tmp_path, "v1")
    assert unanchored_rows(status) == UNANCHORED
    assert sorted(status["status"]) == ["invalid"] * 4 + ["valid"] * 3


def test_repair_carries_them_unchanged_and_they_stay_invalid(store_root, tmp_path):
    stale(store_root, tmp_path)
    repaired = run("repair", "--against", "v2", "--apply", "--store", store_root, "--out", tmp_path / "repaired.jsonl")
    assert repaired.exit_code == 0, repaired.output
    repairs = pl.read_parquet(CorpusStore(store_root).layout.repairs_file("v2"))
    assert {
        (r["answer_id"], r["old_quote"]) for r in repairs.filter(pl.col("old_chunk_id").is_null()).iter_rows(named=True)
    } == UNANCHORED
    assert repairs.filter(pl.col("old_chunk_id").is_null())["repair"].unique().to_list() == ["invalid"]
    exported = tmp_path / "export.parquet"
    assert run("answers", "export", "--out", exported, "--store", store_root).exit_code == 0
    rows = pl.read_parquet(exported)
    assert unanchored_rows(rows) == UNANCHORED
    assert rows.filter(pl.col("chunk_id").is_null())["anchored_by"].unique().to_list() == ["unanchored"]
    assert dict(rows.group_by("answer_id").agg(pl.col("revision").first()).iter_rows()) == {"a1": 2, "a2": 1, "a3": 1}
    status = stale(store_root, tmp_path)
    assert unanchored_rows(status.filter(pl.col("status") == "invalid")) == UNANCHORED


def test_answers_list_show_and_history(store_root, tmp_path):
    stale(store_root, tmp_path)
    listed = run("answers", "list", "--store", store_root)
    assert listed.exit_code == 0 and all(a in listed.output for a in ("a1", "a2", "a3")), listed.output
    for answer_id, quote in sorted(UNANCHORED):
        shown = run("answers", "show", answer_id, "--store", store_root)
        assert shown.exit_code == 0 and quote in shown.output, shown.output
    assert run("repair", "--against", "v2", "--apply", "--store", store_root).exit_code == 0
    for answer_id in ("a1", "a2", "a3"):
        history = run("history", answer_id, "--json", "--store", store_root)
        assert history.exit_code == 0, history.output
        assert NOT_ANCHORED in history.output
        assert run("history", answer_id, "--store", store_root).exit_code == 0


@pytest.mark.parametrize("version,answers_file", [("v1", False), ("v2", False), ("v2", True)])
def test_verify_without_a_model(store_root, tmp_path, version, answers_file):
    out = tmp_path / "verify"
    given = ["--answers", tmp_path / "answers.jsonl"] if answers_file else []
    result = run("verify", "--version", version, *given, "--no-model", "--out", out, "--store", store_root)
    assert result.exit_code == 0, result.output
    (pairs,) = out.glob(f"corpus_version={version}/run_id=*/pairs.parquet")
    rows = pl.read_parquet(pairs)
    unanchored = rows.filter(pl.col("chunk_id").is_null())
    assert {(r["answer_id"]) for r in unanchored.iter_rows(named=True)} == {"a1", "a2", "a3"}
    assert unanchored["locatable"].unique().to_list() == [False]
    history = run("history", "a3", "--json", "--store", store_root)
    assert history.exit_code == 0, history.output


def test_the_phantom_chunk_check_does_not_count_them(tmp_path):
    """A citation registration could not anchor names no chunk, so no chunk that never existed: the Dagster check
    passes over it (it counted them as phantoms, and died when every citation was unanchored: a join on nulls)."""
    import dagster as dg

    from tests.test_assets_citations import check_metadata, materialize

    instance = dg.DagsterInstance.ephemeral()
    files = corpus(GUIDE, LIMITS_V1) | {"手册.md": f"# 手册\n\n{GUIDE_ZH}\n"}
    materialize(instance, write_tree(tmp_path / "v1", files), tmp_path / "store", "v1")
    for batch in (ANSWERS[2:], ANSWERS[:2]):  # only unanchored ones, then beside anchored ones
        answers = tmp_path / f"{batch[0]['answer_id']}.jsonl"
        answers.write_text("".join(json.dumps(a, ensure_ascii=False) + "\n" for a in batch), encoding="utf-8")
        checked = materialize(
            instance, write_tree(tmp_path / "v2", files | {"limits.md": LIMITS_V2}), tmp_path / "store", "v2", answers
        )
        metadata = check_metadata(checked)
        assert (metadata["passed"], metadata["n_phantom_citations"]) == (True, 0), metadata


def test_an_answers_file_is_anchored_as_registration_anchors_it(store_root, tmp_path):
    """`verify --answers FILE` anchors citations by document as `answers add` does: the same chunks, and the same
    citations left unanchored (it judged every one of them no_chunk)."""

    def cited(*given) -> set[tuple]:
        out = tmp_path / f"verify{len(given)}"
        result = run("verify", "--version", "v1", *given, "--no-model", "--out", out, "--store", store_root)
        assert result.exit_code == 0, result.output
        (pairs,) = out.glob("corpus_version=v1/run_id=*/pairs.parquet")
        return set(pl.read_parquet(pairs).select("answer_id", "citation_id", "chunk_id").unique().iter_rows())

    from_file, registered = cited("--answers", tmp_path / "answers.jsonl"), cited()
    assert from_file == registered
    assert sum(chunk_id is None for _, _, chunk_id in registered) == len(UNANCHORED)
