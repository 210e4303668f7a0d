"""The corpus store on its own: versions, time travel, crash safety, locking, storage growth, Parquet."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import lancedb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from citekeeper import schema
from citekeeper.identity import text_hash
from citekeeper.integrity import duplicate_chunk_ids, mismatched_text_hashes, misplaced_offsets
from citekeeper.store import (
    STORED_SCHEMAS,
    CorpusStore,
    StoreError,
    StoreLocked,
    UnknownVersion,
    VersionExists,
    VersionManifest,
    corpus_hash,
)
from tests.store_helpers import Crash, crash_before_manifest, hold_lock

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def document(doc_id: str, paragraphs: list[str]) -> tuple[dict, list[dict]]:
    """One document row and its chunk rows (one chunk per paragraph), in the stored schemas."""
    text = "\n\n".join(paragraphs)
    chunks, start = [], 0
    for ordinal, paragraph in enumerate(paragraphs):
        chunks.append(
            {
                "chunk_id": f"{doc_id}#{text_hash(paragraph)[7:23]}",
                "doc_id": doc_id,
                "doc_content_hash": text_hash(text),
                "ordinal": ordinal,
                "text": paragraph,
                "text_hash": text_hash(paragraph),
                "start_char": start,
                "end_char": start + len(paragraph),
                "section_path": ["Intro"],
                "element_types": ["NarrativeText"],
                "source_path": f"{doc_id}.md",
                "title": doc_id,
                "filetype": "md",
                "access_scope": "user_visible",
                "ingested_at": NOW,
            }
        )
        start += len(paragraph) + 2
    doc = {
        "doc_id": doc_id,
        "doc_content_hash": text_hash(text),
        "source_path": f"{doc_id}.md",
        "title": doc_id,
        "filetype": "md",
        "access_scope": "user_visible",
        "size_bytes": len(text.encode()),
        "n_chunks": len(chunks),
        "text": text,
        "ingested_at": NOW,
    }
    return doc, chunks


def commit(store: CorpusStore, name: str, docs: dict[str, list[str]], replaced=(), parent=None, errors=()):
    rows = [document(doc_id, paragraphs) for doc_id, paragraphs in docs.items()]
    manifest = VersionManifest(
        name=name,
        parent=parent,
        created_at="",
        n_documents=0,
        n_chunks=0,
        n_errors=0,
        corpus_hash=corpus_hash((doc_id, name) for doc_id in docs),
    )
    with store.lock():
        return store.commit_version(
            manifest,
            replaced_doc_ids=replaced,
            chunks=pa.Table.from_pylist([c for _, chunks in rows for c in chunks], schema=STORED_SCHEMAS["chunks"]),
            documents=pa.Table.from_pylist([d for d, _ in rows], schema=STORED_SCHEMAS["documents"]),
            errors=pa.Table.from_pylist(
                [{**e, "corpus_version": name, "occurred_at": NOW} for e in errors], schema=schema.INGEST_ERRORS
            ),
        )


def paragraphs(doc: str, n: int = 3) -> list[str]:
    return [f"Paragraph {i} of {doc}. It says something worth citing about {doc}." for i in range(n)]


@pytest.fixture
def two_versions(store_dir: Path) -> CorpusStore:
    """v1: a, b.  v2: a unchanged, b changed, c new.  v3: b deleted."""
    store = CorpusStore(store_dir)
    commit(store, "v1", {"a": paragraphs("a"), "b": paragraphs("b")})
    commit(
        store,
        "v2",
        {"b": [*paragraphs("b")[:2], "A new last paragraph of b."], "c": paragraphs("c")},
        replaced=["b"],
        parent="v1",
    )
    commit(store, "v3", {}, replaced=["b"], parent="v2")
    return store


def test_each_version_reads_back_by_name(two_versions: CorpusStore) -> None:
    store = two_versions
    assert [v.name for v in store.versions()] == ["v1", "v2", "v3"]
    assert store.latest().name == "v3"
    v1 = store.read_chunks("v1")
    assert v1.columns == schema.CHUNKS.names
    assert sorted(v1["doc_id"].unique()) == ["a", "b"]
    assert set(v1["corpus_version"]) == {"v1"}
    assert "Paragraph 2 of b. It says something worth citing about b." in v1["text"].to_list()
    v2 = store.read_chunks("v2")
    assert set(v2["corpus_version"]) == {"v2"}
    assert sorted(v2["doc_id"].unique()) == ["a", "b", "c"]
    assert "A new last paragraph of b." in v2["text"].to_list()
    assert "Paragraph 2 of b. It says something worth citing about b." not in v2["text"].to_list()
    # the deleted document is gone from v3 and still readable in v1 and v2
    assert sorted(store.read_documents("v3")["doc_id"]) == ["a", "c"]
    assert store.read_documents("v1").filter(pl.col("doc_id") == "b")["n_chunks"].item() == 3
    assert [m.n_documents for m in store.versions()] == [2, 3, 2]
    assert [m.n_chunks for m in store.versions()] == [6, 9, 6]


def test_carried_over_rows_are_not_rewritten(two_versions: CorpusStore) -> None:
    a_v1 = two_versions.read_chunks("v1").filter(pl.col("doc_id") == "a").drop("corpus_version")
    a_v3 = two_versions.read_chunks("v3").filter(pl.col("doc_id") == "a").drop("corpus_version")
    assert a_v1.equals(a_v3)


def test_columns_selection_and_unknown_columns(two_versions: CorpusStore) -> None:
    frame = two_versions.read_chunks("v2", columns=["text_hash", "corpus_version"])
    assert frame.columns == ["text_hash", "corpus_version"] and frame.height == 9
    with pytest.raises(StoreError, match="unknown chunks columns"):
        two_versions.read_chunks("v2", columns=["nope"])


def test_unknown_version_names_the_known_ones(two_versions: CorpusStore) -> None:
    with pytest.raises(UnknownVersion, match=r"unknown corpus version 'v9'.*known: v1, v2, v3"):
        two_versions.read_chunks("v9")
    with pytest.raises(UnknownVersion):
        two_versions.manifest("../versions/v1")


def test_versions_are_immutable_and_names_validated(two_versions: CorpusStore) -> None:
    with pytest.raises(VersionExists):
        commit(two_versions, "v2", {"z": paragraphs("z")}, parent="v3")
    with pytest.raises(StoreError, match="invalid corpus version name"):
        commit(two_versions, "bad/name", {}, parent="v3")


def test_generated_names_count_up(two_versions: CorpusStore, tmp_path: Path) -> None:
    assert CorpusStore(tmp_path / "empty").next_version_name() == "v0001"
    assert CorpusStore(tmp_path / "empty").versions() == []
    commit(two_versions, "v0007", {}, parent="v3")
    assert two_versions.next_version_name() == "v0008"


@pytest.mark.parametrize("first_version", [True, False])
def test_crash_before_manifest_leaves_previous_version_and_rerun_has_no_duplicates(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch, first_version: bool
) -> None:
    store = CorpusStore(store_dir)
    parent = None if first_version else "v1"
    if not first_version:
        commit(store, "v1", {"a": paragraphs("a"), "b": paragraphs("b")})
    before = None if first_version else store.read_chunks("v1")
    new_docs = {"b": paragraphs("b", 5), "c": paragraphs("c")}

    with monkeypatch.context() as patch:
        crash_before_manifest(patch)
        with pytest.raises(Crash):
            commit(store, "v2", new_docs, replaced=["b"], parent=parent)
    assert [v.name for v in store.versions()] == ([] if first_version else ["v1"])
    if before is not None:
        assert store.read_chunks("v1").equals(before)
    with pytest.raises(UnknownVersion):
        store.read_chunks("v2")

    commit(store, "v2", new_docs, replaced=["b"], parent=parent)
    v2 = store.read_chunks("v2")
    assert duplicate_chunk_ids(v2).height == 0
    assert v2.height == (5 + 3 if first_version else 3 + 5 + 3)
    if before is not None:
        assert store.read_chunks("v1").equals(before)


def test_storage_grows_with_the_change_not_the_corpus(tmp_path: Path) -> None:
    """Changing one document of a corpus four times larger grows the LanceDB storage by about as much."""

    def growth(n_docs: int) -> tuple[int, int]:
        root = tmp_path / f"store-{n_docs}"
        lance_bytes = lambda: sum(p.stat().st_size for p in (root / "lance").rglob("*") if p.is_file())  # noqa: E731
        store = CorpusStore(root)
        commit(store, "v1", {f"doc{i:03d}": paragraphs(f"doc{i:03d}", 40) for i in range(n_docs)})
        full_copy = lance_bytes()
        commit(store, "v2", {"doc007": paragraphs("doc007", 41)}, replaced=["doc007"], parent="v1")
        assert store.read_chunks("v2").height == n_docs * 40 + 1
        return lance_bytes() - full_copy, full_copy

    small, small_copy = growth(40)
    large, large_copy = growth(160)
    assert large_copy > 3 * small_copy
    assert 0 < small < 0.25 * small_copy and 0 < large < 0.06 * large_copy, (small, small_copy, large, large_copy)
    assert large < 1.2 * small, (small, large)


def test_reading_some_documents_uses_the_doc_id_index(two_versions: CorpusStore) -> None:
    store = two_versions
    for version in ("v1", "v2", "v3"):
        every = store.read_chunks(version)
        some = store.read_chunks(version, doc_ids=["b", "c", "missing"])
        assert some.equals(every.filter(pl.col("doc_id").is_in(["b", "c"])))
        assert store.read_documents(version, doc_ids=["a"]).equals(
            store.read_documents(version).filter(pl.col("doc_id") == "a")
        )
    assert store.read_chunks("v1", doc_ids=[]).columns == schema.CHUNKS.names
    assert store.read_chunks("v1", doc_ids=[]).height == 0
    indices = lancedb.connect(store.lance_uri).open_table("chunks").list_indices()
    assert [(i.name, i.columns, i.num_unindexed_rows) for i in indices] == [("doc_id_idx", ["doc_id"], 0)]
    dataset = lancedb.connect(store.lance_uri).open_table("chunks").to_lance()
    scan = dataset.scanner(columns=["doc_id"], filter=pc.field("doc_id").isin(["b"]))
    assert "ScalarIndexQuery" in scan.explain_plan()


def test_doc_ids_with_quotes_backslashes_and_chinese_are_read_and_deleted_exactly(store_dir: Path) -> None:
    odd = ["it's", 'say "hi"', "back\\slash", "手册/简介", "x' OR '1'='1", "50%_off"]
    plain = ["a", "it", "手册", "x"]  # prefixes and pieces of the odd ids, which must be left alone
    store = CorpusStore(store_dir)
    commit(store, "v1", {doc_id: paragraphs(doc_id, 2) for doc_id in odd + plain})
    assert sorted(store.read_documents("v1", doc_ids=odd)["doc_id"]) == sorted(odd)
    assert sorted(store.read_chunks("v1", doc_ids=odd[:2], columns=["doc_id"])["doc_id"]) == sorted(odd[:2] * 2)
    commit(store, "v2", {}, replaced=odd, parent="v1")
    assert sorted(store.read_documents("v2")["doc_id"]) == sorted(plain)
    assert store.read_chunks("v2", doc_ids=odd).height == 0
    assert sorted(store.read_documents("v1")["doc_id"]) == sorted(odd + plain)  # v1 still holds them


def test_parquet_exports_use_the_schemas(two_versions: CorpusStore, store_dir: Path) -> None:
    commit(
        two_versions,
        "v4",
        {"d": paragraphs("d")},
        parent="v3",
        errors=[{"source_path": "x.pdf", "stage": "parse", "error_type": "DocumentError", "reason": "binary"}],
    )
    errors_file = store_dir / "parquet" / "errors" / "corpus_version=v4" / "errors.parquet"
    assert pq.read_schema(errors_file).remove_metadata().equals(schema.INGEST_ERRORS)
    for table, expected in (("chunks", schema.CHUNKS), ("documents", schema.DOCUMENTS)):
        parts = sorted((store_dir / "parquet" / table / "corpus_version=v4").iterdir())
        assert [p.name for p in parts] == ["part-00000.parquet"], table  # nothing but Parquet parts in the folder
        # corpus_version is the folder's, as Hive partitioning reads it: the parts hold the other columns
        without_version = expected.remove(expected.get_field_index("corpus_version"))
        assert pq.read_schema(parts[0]).remove_metadata().equals(without_version), table
    # a reader of the table's folder gets the version's rows, corpus_version included, in doc_id order
    exported = pl.read_parquet(store_dir / "parquet" / "chunks", hive_partitioning=True)
    assert exported.select(schema.CHUNKS.names).equals(two_versions.read_chunks("v4"))
    assert pl.read_parquet(two_versions.parquet_path("chunks", "v4")).height == exported.height
    # an older version's chunks and documents are exported no more; read_export reads them from LanceDB
    assert not two_versions.has_export("chunks", "v2") and two_versions.has_export("errors", "v2")
    assert two_versions.read_export("chunks", "v2").equals(two_versions.read_chunks("v2"))
    errors = two_versions.read_errors("v4")
    assert errors.select("corpus_version", "source_path", "reason").rows() == [("v4", "x.pdf", "binary")]
    assert two_versions.read_errors("v1").height == 0


def test_second_writer_is_refused_with_a_clear_message(store_dir: Path) -> None:
    store = CorpusStore(store_dir)
    holder = hold_lock(store_dir, None)
    try:
        with pytest.raises(StoreLocked, match="locked by another writer"), store.lock(timeout=0.2):
            pass
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    with store.lock(timeout=5):  # released when the holder exits
        commit(store, "v1", {"a": paragraphs("a")})
    assert store.latest().name == "v1"


def test_integrity_checks_find_broken_rows(two_versions: CorpusStore) -> None:
    chunks = two_versions.read_chunks("v2")
    documents = two_versions.read_documents("v2")
    assert duplicate_chunk_ids(chunks).height == 0
    assert mismatched_text_hashes(chunks).height == 0
    assert misplaced_offsets(chunks, documents).height == 0

    broken = pl.concat([chunks, chunks.head(1)]).with_columns(
        text_hash=pl.when(pl.col("ordinal") == 1).then(pl.lit("sha256:0")).otherwise(pl.col("text_hash")),
        start_char=pl.when(pl.col("ordinal") == 2).then(pl.col("start_char") + 1).otherwise(pl.col("start_char")),
    )
    assert duplicate_chunk_ids(broken)["chunk_id"].to_list() == [chunks["chunk_id"][0]]
    assert mismatched_text_hashes(broken).height == 3  # ordinal 1 of a, b, c
    assert misplaced_offsets(broken, documents).height == 3
    assert misplaced_offsets(chunks, documents.filter(pl.col("doc_id") != "a")).height == 3


def test_a_null_id_names_no_row(two_versions: CorpusStore) -> None:
    """Citations without a chunk pass their null chunk_id along: it reads nothing, beside the ids that read rows."""
    some = two_versions.read_chunks("v1", columns=["chunk_id"])["chunk_id"][0]
    assert two_versions.read_chunks("v1", columns=["chunk_id"], chunk_ids=[None]).is_empty()
    assert two_versions.read_chunks("v1", columns=["chunk_id"], chunk_ids=[None, some])["chunk_id"].to_list() == [some]
