"""Citation status on hand-built versions: every status, its locators and reason."""
import polars as pl

from tests.chunk_frames import build_version, doc_id_of, sha
from verifiers.answers import answer_rows, parse_answer
from verifiers.citations import CHUNK_COLUMNS, judge
from verifiers.diff import diff_frames
from verifiers.tables import from_rows
from citekeeper.schema import CITATIONS

STABLE = "HTTPX is a fully featured HTTP client for Python 3."
SHIFT = "Requests are sent with the client.get method and friends."
DRIFT_OLD = "The default timeout is five seconds. Pools keep connections alive."
DRIFT_NEW = "The default timeout is five seconds. Pools keep up to ten connections alive."
STALE_OLD = "Redirects are followed by default for every request you make."
STALE_NEW = "Redirects are not followed by default for any request you make."
GONE = "The legacy dispatcher interface was removed in this release entirely."
TRAVEL = "Environment variables configure proxies for all clients."

OLD = {"guide.md": f"{STABLE}\n\n{SHIFT}\n\n{DRIFT_OLD}\n\n{STALE_OLD}\n\n{GONE}\n\n{TRAVEL}", "env.md": "Environment notes."}
NEW = {
    "guide.md": f"{STABLE}\n\nA new paragraph pushes the rest down.\n\n{SHIFT}\n\n{DRIFT_NEW}\n\n{STALE_NEW}",
    "env.md": f"Environment notes.\n\n{TRAVEL}",
}


def chunk_id_of(chunks: pl.DataFrame, text: str) -> str:
    return chunks.filter(pl.col("text_hash") == sha(text))["chunk_id"].item()


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
    rows = judged([
        {"chunk_id": old_chunk(STABLE), "text_hash": "sha256:0000"},
        {"chunk_id": old_chunk(SHIFT), "text_hash": sha(SHIFT)},
    ])
    assert rows[old_chunk(STABLE)]["status"] == "invalid" and "text_hash" in rows[old_chunk(STABLE)]["reason"]
    assert rows[old_chunk(SHIFT)]["status"] == "relocated"


def test_unknown_cited_version_is_invalid():
    _, new_chunks = build_version("v2", NEW)
    record = {"answer_id": "a", "answer": ".", "corpus_version": "v0", "claims": [{"text": "c", "citations": [{"chunk_id": "x"}]}]}
    rows = from_rows(answer_rows(parse_answer(record), 1, None, None)["citations"], CITATIONS)
    status = judge(rows, None, None, new_chunks.select(CHUNK_COLUMNS), "v2")
    assert status["status"].to_list() == ["invalid"]
    assert "'v0' is not in the store" in status["reason"][0]
