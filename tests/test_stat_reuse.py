"""An unchanged file costs a stat: discovery keeps the hash it read of a file while the file's size, mtime,
ctime and inode stay, reads a racily-stamped file again, and reads everything under rehash. The oracle of every
test is the bytes on disk (hashed here), never what discovery reports."""

from __future__ import annotations

import hashlib
import os
import random
import time
from pathlib import Path

import polars as pl
import pytest

from citekeeper.store import CorpusStore
from parsers.discover import RACY_WINDOW_NS
from parsers.ingest import ingest
from parsers.records import ParseConfig

SERIAL = ParseConfig(workers=1)


def _page(i: int, edit: int = 0) -> str:
    return f"# Page {i}\n\nThe setting number {i} defaults to {i * 7 + edit} seconds.\n"


def _tree(root: Path, n: int) -> None:
    root.mkdir()
    for i in range(n):
        (root / f"p{i:02d}.md").write_text(_page(i))


def _age() -> None:
    """Wait until every file written so far was last changed (mtime and ctime, which no utime sets back) more
    than the racy window before it is read."""
    time.sleep(RACY_WINDOW_NS / 1e9 + 0.2)


@pytest.fixture
def opened(monkeypatch) -> list[Path]:
    """The files under any source root opened for reading, in order (Path.open, which discovery and the parser use)."""
    seen: list[Path] = []
    real_open = Path.open

    def counting_open(self: Path, mode: str = "r", *args, **kwargs):
        if "r" in mode and self.suffix == ".md":
            seen.append(self)
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", counting_open)
    return seen


def _disk_hashes(root: Path) -> dict[str, str]:
    return {p.name: "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.glob("*.md"))}


def _stored_hashes(store: CorpusStore, version: str) -> dict[str, str]:
    documents = store.read_documents(version, columns=["source_path", "doc_content_hash"]).sort("source_path")
    return dict(documents.iter_rows())


def test_an_unchanged_tree_is_not_read_again(tmp_path: Path, opened: list[Path]):
    source, store = tmp_path / "source", CorpusStore(tmp_path / "store")
    _tree(source, 6)
    _age()
    first = ingest(source, store, version="v1", config=SERIAL)
    assert (first.manifest.n_hashed, first.manifest.n_stamp_reused) == (6, 0)
    opened.clear()
    (source / "p03.md").write_text(_page(3, edit=1))  # changed now: racy, and changed
    second = ingest(source, store, version="v2", config=SERIAL)
    # discovery reads the changed file, the parser reads it again; no other file is opened
    assert sorted({p.name for p in opened}) == ["p03.md"]
    assert (second.manifest.n_hashed, second.manifest.n_stamp_reused, second.n_parsed) == (1, 5, 1)
    assert _stored_hashes(store, "v2") == _disk_hashes(source)


def test_same_size_and_restored_mtime_is_still_a_change(tmp_path: Path):
    """A write that keeps the size and sets mtime back (rsync -t, touch -d) changes ctime: the file is read."""
    source, store = tmp_path / "source", CorpusStore(tmp_path / "store")
    _tree(source, 3)
    _age()
    ingest(source, store, version="v1", config=SERIAL)
    page = source / "p01.md"
    before = page.stat()
    page.write_text(_page(1).replace("defaults to 7", "defaults to 8"))
    os.utime(page, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (page.stat().st_size, page.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    result = ingest(source, store, version="v2", config=SERIAL)
    assert result.created and result.n_parsed == 1
    assert _stored_hashes(store, "v2") == _disk_hashes(source)


def test_a_racy_stamp_is_read_again_until_read_well_after_its_change(tmp_path: Path, opened: list[Path]):
    """A file read within 2 s of its last change is read again on each run, until one reads it later than that."""
    source, store = tmp_path / "source", CorpusStore(tmp_path / "store")
    _tree(source, 3)
    _age()
    (source / "p00.md").write_text(_page(0, edit=1))  # written just now
    ingest(source, store, version="v1", config=SERIAL)
    opened.clear()
    assert ingest(source, store, version="v2", config=SERIAL).equals == "v1"
    assert [p.name for p in opened] == ["p00.md"]  # still within its window: read again
    _age()
    opened.clear()
    assert ingest(source, store, version="v3", config=SERIAL).equals == "v1"
    assert [p.name for p in opened] == ["p00.md"]  # the last read was racy: read once more, now safely after
    opened.clear()
    assert ingest(source, store, version="v4", config=SERIAL).equals == "v1"
    assert opened == []


def test_rehash_reads_every_file(tmp_path: Path, opened: list[Path]):
    source, store = tmp_path / "source", CorpusStore(tmp_path / "store")
    _tree(source, 4)
    _age()
    ingest(source, store, version="v1", config=SERIAL)
    opened.clear()
    assert ingest(source, store, version="v2", config=SERIAL).equals == "v1"
    assert opened == []
    assert ingest(source, store, version="v3", config=ParseConfig(workers=1, rehash=True)).equals == "v1"
    assert sorted(p.name for p in opened) == [f"p{i:02d}.md" for i in range(4)]


def _cache_files(store: CorpusStore) -> dict[str, tuple[int, int, int]]:
    """The stamp cache's files, each with (inode, mtime_ns, rows)."""
    files = sorted((store.root / "cache").rglob("*.parquet"))
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, pl.read_parquet(p).height) for p in files}


def test_a_run_that_reads_nothing_leaves_the_stamp_cache_as_it_is(tmp_path: Path, opened: list[Path]):
    source, store = tmp_path / "source", CorpusStore(tmp_path / "store")
    _tree(source, 4)
    _age()
    ingest(source, store, version="v1", config=SERIAL)
    cache = _cache_files(store)
    assert [rows for _, _, rows in cache.values()] == [4]
    assert ingest(source, store, version="v2", config=SERIAL).equals == "v1"
    assert _cache_files(store) == cache  # not rewritten
    (source / "p02.md").unlink()
    ingest(source, store, version="v3", config=SERIAL)
    assert [rows for _, _, rows in _cache_files(store).values()] == [3]  # rewritten without the file gone
    (source / "p02.md").write_text(_page(2))
    _age()
    opened.clear()
    ingest(source, store, version="v4", config=SERIAL)
    assert [p.name for p in opened] == ["p02.md", "p02.md"]  # read by discovery and the parser, nothing else
    assert [rows for _, _, rows in _cache_files(store).values()] == [4]
    assert _stored_hashes(store, store.latest().name) == _disk_hashes(source)


@pytest.mark.parametrize("seed", range(3))
def test_random_edits_every_version_holds_the_bytes_on_disk(tmp_path: Path, seed: int):
    """Seeded edits of every kind a stat can and cannot see coming (a same-size edit with mtime restored, a touch,
    a delete, a new file, a rename onto another's name); after each run the version holds exactly the bytes on
    disk."""
    rng = random.Random(seed)
    source, store = tmp_path / "source", CorpusStore(tmp_path / "store")
    _tree(source, 8)
    _age()
    for round_ in range(4):
        for _ in range(3):
            pages = sorted(source.glob("*.md"))
            page = rng.choice(pages)
            match rng.choice(["same_size", "touch", "delete", "add", "rename", "nothing"]):
                case "same_size":
                    before = page.stat()
                    text = page.read_text()
                    page.write_text(text.replace("seconds", "secondz") if "seconds" in text else text.upper())
                    os.utime(page, ns=(before.st_atime_ns, before.st_mtime_ns))
                case "touch":
                    os.utime(page)
                case "delete" if len(pages) > 2:
                    page.unlink()
                case "add":
                    (source / f"n{round_}{rng.randrange(100)}.md").write_text(_page(rng.randrange(100), edit=round_))
                case "rename" if len(pages) > 2:
                    page.replace(rng.choice([p for p in pages if p != page]))
        ingest(source, store, version=f"v{round_}", config=SERIAL)
        latest = store.latest().name
        assert _stored_hashes(store, latest) == _disk_hashes(source), (seed, round_)
        assert store.read_documents(latest, columns=["doc_id"]).height == len(list(source.glob("*.md")))
    assert pl.Series([m.n_stamp_reused for m in store.versions()]).sum() > 0  # the stat did save reads
