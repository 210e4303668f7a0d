"""The chunk and document exports in parts by doc_id range (citekeeper/exports.py): after any sequence of edits
the export holds exactly the edited corpus, a commit rewrites only the parts that hold a changed document (the
others are hard links to the parent's files), a kill while the parts are written leaves the parent's export
whole, and an export from before the parts reads and is replaced."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from citekeeper.store import CorpusStore
from tests.test_store import commit

DOCS_PER_PART = 3
# doc_ids in several scripts and lengths: the parts are ranges in code point order
NAMES = [f"doc-{i:02d}" for i in range(30)] + ["文档-甲", "文档-乙", "文档/丙", "Zeta", "ä-umlaut", "a b c"]


def paragraphs_of(doc_id: str, revision: int, rng: random.Random) -> list[str]:
    return [f"{doc_id} revision {revision}, paragraph {i}: 这一段可以被引用。" for i in range(rng.randint(1, 4))]


def part_doc_ids(store: CorpusStore, version: str) -> dict[str, set[str]]:
    """part file name -> the doc_ids its document part holds (read from the file)."""
    folder = store.export_folder("documents", version).location
    assert isinstance(folder, Path)
    return {p.name: set(pq.read_table(p, columns=["doc_id"])["doc_id"].to_pylist()) for p in folder.glob("*.parquet")}


def inodes(store: CorpusStore, table: str, version: str) -> dict[str, int]:
    folder = store.export_folder(table, version).location
    assert isinstance(folder, Path)
    return {p.name: p.stat().st_ino for p in folder.iterdir()}


def edit(corpus: dict[str, list[str]], revision: int, rng: random.Random) -> set[str]:
    """Add, change and delete a few documents of `corpus` in place; returns the doc_ids touched."""
    absent = [name for name in NAMES if name not in corpus]
    touched = set(rng.sample(absent, min(len(absent), rng.randint(0, 3))))
    present = sorted(corpus)
    touched |= set(rng.sample(present, min(len(present), rng.randint(0, 4))))
    for doc_id in touched:
        if doc_id in corpus and rng.random() < 0.35:
            del corpus[doc_id]
        else:
            corpus[doc_id] = paragraphs_of(doc_id, revision, rng)
    return touched


@pytest.mark.parametrize("seed", range(4))
def test_each_commit_exports_the_edited_corpus_and_rewrites_only_the_parts_it_touched(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    store = CorpusStore(tmp_path / "store", docs_per_part=DOCS_PER_PART)
    corpus = {name: paragraphs_of(name, 0, rng) for name in rng.sample(NAMES, 20)}
    commit(store, "v0", corpus)
    n_linked = 0
    for revision in range(1, 7):
        before = dict(corpus)
        touched = edit(corpus, revision, rng)
        parent, name = f"v{revision - 1}", f"v{revision}"
        changed = {d: corpus[d] for d in touched if d in corpus}
        parent_parts, parent_inodes = part_doc_ids(store, parent), inodes(store, "chunks", parent)
        commit(store, name, changed, replaced=[d for d in touched if d in before], parent=parent)

        # the oracle is the edit: every document as written, its paragraphs as its chunks, nothing else
        documents = store.read_export("documents", name)
        assert dict(zip(documents["doc_id"], documents["text"], strict=True)) == {
            d: "\n\n".join(p) for d, p in corpus.items()
        }
        chunks = store.read_export("chunks", name)
        assert {d: list(g.sort("ordinal")["text"]) for (d,), g in chunks.group_by("doc_id")} == corpus
        assert chunks.equals(store.read_chunks(name)) and documents.equals(store.read_documents(name))
        assert not store.has_export("chunks", parent)  # the latest version's export only

        new_parts = part_doc_ids(store, name)
        if set(new_parts) != set(parent_parts):
            continue  # laid out afresh (a part outgrew its range): every file is new
        new_inodes = inodes(store, "chunks", name)
        for part, doc_ids in new_parts.items():
            untouched = not (doc_ids | parent_parts[part]) & touched
            assert (new_inodes[part] == parent_inodes[part]) == untouched, (revision, part, doc_ids, touched)
            n_linked += untouched
    assert n_linked  # some commit kept parts as they were


def test_a_commit_killed_while_it_writes_the_parts_leaves_the_parent_whole_and_a_rerun_completes(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    store = CorpusStore(root, docs_per_part=2)
    commit(store, "v1", {f"d{i:02d}": [f"Paragraph of d{i:02d}."] for i in range(12)})
    before = {table: store.read_export(table, "v1") for table in ("chunks", "documents")}
    v1_inodes = inodes(store, "chunks", "v1")
    # a real death in the middle of the export, after some parts are linked and one is rewritten
    code = textwrap.dedent(f"""
        import os
        from citekeeper import exports
        from citekeeper.store import CorpusStore
        from tests.test_store import commit
        links = 0
        real_link = os.link
        def dying_link(source, target):
            global links
            links += 1
            if links == 3:
                os._exit(9)
            real_link(source, target)
        exports.os.link = dying_link
        store = CorpusStore({str(root)!r}, docs_per_part=2)
        commit(store, "v2", {{"d05": ["Paragraph of d05, changed."]}}, replaced=["d05"], parent="v1")
    """)
    killed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=os.getcwd())
    assert killed.returncode == 9, killed.stderr
    assert [v.name for v in store.versions()] == ["v1"]
    assert store.export_folder("chunks", "v2").location.exists()  # the dead run's parts are there ...
    for table, rows in before.items():  # ... and the parent's export is as it was, file for file
        assert store.read_export(table, "v1").equals(rows)
    assert inodes(store, "chunks", "v1") == v1_inodes

    commit(store, "v2", {"d05": ["Paragraph of d05, changed."]}, replaced=["d05"], parent="v1")
    chunks = store.read_export("chunks", "v2")
    assert chunks.filter(pl.col("doc_id") == "d05")["text"].to_list() == ["Paragraph of d05, changed."]
    assert chunks.height == 12 and chunks.equals(store.read_chunks("v2"))
    assert store.exported_versions("chunks") == {"v2"}


def test_an_export_from_before_the_parts_reads_and_the_next_commit_lays_it_out(tmp_path: Path) -> None:
    store = CorpusStore(tmp_path / "store", docs_per_part=2)
    commit(store, "v1", {f"d{i}": [f"Paragraph of d{i}."] for i in range(5)})
    for table in ("chunks", "documents"):  # the one file, corpus_version inside, that a store had before
        folder = store.export_folder(table, "v1")
        rows = store.read_export(table, "v1")
        folder.remove()
        assert isinstance(folder.location, Path)
        folder.location.mkdir(parents=True)
        rows.write_parquet(folder.location / f"{table}.parquet")
        assert store.has_export(table, "v1") and store.read_export(table, "v1").equals(rows)

    commit(store, "v2", {"d9": ["Paragraph of d9."]}, parent="v1")
    assert store.read_export("chunks", "v2").equals(store.read_chunks("v2"))
    assert sorted(p.name for p in store.export_folder("chunks", "v2").location.iterdir()) == [  # type: ignore[union-attr]
        "part-00000.parquet",
        "part-00001.parquet",
        "part-00002.parquet",
    ]
    assert store.exported_versions("chunks") == {"v2"}
