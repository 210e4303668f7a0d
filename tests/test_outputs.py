"""Outputs never destroy inputs (#30): no output path of any command may point inside the store, and an existing
file is replaced only when it is an output of the same kind, or with --force. `answers export --out
<store>/answers/manifest.json` overwrote the answer store's manifest, and every answers command then died."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from citekeeper.answers.store import AnswerStore
from citekeeper.outputs import DIRECTORY
from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from parsers.records import ParseConfig
from pipelines.cli import main
from pipelines.cli_common import OutputCommand, OutputPath
from tests.chunk_frames import write_tree
from tests.cli_helpers import leaf_commands
from tests.store_helpers import chunk_with

NOTES = "a person's notes, 笔记\n".encode()
GUIDE = "# Guide\n\nTimeouts default to five seconds for every request the client sends.\n"
# Each command with an output file option, the option last: one of each kind of output.
WRITERS = {
    "export": ["export", "chunks", "--version", "v1", "--out"],
    "answers export": ["answers", "export", "--out"],
    "diff": ["diff", "v1", "v2", "--out"],
    "stale --out": ["stale", "--against", "v2", "--no-reanchor", "--out"],
    "stale --report": ["stale", "--against", "v2", "--no-reanchor", "--report"],
    "repair": ["repair", "--against", "v2", "--out"],
}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> CorpusStore:
    """v1 and v2 (one document more), and one answer citing v1."""
    base = tmp_path_factory.mktemp("outputs")
    store = CorpusStore(base / "store")
    source = write_tree(base / "src", {"guide.md": GUIDE})
    ingest(source, store, version="v1", config=ParseConfig(workers=1))
    write_tree(source, {"faq.md": "# FAQ\n\nRetries are off unless a transport says otherwise.\n"})
    ingest(source, store, version="v2", config=ParseConfig(workers=1))
    record = {
        "answer_id": "a1",
        "answer": "Timeouts are five seconds. [1]",
        "corpus_version": "v1",
        "references": [
            {"ref": 1, "chunk_id": chunk_with(store, "v1", "Timeouts")["chunk_id"], "quote": "five seconds"}
        ],
    }
    (base / "answers.jsonl").write_text(json.dumps(record) + "\n")
    AnswerStore(store.root).add(base / "answers.jsonl")
    return store


def run(store: CorpusStore, *args: str):
    return CliRunner().invoke(main, [*args, "--store", str(store.root)])


@pytest.mark.parametrize("writer", WRITERS)
def test_no_output_lands_in_the_store(store, writer):
    manifest = store.layout.answers_dir / "manifest.json"
    before = manifest.read_bytes()
    result = run(store, *WRITERS[writer], str(manifest), "--force")  # not even forced
    assert result.exit_code == 1
    assert result.output == (
        f"Error: {WRITERS[writer][-1]} {manifest}: inside the store ({store.root.resolve()}), "
        "whose files it would overwrite; write outputs outside the store\n"
    )
    assert manifest.read_bytes() == before
    assert run(store, "answers", "list").output.startswith("a1  revision 1")


@pytest.mark.parametrize("writer", WRITERS)
def test_an_existing_file_is_replaced_only_by_an_output_of_its_kind_or_with_force(store, tmp_path, writer):
    notes = tmp_path / "notes.txt"
    notes.write_bytes(NOTES)
    refused = run(store, *WRITERS[writer], str(notes))
    assert refused.exit_code == 1 and refused.output.startswith(
        f"Error: {WRITERS[writer][-1]} {notes}: exists and is not a citekeeper "
    )
    assert refused.output.endswith("; pass --force to replace it\n") and len(refused.output.splitlines()) == 1
    assert notes.read_bytes() == NOTES
    forced = run(store, *WRITERS[writer], str(notes), "--force")
    assert forced.exit_code == 0, forced.output
    assert notes.read_bytes() != NOTES
    again = run(store, *WRITERS[writer], str(notes))  # now it is an output of this kind
    assert again.exit_code == 0, again.output


def test_an_output_of_another_kind_is_not_replaced(store, tmp_path):
    exported = tmp_path / "answers.parquet"
    assert run(store, "answers", "export", "--out", str(exported)).exit_code == 0
    for writer in ("export", "diff", "stale --out"):
        result = run(store, *WRITERS[writer], str(exported))
        assert result.exit_code == 1 and "exists and is not a " in result.output, writer
    assert run(store, "answers", "export", "--out", str(exported)).exit_code == 0


def test_a_link_into_the_store_is_inside_it(store, tmp_path):
    link = tmp_path / "innocent.parquet"
    os.symlink(store.layout.answers_dir / "manifest.json", link)
    result = run(store, "answers", "export", "--out", str(link), "--force")
    assert result.exit_code == 1 and "inside the store" in result.output


def test_the_lance_and_parquet_locations_are_the_store_too(store, tmp_path, monkeypatch):
    elsewhere = tmp_path / "lance"
    monkeypatch.setenv("CITEKEEPER_LANCE_URI", f"file://{elsewhere}")
    result = run(store, "answers", "export", "--out", str(elsewhere / "chunks.lance" / "x.parquet"))
    assert result.exit_code == 1 and f"inside the store ({elsewhere})" in result.output
    monkeypatch.setenv("CITEKEEPER_PARQUET_URI", str(tmp_path / "exports"))
    result = run(store, "answers", "export", "--out", str(tmp_path / "exports" / "x.parquet"))
    assert result.exit_code == 1 and "inside the store" in result.output


@pytest.mark.parametrize(
    "command",
    [
        ["verify", "--no-model", "--out"],
        ["verify-merge", "--version", "v2", "--run-id", "r", "--out"],
        ["models", "pull", "x", "--to"],
    ],
)
def test_no_output_directory_is_in_the_store(store, monkeypatch, command):
    monkeypatch.setenv("CITEKEEPER_STORE", str(store.root))  # verify-merge and models pull use the default store
    result = CliRunner().invoke(main, [*command, str(store.layout.verify_dir / "runs")])
    assert result.exit_code == 1 and "inside the store" in result.output, result.output


def test_every_output_option_is_checked():
    """Every option naming where a command writes is an OutputPath of an OutputCommand (file outputs: with --force)."""

    checked = 0
    for command in leaf_commands(main).values():
        for param in command.params:
            if param.name in ("out", "out_dir", "report", "to_dir") or isinstance(param.type, OutputPath):
                assert isinstance(param.type, OutputPath) and isinstance(command, OutputCommand), (
                    command.name,
                    param.name,
                )
                assert param.type.kind == DIRECTORY or "force" in [p.name for p in command.params], command.name
                checked += 1
    assert checked == 9
