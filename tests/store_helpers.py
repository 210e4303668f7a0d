"""Store test helpers: a crash before the manifest, a second writer (test_store, test_ingest); the chunk holding
some words (the citation tests)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest

from citekeeper.store import CorpusStore


class Crash(RuntimeError):
    pass


def crash_before_manifest(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every commit dies after its LanceDB writes, before its manifest (the step that publishes it)."""

    def crash(self, manifest):
        raise Crash("killed after the LanceDB write, before the manifest")

    monkeypatch.setattr(CorpusStore, "write_manifest", crash)


def hold_lock(store_dir: Path, seconds: float | None) -> subprocess.Popen:
    """A second process holding the writer lock: until stdin closes, or for `seconds`."""
    release = "sys.stdin.read()" if seconds is None else f"time.sleep({seconds})"
    code = textwrap.dedent(f"""
        import sys, time
        from citekeeper.store import CorpusStore
        with CorpusStore({str(store_dir)!r}).lock():
            print("locked", flush=True)
            {release}
    """)
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder


def chunk_with(store: CorpusStore, version: str, words: str) -> dict:
    """The one chunk of `version` whose text contains `words`: chunk_id, text, text_hash."""
    chunks = store.read_chunks(version, columns=["chunk_id", "text", "text_hash"])
    return chunks.filter(pl.col("text").str.contains(words, literal=True)).row(0, named=True)


def export_into_store(store: CorpusStore, version: str) -> Path | str:
    """The store's own export of an older version's chunks and documents (a commit keeps only the latest's)."""
    store.export_tables(version)
    return store.export_folder("chunks", version).location
