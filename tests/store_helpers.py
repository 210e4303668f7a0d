"""Store test helpers shared by test_store and test_ingest: a crash before the manifest, a second writer."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from citekeeper.store import CorpusStore


class Crash(RuntimeError):
    pass


def crash_before_manifest(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every commit dies after its LanceDB writes, before its manifest (the step that publishes it)."""

    def crash(self, manifest):
        raise Crash("killed after the LanceDB write, before the manifest")

    monkeypatch.setattr(CorpusStore, "_write_manifest", crash)


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
