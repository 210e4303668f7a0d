"""`citekeeper gc` against the commands that read the store while they run (`stale`, `verify`, `repair`), and
writers killed midway: every run ends with its whole output or one clear error line, never a traceback, and no
temp file outlives its writer.

Real processes on a store built by the real ingest: v0, v1 (which the registered answer cites) and v2, so
`gc --keep-last 1` prunes v0. A reader is held at a chosen point (its first read of the store, its first output's
rename, or not at all while gc starts first) until gc has finished or waits for it. The cited text is the same in
every version, so no reader loads the re-anchoring model.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import filelock
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from citekeeper.answers.store import AnswerStore
from citekeeper.files import atomic_open, atomic_write_text
from citekeeper.store import CorpusStore, StoreLocked
from parsers.ingest import ingest
from parsers.records import ParseConfig
from pipelines.cli import main
from tests.chunk_frames import write_tree
from tests.conftest import REPO
from tests.store_helpers import chunk_with

CLI = "import sys; from pipelines.cli import main; sys.argv[0] = 'citekeeper'; main()"

# The real CLI, held at `pause_at` until the file `release` exists (`reached` says it got there), or killed there
# with SIGKILL (`die`):
#   first_read: right after its first manifest read; first_output: its first output written, before the rename.
READER = """
import os, signal, sys, time
from pathlib import Path
from citekeeper import files
from citekeeper.store import CorpusStore
from pipelines.cli import main

pause_at, reached, release = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
held = []

def hold():
    if held:
        return
    held.append(True)
    reached.touch()
    if release.name == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    while not release.exists():
        time.sleep(0.02)

if pause_at == "first_read":
    manifest = CorpusStore.manifest

    def manifest_then_hold(self, name):
        found = manifest(self, name)
        hold()
        return found

    CorpusStore.manifest = manifest_then_hold
elif pause_at == "first_output":  # the rename of the one atomic write (citekeeper.files)
    class HoldAtReplace:
        def __getattr__(self, name):
            return getattr(os, name)

        def replace(self, *args):
            hold()
            os.replace(*args)

    files.os = HoldAtReplace()
sys.argv[0] = "citekeeper"
main(sys.argv[4:])
"""


def tree(revision: int) -> dict[str, str]:
    """The cited sentence of a.md gains a second one after v1 (a repair re-points the citation at its successor);
    b.md says which revision it is."""
    added = "" if revision == 1 else " Ask support for the form."
    return {
        "a.md": f"# A\n\nRefunds are possible within 30 days of purchase.{added}\n",
        "b.md": f"# B\n\nThis is revision {revision} of b.\n",
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("gc_faults") / "store"
    store = CorpusStore(root)
    for name, revision in (("v0", 0), ("v1", 1), ("v2", 2)):
        source = write_tree(tmp_path_factory.mktemp(f"src-{name}"), tree(revision))
        assert ingest(source, store, version=name, config=ParseConfig(workers=1)).created
    cited = chunk_with(store, "v1", "Refunds are possible")
    answer = {
        "answer_id": "a1",
        "question": "Refunds?",
        "answer": "Within 30 days.",
        "corpus_version": "v1",
        "claims": [
            {
                "claim_id": "c1",
                "text": "Refunds are possible within 30 days.",
                "citations": [{"chunk_id": cited["chunk_id"], "quote": "within 30 days of purchase"}],
            }
        ],
    }
    answers = root.parent / "answers.jsonl"
    answers.write_text(json.dumps(answer) + "\n")
    assert AnswerStore(root).add(answers).n_registered == 1
    return root


def copy_of(built: Path, tmp_path: Path) -> Path:
    root = tmp_path / "store"
    shutil.copytree(built, root)
    return root


def start_reader(args: list[str], pause_at: str, work: Path, release: str = "release") -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", READER, pause_at, str(work / "reached"), str(work / release), *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def start_gc(root: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CLI, "gc", "--keep-last", "1", "--store", str(root)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def gc_holds_the_writer_lock(root: Path) -> bool:
    try:
        filelock.FileLock(str(CorpusStore(root).layout.lock)).acquire(timeout=0).lock.release()
    except filelock.Timeout:
        return True
    return False


def gc_waits_for_readers(root: Path) -> bool:
    """A gc waiting for the readers holds new ones off: a reader asking now is refused."""
    try:
        with CorpusStore(root).reading(timeout=0):
            return False
    except StoreLocked:
        return True


def wait_until(condition, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


@dataclass
class Finished:
    returncode: int
    stdout: str
    stderr: str


def finished(process: subprocess.Popen) -> Finished:
    stdout, stderr = process.communicate(timeout=300)
    return Finished(process.returncode, stdout, stderr)


def race(root: Path, work: Path, args: list[str], timing: str) -> tuple[Finished, Finished]:
    """Run the reader and `gc --keep-last 1` at `timing`, to their end."""
    if timing == "gc_first":
        gc = start_gc(root)
        wait_until(lambda: gc.poll() is not None or gc_holds_the_writer_lock(root), "gc holds the store")
        reader = start_reader(args, "none", work)
    else:
        reader = start_reader(args, timing, work)
        wait_until(lambda: reader.poll() is not None or (work / "reached").exists(), f"the reader is at {timing}")
        gc = start_gc(root)
        wait_until(lambda: gc.poll() is not None or gc_waits_for_readers(root), "gc ends or waits for the reader")
        (work / "release").touch()
    return finished(reader), finished(gc)


def whole_or_one_error(reader: Finished, outputs: list[Path]) -> str:
    """'whole': it succeeded and every output reads whole; 'error': it failed with one line, leaving no output."""
    assert "Traceback" not in reader.stdout + reader.stderr, reader.stderr
    if reader.returncode == 0:
        for output in outputs:
            if output.suffix == ".parquet":
                assert pq.read_table(output).num_rows > 0, output
            else:
                assert output.read_text().strip(), output
        return "whole"
    lines = reader.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), reader.stderr
    assert not any(output.exists() for output in outputs), outputs
    return "error"


def temp_files(root: Path) -> list[Path]:
    return sorted(root.rglob(".*.tmp"))


# (command line, its outputs outside the store) under a work folder `w`; v0 is the version gc prunes
READERS = {
    "stale_pruned": (
        lambda w: ["stale", "--against", "v0", "--no-reanchor", "--out", str(w / "status.parquet")],
        lambda w: [w / "status.parquet"],
    ),
    "stale_kept": (
        lambda w: ["stale", "--against", "v2", "--no-reanchor", "--out", str(w / "status.parquet")],
        lambda w: [w / "status.parquet"],
    ),
    "verify_pruned": (lambda w: ["verify", "--no-model", "--version", "v0", "--out", str(w / "runs")], lambda w: []),
    "repair_pruned": (
        lambda w: ["repair", "--against", "v0", "--out", str(w / "repaired.jsonl")],
        lambda w: [w / "repaired.jsonl"],
    ),
}
CASES = [
    ("stale_pruned", "gc_first"),
    ("stale_pruned", "first_read"),
    ("stale_pruned", "first_output"),
    ("stale_kept", "first_read"),
    ("verify_pruned", "first_output"),
    ("repair_pruned", "first_output"),
]


def run_case(built: Path, tmp_path: Path, reader_name: str, timing: str) -> str:
    work = tmp_path / f"{reader_name}-{timing}"
    work.mkdir()
    root = copy_of(built, work)
    command, outputs = READERS[reader_name]
    args = [*command(work), "--store", str(root)]
    reader, gc = race(root, work, args, timing)
    outcome = whole_or_one_error(reader, outputs(work))
    assert gc.returncode == 0 and "pruned 1 corpus version(s): v0" in gc.stdout, gc.stderr
    assert not temp_files(root)
    store = CorpusStore(root)
    assert [m.name for m in store.versions()] == ["v1", "v2"]
    if outcome == "whole" and reader_name == "stale_kept":  # the statuses in the store are whole too
        assert pq.read_table(store.layout.citation_status_file("v2")).num_rows > 0
    return outcome


def test_gc_against_running_readers_at_several_timings(built: Path, tmp_path: Path) -> None:
    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = dict(zip(CASES, pool.map(lambda case: run_case(built, tmp_path, *case), CASES)))
    # A reader that got the store first finishes whole: gc waits for it.
    for case, outcome in outcomes.items():
        if case[1] != "gc_first":
            assert outcome == "whole", case


def test_a_killed_writers_temp_file_goes_at_the_next_write_and_at_gc(built: Path, tmp_path: Path) -> None:
    root = copy_of(built, tmp_path)
    store = CorpusStore(root)
    status_dir = store.layout.citation_status_dir("v2")
    stale = ["stale", "--against", "v2", "--no-reanchor", "--store", str(root)]

    def killed_stale() -> list[Path]:
        """The temp files a stale killed at its first rename leaves: the diff's it renames, the statuses' it streams."""
        (tmp_path / "reached").unlink(missing_ok=True)
        reader = start_reader(stale, "first_output", tmp_path, release="die")
        assert reader.wait(timeout=300) == -signal.SIGKILL, reader.stderr.read()
        left = temp_files(root)
        assert any(p.parent == status_dir and p.name.startswith(".citation_status.parquet.") for p in left), left
        return left

    killed_stale()
    rerun = CliRunner().invoke(main, stale)  # writes again to both folders
    assert rerun.exit_code == 0, rerun.output
    assert not temp_files(root)
    assert pq.read_table(store.layout.citation_status_file("v2")).num_rows > 0

    left = killed_stale()
    gc = CliRunner().invoke(main, ["gc", "--keep-last", "1", "--store", str(root)])
    assert gc.exit_code == 0, gc.output
    assert f"temp {len(left)}" in gc.output and not temp_files(root)


def test_a_live_writers_temp_file_stays(built: Path, tmp_path: Path) -> None:
    """Another write to the directory, and gc, leave alone a temp file whose writer is still writing."""
    root = copy_of(built, tmp_path)
    target = CorpusStore(root).layout.citation_status_file("v2")
    with atomic_open(target) as handle:
        handle.write("first half, ")
        [live] = temp_files(root)
        atomic_write_text(target.with_name("other.txt"), "written beside it")
        gc = CliRunner().invoke(main, ["gc", "--keep-last", "1", "--store", str(root)])
        assert gc.exit_code == 0, gc.output
        assert live.exists()
        handle.write("second half")
    assert target.read_text() == "first half, second half" and not temp_files(root)


HOLD_EXCLUSIVE = """
import sys, time
from pathlib import Path
from citekeeper.store import CorpusStore

with CorpusStore(sys.argv[1]).excluding_readers():  # what gc holds while it prunes and compacts
    Path(sys.argv[2]).touch()
    while not Path(sys.argv[3]).exists():
        time.sleep(0.02)
"""


def test_verification_as_the_dagster_asset_runs_it_waits_for_gc(built: Path, tmp_path: Path) -> None:
    """verify_store itself (the asset calls it, not the CLI) takes the reader lease: it returns only after gc
    lets go."""
    from verifiers.verify_store import verify_store

    root = copy_of(built, tmp_path)
    held, release = tmp_path / "held", tmp_path / "release"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_EXCLUSIVE, str(root), str(held), str(release)], cwd=REPO)
    wait_until(lambda: holder.poll() is not None or held.exists(), "the exclusive lease is held")
    with ThreadPoolExecutor(max_workers=1) as pool:
        verified = pool.submit(lambda: (verify_store(root, tmp_path / "runs", version="v1"), release.exists()))
        time.sleep(3)  # time enough to verify this one answer, were the lease not waited for
        release.touch()
        (run, _), released_first = verified.result(timeout=300)
    assert holder.wait(timeout=60) == 0
    assert released_first and run.run["n_claims"][0] == 1
