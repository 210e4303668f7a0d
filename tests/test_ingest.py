"""Ingest end to end with the real parsers and a real LanceDB store."""

from __future__ import annotations

import filecmp
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest

from citekeeper.integrity import duplicate_chunk_ids, mismatched_text_hashes, misplaced_offsets
from citekeeper.store import (
    CorpusStore,
    StoreError,
    StoreLocked,
    VersionExists,
)
from citekeeper.text import TEXT_RULES_VERSION
from parsers.ingest import Shard, StrictIngestFailed, commit, ingest, stage
from parsers.records import ParseConfig
from tests.conftest import HTTPX_DOCS, require_eval
from tests.store_helpers import crash_before_manifest, hold_lock


def markdown(topic: str, n_sections: int = 2) -> str:
    sections = [
        f"## {topic} part {s}\n\nThe {topic} part {s} explains one thing. It has two sentences.\n\n"
        f"A second paragraph about {topic} {s} follows here."
        for s in range(n_sections)
    ]
    return f"# {topic}\n\n" + "\n\n".join(sections) + "\n"


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "guide").mkdir(parents=True)
    for name in ("alpha", "beta", "gamma"):
        (root / f"{name}.md").write_text(markdown(name))
    (root / "guide" / "delta.md").write_text(markdown("delta"))
    return root


def assert_sound(store: CorpusStore, version: str) -> pl.DataFrame:
    chunks = store.read_chunks(version)
    assert chunks.height > 0
    assert duplicate_chunk_ids(chunks).height == 0
    assert mismatched_text_hashes(chunks).height == 0
    assert misplaced_offsets(chunks, store.read_documents(version)).height == 0
    return chunks


def test_unchanged_tree_creates_no_new_version(source: Path, store_dir: Path) -> None:
    store = CorpusStore(store_dir)
    first = ingest(source, store)
    assert first.created and first.manifest.name == "v0001" and first.n_parsed == 4
    again = ingest(source, store)
    assert not again.created and again.equals == "v0001" and again.n_parsed == 0
    assert [v.name for v in store.versions()] == ["v0001"]
    assert not (store.layout.staging_dir / "v0002").exists()


def test_only_changed_documents_are_reparsed(source: Path, store_dir: Path) -> None:
    store = CorpusStore(store_dir)
    ingest(source, store, version="one")
    (source / "beta.md").write_text(markdown("beta").replace("explains one thing", "explains two things"))
    (source / "gamma.md").unlink()
    (source / "epsilon.md").write_text(markdown("epsilon"))

    result = ingest(source, store, version="two")
    assert result.created and result.manifest.parent == "one"
    assert (result.n_parsed, result.n_reused, result.removed_doc_ids) == (2, 2, ["gamma.md"])
    manifest = store.manifest("two")
    assert (manifest.n_parsed, manifest.n_reused, manifest.n_removed, manifest.n_documents) == (2, 2, 1, 4)

    one, two = assert_sound(store, "one"), assert_sound(store, "two")
    # the deleted document is gone from the new version and still readable in the old one
    assert "gamma.md" in set(one["doc_id"]) and "gamma.md" not in set(two["doc_id"])
    assert "epsilon.md" in set(two["doc_id"]) and "epsilon.md" not in set(one["doc_id"])

    # reused documents were carried over, not re-parsed: same rows, same ingested_at
    def unchanged(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.filter(pl.col("doc_id").is_in(["alpha.md", "guide/delta.md"])).drop("corpus_version")

    assert unchanged(one).equals(unchanged(two))
    # an edit inside one paragraph changes only the chunks that hold it
    beta_one = set(one.filter(pl.col("doc_id") == "beta.md")["chunk_id"])
    beta_two = set(two.filter(pl.col("doc_id") == "beta.md")["chunk_id"])
    assert beta_one - beta_two and beta_one & beta_two


def test_version_names_are_immutable(source: Path, store_dir: Path) -> None:
    store = CorpusStore(store_dir)
    ingest(source, store, version="release-1")
    again = ingest(source, store, version="release-1")
    assert not again.created and again.equals == "release-1"
    (source / "alpha.md").write_text(markdown("alpha", 3))
    with pytest.raises(VersionExists, match="already exists with different content"):
        ingest(source, store, version="release-1")
    assert [v.name for v in store.versions()] == ["release-1"]


def test_an_older_version_ingested_again_is_found_unchanged(source: Path, store_dir: Path) -> None:
    store = CorpusStore(store_dir)
    ingest(source, store, version="one")
    original = (source / "beta.md").read_text()
    (source / "beta.md").write_text(markdown("beta", 3))
    ingest(source, store, version="two")
    (source / "beta.md").write_text(original)
    again = ingest(source, store, version="one")  # beta.md parsed again against "two", and equal to "one"
    assert not again.created and again.equals == "one"
    assert [v.name for v in store.versions()] == ["one", "two"]


def write_bad_files(root: Path) -> set[str]:
    (root / "empty.md").write_bytes(b"")
    (root / "binary.pdf").write_bytes(bytes(range(256)) * 8)
    (root / "corrupt.docx").write_bytes(b"PK\x03\x04 this is not a zip archive")
    (root / "logo.svg").write_text("<svg/>")  # no parser for it
    return {"empty.md", "binary.pdf", "corrupt.docx", "logo.svg"}


def test_bad_input_is_quarantined_and_the_version_commits(source: Path, store_dir: Path) -> None:
    bad = write_bad_files(source)
    store = CorpusStore(store_dir)
    result = ingest(source, store)
    assert result.created
    assert {e.source_path for e in result.errors} == bad
    assert all(e.reason for e in result.errors)
    errors = store.read_errors(result.manifest.name)
    assert set(errors["source_path"]) == bad and set(errors["corpus_version"]) == {result.manifest.name}
    assert result.manifest.n_errors == len(bad) and result.manifest.n_documents == 4
    assert_sound(store, result.manifest.name)


def test_strict_commits_nothing_when_a_file_is_quarantined(source: Path, store_dir: Path) -> None:
    write_bad_files(source)
    store = CorpusStore(store_dir)
    with pytest.raises(StrictIngestFailed, match=r"binary\.pdf"):
        ingest(source, store, strict=True)
    assert store.versions() == []


def test_killed_run_leaves_previous_version_and_rerun_completes(
    source: Path, store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = CorpusStore(store_dir)
    ingest(source, store, version="one")
    before = store.read_chunks("one")
    (source / "alpha.md").write_text(markdown("alpha", 4))
    (source / "beta.md").unlink()

    with monkeypatch.context() as patch:
        crash_before_manifest(patch)
        with pytest.raises(RuntimeError, match="killed"):
            ingest(source, store, version="two")
    assert [v.name for v in store.versions()] == ["one"]
    assert store.read_chunks("one").equals(before)

    result = ingest(source, store, version="two")
    assert result.created and result.manifest.parent == "one"
    two = assert_sound(store, "two")
    clean = CorpusStore(tmp_path / "clean")
    ingest(source, clean, version="two")
    assert two.height == clean.read_chunks("two").height
    assert sorted(two["chunk_id"]) == sorted(clean.read_chunks("two")["chunk_id"])
    assert store.read_chunks("one").equals(before)


def test_process_killed_before_manifest_leaves_previous_version(source: Path, store_dir: Path) -> None:
    store = CorpusStore(store_dir)
    ingest(source, store, version="one")
    before = store.read_chunks("one")
    (source / "gamma.md").write_text(markdown("gamma", 3))
    # a real death: no exception handlers, no finally blocks, the lock released by the OS
    code = textwrap.dedent(f"""
        import os
        from parsers.ingest import ingest
        from citekeeper.store import CorpusStore
        CorpusStore.write_manifest = lambda self, manifest: os._exit(9)
        ingest({str(source)!r}, CorpusStore({str(store_dir)!r}), version="two")
    """)
    killed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert killed.returncode == 9, killed.stderr
    assert [v.name for v in store.versions()] == ["one"]
    assert store.read_chunks("one").equals(before)

    result = ingest(source, store, version="two", lock_timeout=5)
    assert result.created and (result.n_parsed, result.n_reused) == (1, 3)
    two = assert_sound(store, "two")
    documents = store.read_documents("two")
    assert documents["doc_id"].is_unique().all() and documents.height == 4
    assert two.height == documents["n_chunks"].sum() == store.manifest("two").n_chunks
    assert store.read_chunks("one").equals(before)


def test_concurrent_ingest_is_refused_clearly(source: Path, store_dir: Path) -> None:
    store = CorpusStore(store_dir)
    holder = hold_lock(store_dir, None)
    try:
        with pytest.raises(StoreLocked, match="locked by another writer"):
            ingest(source, store, lock_timeout=0.2)
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert store.versions() == [] and not store.layout.staging_dir.exists()


def test_concurrent_ingest_waits_for_the_writer(source: Path, store_dir: Path) -> None:
    holder = hold_lock(store_dir, 1.0)
    result = ingest(source, CorpusStore(store_dir), lock_timeout=120)
    holder.wait(timeout=60)
    assert result.created and result.manifest.n_documents == 4


def test_sharded_stages_and_one_commit_equal_a_single_ingest(source: Path, tmp_path: Path) -> None:
    single, sharded = CorpusStore(tmp_path / "single"), CorpusStore(tmp_path / "sharded")
    for store in (single, sharded):
        ingest(source, store, version="base")
    (source / "beta.md").write_text(markdown("beta", 3))
    (source / "zeta.md").write_text(markdown("zeta"))
    ingest(source, single, version="next")

    staged = [stage(source, sharded, "next", shard=Shard(i, 3)) for i in range(2)]
    with pytest.raises(StoreError, match="shard-0002-of-0003"):
        commit(sharded, "next", n_shards=3)
    staged.append(stage(source, sharded, "next", shard=Shard(2, 3)))
    assert sum(s.n_parsed for s in staged) == 2 and sum(s.n_reused for s in staged) == 3
    result = commit(sharded, "next", n_shards=3)
    assert result.created and (result.n_parsed, result.n_reused) == (2, 3)

    def comparable(store: CorpusStore) -> pl.DataFrame:
        return store.read_chunks("next").drop("ingested_at")

    assert comparable(sharded).equals(comparable(single))
    assert sharded.manifest("next").corpus_hash == single.manifest("next").corpus_hash


def test_a_doc_id_claimed_in_two_shards_is_kept_once_as_in_a_single_ingest(source: Path, tmp_path: Path) -> None:
    """Shards read only their own files, so two files naming one doc_id in their front matter meet at commit."""
    first, second = (next(f"claim-{i}.md" for i in range(100) if Shard(n, 2).owns(f"claim-{i}.md")) for n in (0, 1))
    for name in (first, second):
        (source / name).write_text(f"---\ndoc_id: claimed\n---\n# {name}\n\nThe text of {name}.\n")
    single, sharded = CorpusStore(tmp_path / "single"), CorpusStore(tmp_path / "sharded")
    expected = ingest(source, single, version="v1")
    staged = [stage(source, sharded, "v1", shard=Shard(i, 2)) for i in range(2)]
    assert [len(s.errors) for s in staged] == [0, 0]  # neither shard saw the other's file
    result = commit(sharded, "v1", n_shards=2)
    assert result.errors == expected.errors and [e.error_type for e in result.errors] == ["DuplicateDocId"]
    assert (
        (result.n_parsed, result.manifest.n_documents) == (expected.n_parsed, expected.manifest.n_documents) == (5, 5)
    )
    for read in (CorpusStore.read_chunks, CorpusStore.read_documents):
        assert read(sharded, "v1").drop("ingested_at").equals(read(single, "v1").drop("ingested_at"))
    assert sharded.read_errors("v1").drop("occurred_at").equals(single.read_errors("v1").drop("occurred_at"))
    assert sharded.manifest("v1").corpus_hash == single.manifest("v1").corpus_hash


def test_stage_against_a_stale_parent_is_not_committed(source: Path, store_dir: Path) -> None:
    store = CorpusStore(store_dir)
    stage(source, store, "late")
    ingest(source, store, version="early")
    with pytest.raises(StoreError, match="stage it again"):
        commit(store, "late")


def test_two_consecutive_httpx_releases(store_dir: Path) -> None:
    require_eval(HTTPX_DOCS)
    old_dir, new_dir = HTTPX_DOCS / "0.27.0", HTTPX_DOCS / "0.28.0"
    store = CorpusStore(store_dir)
    ingest(old_dir, store, version="0.27.0")
    result = ingest(new_dir, store, version="0.28.0")

    files_old = {p.relative_to(old_dir).as_posix() for p in old_dir.rglob("*.md")}
    files_new = {p.relative_to(new_dir).as_posix() for p in new_dir.rglob("*.md")}
    same = {f for f in files_old & files_new if filecmp.cmp(old_dir / f, new_dir / f, shallow=False)}
    assert result.n_reused == len(same) and result.n_parsed == len(files_new) - len(same)
    assert sorted(result.removed_doc_ids) == sorted(files_old - files_new)

    old, new = assert_sound(store, "0.27.0"), assert_sound(store, "0.28.0")
    assert set(new["doc_id"]) == files_new

    # a chunk whose text is unchanged in the same document keeps its chunk_id (texts unique in their doc)
    def unique_texts(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.filter(pl.len().over("doc_id", "text") == 1).select("doc_id", "text", "chunk_id")

    kept = unique_texts(old).join(unique_texts(new), on=["doc_id", "text"], suffix="_new")
    assert kept.height > 100
    assert kept.filter(pl.col("chunk_id") != pl.col("chunk_id_new")).height == 0


def test_new_text_rules_reparse_once_say_why_and_keep_english_chunk_ids(source: Path, store_dir: Path) -> None:
    (source / "zh.md").write_text("# 简介\n\n" + "Vue 是一款用于构建用户界面的框架。" * 40 + "\n", encoding="utf-8")
    store = CorpusStore(store_dir)
    old_rules = ParseConfig(max_chunk_chars=300, text_rules=1)
    ingest(source, store, version="old", config=old_rules)
    result = ingest(source, store, version="new", config=ParseConfig(max_chunk_chars=300))
    assert result.created and (result.n_parsed, result.n_reused) == (5, 0)
    assert (
        result.reparse_reason
        == f"parse settings changed since old (text_rules 1 -> {TEXT_RULES_VERSION}): every document is parsed again"
    )
    assert store.manifest("new").parse_settings["text_rules"] == TEXT_RULES_VERSION
    old, new = assert_sound(store, "old"), assert_sound(store, "new")
    english = pl.col("doc_id") != "zh.md"
    assert set(old.filter(english)["chunk_id"]) == set(new.filter(english)["chunk_id"])
    again = ingest(source, store, config=ParseConfig(max_chunk_chars=300))
    assert not again.created and again.reparse_reason is None  # once only
