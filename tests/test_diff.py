"""Chunk- and document-level diff on small hand-built versions."""

import polars as pl

from citekeeper.identity import text_hash
from citekeeper.schema import CHUNK_DIFF, DOC_DIFF
from tests.chunk_frames import build_version, diff_frames, doc_id_of

INTRO = "Intro paragraph that stays exactly as it is."
SHIFT = "A paragraph that will be pushed down by an insertion above it."
EDIT_OLD = "The client sends requests with a default timeout of five seconds for every call."
EDIT_NEW = "The client sends requests with a default timeout of ten seconds for every call."
GONE = "This paragraph disappears entirely from the new version of the guide."
TRAVEL = "This paragraph travels from the guide to the faq document unchanged."

OLD = {
    "guide.md": f"{INTRO}\n\n{SHIFT}\n\n{EDIT_OLD}\n\n{GONE}\n\n{TRAVEL}",
    "faq.md": "Frequently asked questions live here.",
    "same.md": "A document nobody touches.",
    "old_name.md": "Content of a file that only gets renamed.",
    "dropped.md": "A document that is deleted.",
}
NEW = {
    "guide.md": f"{INTRO}\n\nInserted paragraph.\n\n{SHIFT}\n\n{EDIT_NEW}",
    "faq.md": f"Frequently asked questions live here.\n\n{TRAVEL}",
    "same.md": "A document nobody touches.",
    "new_name.md": "Content of a file that only gets renamed.",
    "fresh.md": "A brand new document.",
}


def run_diff():
    old_docs, old_chunks = build_version("v1", OLD)
    new_docs, new_chunks = build_version("v2", NEW)
    return diff_frames("v1", "v2", old_docs, new_docs, old_chunks.lazy(), new_chunks.lazy())


def row(chunks: pl.DataFrame, column: str, text_hash_of: str) -> dict:
    rows = chunks.filter(pl.col(column) == text_hash(text_hash_of)).to_dicts()
    assert len(rows) == 1, rows
    return rows[0]


def test_document_changes():
    docs = run_diff().docs
    assert docs.columns == DOC_DIFF.names
    by_change = {
        r["change"]: r for r in docs.filter(pl.col("change") != "unchanged").to_dicts() if r["change"] != "modified"
    }
    assert by_change["renamed"]["old_source_path"] == "old_name.md"
    assert by_change["renamed"]["new_source_path"] == "new_name.md"
    assert by_change["removed"]["old_source_path"] == "dropped.md"
    assert by_change["added"]["new_source_path"] == "fresh.md"
    modified = sorted(docs.filter(pl.col("change") == "modified")["old_source_path"])
    assert modified == ["faq.md", "guide.md"]
    assert docs.filter(pl.col("change") == "unchanged")["old_source_path"].to_list() == ["same.md"]


def test_chunk_changes():
    diff = run_diff()
    chunks = diff.chunks
    assert chunks.columns == CHUNK_DIFF.names
    assert row(chunks, "old_text_hash", INTRO)["change"] == "unchanged"
    shifted = row(chunks, "old_text_hash", SHIFT)
    assert shifted["change"] == "moved" and shifted["new_start_char"] > shifted["old_start_char"]
    edited = row(chunks, "old_text_hash", EDIT_OLD)
    assert edited["change"] == "modified" and 0.8 < edited["similarity"] < 1.0
    assert edited["new_text_hash"] == row(chunks, "new_text_hash", EDIT_NEW)["new_text_hash"]
    assert row(chunks, "old_text_hash", GONE)["change"] == "removed"
    travel = row(chunks, "old_text_hash", TRAVEL)
    assert travel["change"] == "relocated"
    assert (travel["old_doc_id"], travel["new_doc_id"]) == (doc_id_of("guide.md"), doc_id_of("faq.md"))
    renamed = row(chunks, "old_text_hash", "Content of a file that only gets renamed.")
    assert renamed["change"] == "relocated" and renamed["new_doc_id"] == doc_id_of("new_name.md")
    assert row(chunks, "new_text_hash", "Inserted paragraph.")["change"] == "added"
    assert row(chunks, "new_text_hash", "A brand new document.")["change"] == "added"
    assert row(chunks, "old_text_hash", "A document that is deleted.")["change"] == "removed"


def test_only_changed_documents_are_compared():
    chunks = run_diff().chunks
    untouched = doc_id_of("same.md")
    assert chunks.filter((pl.col("old_doc_id") == untouched) | (pl.col("new_doc_id") == untouched)).height == 0
    assert run_diff().chunk_counts() == {
        "added": 2,
        "modified": 1,
        "moved": 1,
        "relocated": 2,
        "removed": 2,
        "unchanged": 2,
    }


def test_dissimilar_rewrite_is_removed_plus_added():
    old_docs, old_chunks = build_version("v1", {"a.md": "Completely original sentence about cats."})
    new_docs, new_chunks = build_version("v2", {"a.md": "Zebra migration statistics, 1998 edition!"})
    diff = diff_frames("v1", "v2", old_docs, new_docs, old_chunks, new_chunks, threshold=0.6)
    assert sorted(diff.chunks["change"]) == ["added", "removed"]


def test_identical_versions_have_no_chunk_rows():
    docs, chunks = build_version("v1", OLD)
    diff = diff_frames("v1", "v1b", docs, docs, chunks, chunks)
    assert diff.chunks.height == 0
    assert set(diff.docs["change"]) == {"unchanged"}
