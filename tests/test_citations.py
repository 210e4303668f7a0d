"""Citation status: every status on hand-built versions, then real data (two httpx-docs tags)."""

import json
import shutil

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from changes.citation_status import CHUNK_COLUMNS, check_citations, judge
from citekeeper.answers.records import answer_rows, parse_answer
from citekeeper.answers.store import AnswerStore
from citekeeper.identity import text_hash
from citekeeper.schema import CITATION_STATUS, CITATIONS
from citekeeper.tables import from_rows
from citekeeper.text import split_sentences
from tests.chunk_frames import build_version, diff_frames, doc_id_of
from tests.conftest import HTTPX_DOCS, require_eval

STABLE = "HTTPX is a fully featured HTTP client for Python 3."
SHIFT = "Requests are sent with the client.get method and friends."
DRIFT_OLD = "The default timeout is five seconds. Pools keep connections alive."
DRIFT_NEW = "The default timeout is five seconds. Pools keep up to ten connections alive."
STALE_OLD = "Redirects are followed by default for every request you make."
STALE_NEW = "Redirects are not followed by default for any request you make."
GONE = "The legacy dispatcher interface was removed in this release entirely."
TRAVEL = "Environment variables configure proxies for all clients."

OLD = {
    "guide.md": f"{STABLE}\n\n{SHIFT}\n\n{DRIFT_OLD}\n\n{STALE_OLD}\n\n{GONE}\n\n{TRAVEL}",
    "env.md": "Environment notes.",
}
NEW = {
    "guide.md": f"{STABLE}\n\nA new paragraph pushes the rest down.\n\n{SHIFT}\n\n{DRIFT_NEW}\n\n{STALE_NEW}",
    "env.md": f"Environment notes.\n\n{TRAVEL}",
}


def chunk_id_of(chunks: pl.DataFrame, text: str) -> str:
    return chunks.filter(pl.col("text_hash") == text_hash(text))["chunk_id"].item()


def judged(citations: list[dict]) -> dict[str, dict]:
    old_docs, old_chunks = build_version("v1", OLD)
    new_docs, new_chunks = build_version("v2", NEW)
    diff = diff_frames("v1", "v2", old_docs, new_docs, old_chunks, new_chunks)
    record = {
        "answer_id": "a1",
        "answer": "...",
        "corpus_version": "v1",
        "claims": [{"text": f"claim {i}", "citations": [c]} for i, c in enumerate(citations)],
    }
    rows = from_rows(answer_rows(parse_answer(record), 1, None, None)["citations"], CITATIONS)
    status = judge(rows, old_chunks.select(CHUNK_COLUMNS), diff, new_chunks.select(CHUNK_COLUMNS), "v2")
    assert status.height == len(citations)  # exactly one status per citation
    return {r["quote"] or r["chunk_id"]: r for r in status.to_dicts()}


def old_chunk(text):
    return chunk_id_of(build_version("v1", OLD)[1], text)


def test_every_status_with_locators():
    new_docs, _ = build_version("v2", NEW)
    new_text = dict(zip(new_docs["doc_id"], new_docs["text"]))
    cites = [
        {"chunk_id": old_chunk(STABLE), "quote": "fully featured HTTP client"},
        {"chunk_id": old_chunk(SHIFT), "quote": "client.get method"},
        {"chunk_id": old_chunk(TRAVEL)},
        {"chunk_id": old_chunk(DRIFT_OLD), "quote": "The default timeout is five seconds."},
        {"chunk_id": old_chunk(STALE_OLD), "quote": "Redirects are followed by default"},
        {"chunk_id": old_chunk(GONE), "quote": "legacy dispatcher"},
        {"chunk_id": "chk_never_existed"},
        {"chunk_id": old_chunk(STABLE), "quote": "a sentence that is not there"},
    ]
    rows = judged(cites)
    expect = {
        "fully featured HTTP client": "valid",
        "client.get method": "relocated",
        old_chunk(TRAVEL): "relocated",
        "The default timeout is five seconds.": "drifted",
        "Redirects are followed by default": "stale",
        "legacy dispatcher": "removed",
        "chk_never_existed": "invalid",
        "a sentence that is not there": "invalid",
    }
    for key, status in expect.items():
        assert rows[key]["status"] == status, (key, rows[key]["reason"])
    # Offsets are evidence spans in the documents' canonical text.
    for key in ("fully featured HTTP client", "client.get method", "The default timeout is five seconds."):
        row = rows[key]
        assert new_text[row["new_doc_id"]][row["new_start_char"] : row["new_end_char"]] == key
        assert OLD["guide.md"][row["old_start_char"] : row["old_end_char"]] == key
    travel = rows[old_chunk(TRAVEL)]
    assert travel["new_doc_id"] == doc_id_of("env.md") and travel["reason"] == "same text now in env.md"
    assert new_text[travel["new_doc_id"]][travel["new_start_char"] : travel["new_end_char"]] == TRAVEL
    stale = rows["Redirects are followed by default"]
    assert stale["new_text"] == STALE_NEW and 0.5 < stale["similarity"] < 1.0 and "no longer" in stale["reason"]
    assert rows["legacy dispatcher"]["new_chunk_id"] is None
    assert "does not exist in cited version v1" in rows["chk_never_existed"]["reason"]
    assert "quote is not in chunk" in rows["a sentence that is not there"]["reason"]


def test_text_hash_checks():
    rows = judged(
        [
            {"chunk_id": old_chunk(STABLE), "text_hash": "sha256:0000"},
            {"chunk_id": old_chunk(SHIFT), "text_hash": text_hash(SHIFT)},
        ]
    )
    assert rows[old_chunk(STABLE)]["status"] == "invalid" and "text_hash" in rows[old_chunk(STABLE)]["reason"]
    assert rows[old_chunk(SHIFT)]["status"] == "relocated"


def test_unknown_cited_version_is_invalid():
    _, new_chunks = build_version("v2", NEW)
    record = {
        "answer_id": "a",
        "answer": ".",
        "corpus_version": "v0",
        "claims": [{"text": "c", "citations": [{"chunk_id": "x"}]}],
    }
    rows = from_rows(answer_rows(parse_answer(record), 1, None, None)["citations"], CITATIONS)
    status = judge(rows, None, None, new_chunks.select(CHUNK_COLUMNS), "v2")
    assert status["status"].to_list() == ["invalid"]
    assert "'v0' is not in the store" in status["reason"][0]


# ---------------------------------------------------------------- real data: two httpx-docs tags

OLD_TAG, NEW_TAG = "0.23.0", "0.28.1"


@pytest.fixture(scope="module")
def httpx_check(tmp_path_factory):
    """Ingest two httpx-docs tags; cite one sentence of every old chunk; judge against the new tag."""
    from citekeeper.store import CorpusStore
    from parsers.ingest import ingest

    require_eval(HTTPX_DOCS)
    store = CorpusStore(tmp_path_factory.mktemp("httpx") / "store")
    for tag in (OLD_TAG, NEW_TAG):
        ingest(HTTPX_DOCS / tag, store, version=tag)
    records = []
    for chunk in store.read_chunks(OLD_TAG).iter_rows(named=True):
        sentences = [s for s in split_sentences(chunk["text"]) if len(s) >= 40 and "\n" not in s]
        if sentences:
            records.append(
                {
                    "answer_id": f"ans-{chunk['chunk_id']}",
                    "answer": sentences[0],
                    "corpus_version": OLD_TAG,
                    "claims": [
                        {"text": sentences[0], "citations": [{"chunk_id": chunk["chunk_id"], "quote": sentences[0]}]}
                    ],
                }
            )
    path = store.root.parent / "answers.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records))
    assert AnswerStore(store.root).add(path).n_registered == len(records)
    return store, check_citations(store, NEW_TAG)


def test_real_httpx_statuses_match_the_text(httpx_check):
    store, check = httpx_check
    new_docs = store.read_documents(NEW_TAG, columns=["doc_id", "source_path", "text"])
    text_by_id = dict(zip(new_docs["doc_id"], new_docs["text"]))
    text_by_path = dict(zip(new_docs["source_path"], new_docs["text"]))
    seen = set()
    for row in check.read_status().to_dicts():
        quote = row["quote"]
        in_same_doc = quote in text_by_path.get(row["source_path"], "")
        anywhere = any(quote in text for text in text_by_id.values())
        seen.add((row["status"], in_same_doc, anywhere))
        assert row["status"] != "invalid", row["reason"]
        if row["status"] in ("valid", "relocated", "drifted"):
            # The new locator points at the sentence itself.
            assert text_by_id[row["new_doc_id"]][row["new_start_char"] : row["new_end_char"]] == quote
            if row["status"] != "relocated":
                assert row["new_source_path"] == row["source_path"]
            if row["status"] == "valid":
                assert (row["new_start_char"], row["new_end_char"]) == (row["old_start_char"], row["old_end_char"])
        elif anywhere:
            # Every moved sentence is re-anchored exactly, in its own document when it is still there.
            assert row["suggested_method"] == "exact", row
            suggested = text_by_path[row["suggested_source_path"]]
            assert suggested[row["suggested_start_char"] : row["suggested_end_char"]] == quote
            if in_same_doc:
                assert suggested == text_by_path[row["source_path"]]
        else:
            assert row["status"] in ("stale", "removed")
            assert row["suggested_method"] != "exact"
    statuses = {s for s, _, _ in seen}
    # The pair of tags exercises holding, moved and lost citations alike.
    assert {"valid", "relocated", "removed"} <= statuses
    assert any(not anywhere for _, _, anywhere in seen)
    assert any(s in ("stale", "removed") and anywhere for s, _, anywhere in seen)


def test_real_httpx_outputs_are_stored(httpx_check):
    store, check = httpx_check
    stored = pl.read_parquet(store.root / "citations" / f"target_version={NEW_TAG}" / "citation_status.parquet")
    assert stored.columns == CITATION_STATUS.names
    assert stored.height == AnswerStore(store.root).citations().height
    assert stored["citation_id"].n_unique() == stored.height
    radius = pl.read_parquet(check.blast_radius_path)
    assert radius["rank"].to_list() == list(range(1, radius.height + 1))
    assert radius["n_citations"].to_list() == sorted(radius["n_citations"].to_list(), reverse=True)
    top = radius.row(0, named=True)
    lost_on_top = stored.filter((pl.col("doc_id") == top["doc_id"]) & (pl.col("status") != "valid")).height
    assert top["n_citations"] == lost_on_top > 0


def test_real_httpx_store_diff_reads_only_changed_documents(httpx_check, monkeypatch):
    """diff_versions reads chunks through the doc_id index for changed documents only, and finds what a
    diff of the two whole versions finds."""
    from changes.diff import diff_versions
    from citekeeper.store import CorpusStore

    store, _ = httpx_check
    whole = diff_frames(
        OLD_TAG,
        NEW_TAG,
        store.read_documents(OLD_TAG),
        store.read_documents(NEW_TAG),
        store.read_chunks(OLD_TAG),
        store.read_chunks(NEW_TAG),
    )
    requested = []
    read_chunks = CorpusStore.read_chunks

    def recording_read(self, version, columns=None, doc_ids=None):
        requested.append((version, doc_ids))
        return read_chunks(self, version, columns, doc_ids)

    monkeypatch.setattr(CorpusStore, "read_chunks", recording_read)
    shutil.rmtree(store.layout.diff_dir(OLD_TAG, NEW_TAG))  # the citation check cached this diff
    diff = diff_versions(store, OLD_TAG, NEW_TAG)
    changed = diff.changed_docs()
    assert 0 < changed.height < diff.docs.height
    assert requested and all(doc_ids is not None for _, doc_ids in requested)
    for version, side in ((OLD_TAG, "old_doc_id"), (NEW_TAG, "new_doc_id")):
        asked = [set(doc_ids) for v, doc_ids in requested if v == version]
        assert asked[0] == set(changed[side].drop_nulls()) and all(a <= asked[0] for a in asked)
    order = ["change", "old_chunk_id", "new_chunk_id"]
    assert diff.chunks.sort(order, nulls_last=True).equals(whole.chunks.sort(order, nulls_last=True))
    assert diff.chunk_counts() == whole.chunk_counts() and {
        "unchanged",
        "moved",
        "modified",
        "added",
        "removed",
    } <= set(diff.chunk_counts())


def test_quote_differing_only_in_forms_is_found_normalised_not_invalid():
    docs = {
        "zh.md": (
            "Vue（发音为 /vjuː/，类似 view）是一款用于构建用户界面的 JavaScript 框架。\n"
            "它基于标准 HTML、CSS 和 JavaScript 构建。"
        )
    }
    old_docs, old_chunks = build_version("v1", docs)
    diff = diff_frames("v1", "v1b", old_docs, old_docs, old_chunks, old_chunks)
    chunk_id = old_chunks["chunk_id"][0]
    quotes = [
        "Vue(发音为 /vjuː/,类似 view)是一款用于构建用户界面的JavaScript 框架",
        "它基于标准 HTML、CSS 和 JavaScript 构建。",
        "它基于 Rust 构建",
    ]
    record = {
        "answer_id": "a",
        "answer": ".",
        "corpus_version": "v1",
        "claims": [{"text": f"c{i}", "citations": [{"chunk_id": chunk_id, "quote": q}]} for i, q in enumerate(quotes)],
    }
    rows = from_rows(answer_rows(parse_answer(record), 1, None, None)["citations"], CITATIONS)
    status = {
        r["quote"]: r
        for r in judge(rows, old_chunks.select(CHUNK_COLUMNS), diff, old_chunks.select(CHUNK_COLUMNS), "v1b").to_dicts()
    }
    normalised, exact, absent = (status[q] for q in quotes)
    assert (normalised["status"], normalised["quote_match"], normalised["new_match"]) == (
        "valid",
        "normalized",
        "normalized",
    )
    text = old_docs["text"][0]
    assert text[normalised["old_start_char"] : normalised["old_end_char"]].startswith("Vue（发音为")
    assert (exact["status"], exact["quote_match"]) == ("valid", "exact")
    assert text[exact["new_start_char"] : exact["new_end_char"]] == quotes[1]  # code points, not UTF-8 bytes
    assert (absent["status"], absent["quote_match"]) == ("invalid", None)


def test_batched_check_equals_one_batch(httpx_check):
    """Judged a few citations at a time (the bounded-memory path of a million citations), every status row, the
    outline and the blast radius are those of the single batch (embedding scores up to float rounding: the
    model embeds other batches)."""
    store, whole = httpx_check
    order = ["answer_id", "claim_id", "citation_id"]
    rows = whole.read_status().sort(order)
    radius = whole.blast_radius
    batched = check_citations(store, NEW_TAG, citations_per_batch=7)
    assert rows.height > 7 * 10  # many batches
    assert_frame_equal(batched.read_status().sort(order), rows)  # rel_tol 1e-5
    assert batched.outline.sort(order).equals(rows.select(batched.outline.columns))
    assert batched.blast_radius.equals(radius)
    assert batched.counts() == whole.counts()
