"""The answer store commits atomically: a reader sees an add whole or not at all, even when the add is killed."""

import json
import signal
import subprocess
import sys

import polars as pl
import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal

from citekeeper.answers.store import AnswerStore
from citekeeper.schema import ANSWERS, CITATIONS, CLAIMS
from tests.conftest import REPO
from tests.test_answers import MARKER, STRUCTURED, write_jsonl

TABLES = {"answers": ANSWERS, "claims": CLAIMS, "citations": CITATIONS}

REVISED = json.loads(json.dumps(STRUCTURED))
REVISED["claims"][1]["text"] = "It has many parts."
NEW = dict(MARKER, answer_id="n1")

# Runs AnswerStore(store).add(file) and SIGKILLs itself at `kill_at`:
#   before_citations: answers.parquet and claims.parquet of the new part written, citations.parquet not;
#   at_manifest_replace: the whole part and the manifest temp file written, the rename not done.
KILLED_ADD = """
import os, signal, sys, types
from citekeeper.answers import store as answer_store

store, answers_file, kill_at = sys.argv[1:]

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

ParquetWriter = answer_store.pq.ParquetWriter

def writer_or_die(path, schema):
    if path.name == "citations.parquet":
        die()
    return ParquetWriter(path, schema)

if kill_at == "before_citations":
    answer_store.pq = types.SimpleNamespace(ParquetWriter=writer_or_die)
else:  # the rename of the one atomic write (citekeeper.files), after the temp file is written and fsynced
    from citekeeper import files

    class DyingAtReplace:
        def __getattr__(self, name):
            return die if name == "replace" else getattr(os, name)

    files.os = DyingAtReplace()
answer_store.AnswerStore(store).add(answers_file)
"""


def killed_add(store_root, answers_file, kill_at: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_ADD, str(store_root), str(answers_file), kill_at],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def tables(store: AnswerStore) -> dict[str, pl.DataFrame]:
    snapshot = store.snapshot()
    return {
        "all_answers": snapshot.all_answers(),
        "answers": snapshot.answers(),
        "claims": snapshot.claims(),
        "citations": snapshot.citations(),
    }


def assert_consistent(store: AnswerStore) -> None:
    """Every current answer has its claims, every claim its citations, and nothing belongs to no answer."""
    snapshot = store.snapshot()
    answers, claims, citations = snapshot.answers(), snapshot.claims(), snapshot.citations()
    key = ["answer_id", "revision"]
    assert set(answers.select(key).iter_rows()) == set(claims.select(key).iter_rows())
    expected = claims.select("claim_id", pl.col("n_citations").cast(pl.UInt32)).sort("claim_id")
    counted = citations.group_by("claim_id").len(name="n_citations")
    assert_frame_equal(
        expected.filter(pl.col("n_citations") > 0),
        counted.sort("claim_id"),
        check_dtypes=False,
    )


@pytest.mark.parametrize("kill_at", ["before_citations", "at_manifest_replace"])
def test_killed_add_leaves_the_previous_state_and_the_next_add_commits_whole(tmp_path, kill_at):
    store = AnswerStore(tmp_path / "store")
    store.add(write_jsonl(tmp_path / "first.jsonl", [STRUCTURED, MARKER]))
    before = tables(store)

    second = write_jsonl(tmp_path / "second.jsonl", [REVISED, NEW])
    killed_add(tmp_path / "store", second, kill_at)
    uncommitted = [p for p in store.parts_dir.iterdir() if f"parts/{p.name}" not in store.snapshot().parts]
    assert len(uncommitted) == 1 and (uncommitted[0] / "claims.parquet").exists()  # the kill came mid-commit

    after_kill = tables(AnswerStore(tmp_path / "store"))
    for name, frame in before.items():
        assert_frame_equal(after_kill[name], frame)
    assert_consistent(store)

    result = store.add(second)
    assert result.revised == [("a1", 2)] and result.added == ["n1"]
    assert sorted(store.answers().select("answer_id", "revision").iter_rows()) == [("a1", 2), ("m1", 1), ("n1", 1)]
    assert store.claims().filter(pl.col("answer_id") == "a1")["text"].to_list() == [
        "X is a thing.",
        "It has many parts.",
    ]
    assert_consistent(store)
    # The dead add's part and manifest temp file are gone; every part left is committed.
    assert sorted(f"parts/{p.name}" for p in store.parts_dir.iterdir()) == sorted(store.snapshot().parts)
    assert not list(store.root.glob(".manifest.json.*"))


def test_each_add_writes_only_its_own_part(tmp_path):
    store = AnswerStore(tmp_path / "store")
    store.add(write_jsonl(tmp_path / "a.jsonl", [STRUCTURED]))
    first_part = store.root / store.snapshot().parts[0]
    first_bytes = {name: (first_part / f"{name}.parquet").read_bytes() for name in TABLES}

    store.add(write_jsonl(tmp_path / "b.jsonl", [MARKER]))
    store.add(write_jsonl(tmp_path / "c.jsonl", [MARKER]))  # unchanged: no commit

    parts = json.loads(store.manifest_path.read_text())["parts"]
    assert len(parts) == 2 and parts[0] == store.snapshot().parts[0]
    assert {name: (first_part / f"{name}.parquet").read_bytes() for name in TABLES} == first_bytes
    for part in parts:
        for name, schema in TABLES.items():
            assert pq.read_schema(store.root / part / f"{name}.parquet").equals(schema)
    second = pl.read_parquet(store.root / parts[1] / "answers.parquet")
    assert second["answer_id"].to_list() == ["m1"]


# Adds a fresh revision of every answer, again and again, while the test reads.
WRITER = """
import json, sys
from pathlib import Path
from citekeeper.answers.store import AnswerStore

store, record_file, rounds = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
records = [json.loads(line) for line in record_file.read_text().splitlines()]
for n in range(rounds):
    for record in records:
        record["answer"] = f"{record['answer']} "  # new content, new revision, same claims and citations
    path = record_file.with_name(f"round-{n}.jsonl")
    path.write_text("\\n".join(json.dumps(record) for record in records) + "\\n")
    AnswerStore(store).add(path)
"""


def test_reader_never_sees_an_answer_without_its_claims_while_adds_run(tmp_path):
    store = AnswerStore(tmp_path / "store")
    records = write_jsonl(tmp_path / "records.jsonl", [STRUCTURED, MARKER])
    store.add(records)
    rounds = 15
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path / "store"), str(records), str(rounds)], cwd=REPO
    )
    reads = 0
    while writer.poll() is None:
        assert_consistent(store)
        reads += 1
    assert writer.returncode == 0 and reads > 0
    assert store.answers()["revision"].to_list() == [rounds + 1, rounds + 1]
    assert_consistent(store)


def test_an_add_read_in_batches_registers_what_one_batch_does(tmp_path):
    """Batches bound an add's memory; they must not change what it registers, even when one answer is revised
    within the file (its second line in a later batch) or a batch re-adds what an earlier one registered."""
    lines = [STRUCTURED, MARKER, NEW, REVISED, STRUCTURED, dict(MARKER, answer_id="n2")]
    path = write_jsonl(tmp_path / "in.jsonl", [json.dumps(line) for line in lines])
    one, batched = AnswerStore(tmp_path / "one"), AnswerStore(tmp_path / "batched")
    assert (
        one.add(path).summary()
        == batched.add(path, batch_size=2).summary()
        == "4 added, 2 revised, 0 unchanged, 0 error(s)"
    )
    for name, frame in tables(one).items():
        assert_frame_equal(
            frame.drop("registered_at", strict=False), tables(batched)[name].drop("registered_at", strict=False)
        )
