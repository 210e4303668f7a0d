"""Retention (`citekeeper gc`) and exports on demand, on a real store built by the real ingest.

Six versions of a small markdown tree; an answer cites v2 (at one citation) and v3 (at the answer). gc keeps the
latest, the last N, the versions named by --keep and the cited ones, readable by name with the same rows as
before; it removes the outputs of the pruned ones; a dry run changes nothing; an interrupted gc leaves every kept
version readable and the next one finishes the job.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import time
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path

import dagster as dg
import lancedb
import polars as pl
import pytest
from click.testing import CliRunner

from citekeeper import retention
from citekeeper.answers.store import AnswerStore
from citekeeper.layout import run_dir
from citekeeper.store import CorpusStore, StoreLocked, UnknownVersion
from parsers.ingest import ingest
from parsers.records import ParseConfig
from pipelines.cli import main
from tests.chunk_frames import write_tree
from tests.store_helpers import chunk_with, export_into_store, hold_lock

VERSIONS = ["v1", "v2", "v3", "v4", "v5", "v6"]
CONFIG = ParseConfig(workers=1)


def paragraphs(name: str, revision: int, n: int = 3) -> str:
    body = "\n\n".join(
        f"Paragraph {i} of {name}, revision {revision}: it says something worth citing." for i in range(n)
    )
    return f"# {name}\n\n{body}\n"


# What each version's tree holds: v2 edits b and adds a file no parser takes (an ingest error); v3 edits c;
# v4 deletes a; v5 adds d; v6 edits b again.
TREES = [
    {"a.md": paragraphs("a", 1), "b.md": paragraphs("b", 1), "c.md": paragraphs("c", 1)},
    {"a.md": paragraphs("a", 1), "b.md": paragraphs("b", 2), "c.md": paragraphs("c", 1), "notes.xyz": "binary"},
    {"a.md": paragraphs("a", 1), "b.md": paragraphs("b", 2), "c.md": paragraphs("c", 2)},
    {"b.md": paragraphs("b", 2), "c.md": paragraphs("c", 2)},
    {"b.md": paragraphs("b", 2), "c.md": paragraphs("c", 2), "d.md": paragraphs("d", 1, 5)},
    {"b.md": paragraphs("b", 3), "c.md": paragraphs("c", 2), "d.md": paragraphs("d", 1, 5)},
]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The six versions, an answer citing v2 and v3, and outputs (diffs, statuses, repairs, runs) for each version."""
    root = tmp_path_factory.mktemp("retention") / "store"
    store = CorpusStore(root)
    for name, files in zip(VERSIONS, TREES):
        source = tmp_path_factory.mktemp(f"src-{name}")
        write_tree(source, files)
        assert ingest(source, store, version=name, config=CONFIG).created
    b_v2 = chunk_with(store, "v2", "Paragraph 1 of b, revision 2")
    answer = {
        "answer_id": "a1",
        "question": "What does b say?",
        "answer": "It says something.",
        "corpus_version": "v3",
        "claims": [
            {
                "claim_id": "c1",
                "text": "b says something worth citing.",
                "citations": [
                    {"chunk_id": b_v2["chunk_id"], "quote": "it says something worth citing", "corpus_version": "v2"}
                ],
            }
        ],
    }
    answers = root.parent / "answers.jsonl"
    answers.write_text(json.dumps(answer) + "\n")
    assert AnswerStore(root).add(answers).n_registered == 1
    layout = store.layout
    for old, new in pairwise(VERSIONS):
        write_file(layout.chunk_diff_file(old, new))
    for name in VERSIONS:
        write_file(layout.citation_status_file(name))
        write_file(layout.repairs_file(name))
        write_file(run_dir(layout.runs_dir, name, "r1") / "claims.parquet")
        write_file(layout.embeddings_dir / f"chunks__{name}__simple__fts.lance" / "data" / "x.lance")
    return root


def write_file(path: Path, text: str = "x" * 100) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def store(built: Path, tmp_path: Path) -> CorpusStore:
    root = tmp_path / "store"
    shutil.copytree(built, root)
    return CorpusStore(root)


def snapshot(store: CorpusStore, versions) -> dict[str, tuple[pl.DataFrame, pl.DataFrame]]:
    return {v: (store.read_chunks(v), store.read_documents(v)) for v in versions}


def assert_reads_as_before(store: CorpusStore, before: dict) -> None:
    for version, (chunks, documents) in before.items():
        assert store.read_chunks(version).equals(chunks), version
        assert store.read_documents(version).equals(documents), version


def files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file but the locks (taking a lock touches its file) with its size and modification time."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file() and p.name != ".lock"
    }


def tags(store: CorpusStore, table: str) -> set[str]:
    return set(lancedb.connect(store.lance_uri).open_table(table).tags.list())


# ---------------------------------------------------------------------- exports


def test_exports_exist_for_the_latest_only_and_export_makes_any_other(store: CorpusStore, tmp_path: Path) -> None:
    assert store.exported_versions("chunks") == store.exported_versions("documents") == {"v6"}
    assert store.exported_versions("errors") == set(VERSIONS)  # the only copy of each version's ingest errors
    assert not (store.layout.parquet_dir / "chunks" / "corpus_version=v5").exists()
    assert store.read_errors("v2")["source_path"].to_list() == ["notes.xyz"]
    assert store.read_export("chunks", "v6").equals(store.read_chunks("v6"))

    runner = CliRunner()
    for table, read in (
        ("chunks", store.read_chunks),
        ("documents", store.read_documents),
        ("errors", store.read_errors),
    ):
        out = tmp_path / f"v2-{table}.parquet"
        result = runner.invoke(
            main, ["export", table, "--version", "v2", "--out", str(out), "--store", str(store.root)]
        )
        assert result.exit_code == 0, result.output
        assert pl.read_parquet(out).equals(read("v2")), table
    assert store.exported_versions("chunks") == {"v6"}  # exporting to --out leaves the store as it was

    location = export_into_store(store, "v2")  # for a consumer that needs the store's own files
    assert pl.read_parquet(location).equals(store.read_chunks("v2").drop("corpus_version"))
    assert store.read_export("chunks", "v2").equals(store.read_chunks("v2"))


# ---------------------------------------------------------------------- gc


def test_gc_keeps_latest_last_n_pinned_and_cited_and_prunes_the_rest(store: CorpusStore) -> None:
    before = snapshot(store, VERSIONS)
    layout = store.layout
    write_file(layout.staging_dir / "v4" / "shard-0-of-1" / "chunks.parquet")  # a committed version's leftovers
    stale = write_file(layout.staging_dir / "abandoned" / "shard-0-of-2" / "chunks.parquet")
    os.utime(stale, (time.time() - 3 * 86400,) * 2)
    running = write_file(layout.staging_dir / "v7" / "shard-1-of-2" / "chunks.parquet")  # a stage under way

    summary = retention.gc(store, keep_last=2, keep=["v1"])

    assert summary.kept == {
        "v1": ["--keep"],
        "v2": ["cited by 1 current answer(s)"],
        "v3": ["cited by 1 current answer(s)"],
        "v5": ["last 2"],
        "v6": ["latest", "last 2"],
    }
    assert summary.pruned == ["v4"] and summary.lance_rewritten
    assert [m.name for m in store.versions()] == ["v1", "v2", "v3", "v5", "v6"]
    assert_reads_as_before(store, {v: before[v] for v in summary.kept})
    with pytest.raises(UnknownVersion):
        store.read_chunks("v4")
    for table in ("chunks", "documents"):
        assert tags(store, table) == set(summary.kept)
        # every table version left is a kept version's (plus the head, which is the latest's)
        versions = {v["version"] for v in lancedb.connect(store.lance_uri).open_table(table).list_versions()}
        assert versions == {store.manifest(v).lance_versions[table] for v in summary.kept}

    # the pruned version's outputs are gone, the kept versions' stay
    assert store.exported_versions("errors") == set(summary.kept)
    assert not layout.diff_dir("v3", "v4").exists() and not layout.diff_dir("v4", "v5").exists()
    assert layout.diff_dir("v1", "v2").exists() and layout.diff_dir("v5", "v6").exists()
    for name in VERSIONS:
        for path in (
            layout.citation_status_dir(name),
            layout.repairs_dir(name),
            layout.runs_dir / f"corpus_version={name}",
        ):
            assert path.exists() == (name != "v4"), path
    for name in VERSIONS:
        assert (layout.embeddings_dir / f"chunks__{name}__simple__fts.lance").exists() == (name != "v4")
    assert not (layout.staging_dir / "v4").exists() and not (layout.staging_dir / "abandoned").exists()
    assert running.exists()
    assert not layout.gc_pending.exists()
    assert summary.bytes_freed > 0 and summary.bytes_after == retention.store_bytes(store)
    assert store.read_errors("v2")["source_path"].to_list() == ["notes.xyz"]  # a kept version's errors stay
    out = store.root.parent / "v2-chunks.parquet"  # a kept old version exports on demand, as it was
    exported = CliRunner().invoke(
        main, ["export", "chunks", "--version", "v2", "--out", str(out), "--store", str(store.root)]
    )
    assert exported.exit_code == 0, exported.output
    assert pl.read_parquet(out).equals(before["v2"][0])
    kinds = {(r.kind, r.version) for r in summary.removed}
    assert {
        ("manifest", "v4"),
        ("export", "v4"),
        ("citations", "v4"),
        ("repairs", "v4"),
        ("verify_run", "v4"),
        ("staging", "v4"),
        ("staging", "abandoned"),
        ("embeddings", "v4"),
    } <= kinds

    # the store goes on: a new version on top of the rewritten tables; the kept ones still read the same
    source = store.root.parent / "src-v7"
    write_tree(source, {**TREES[-1], "e.md": paragraphs("e", 1)})
    result = ingest(source, store, version="v7", config=CONFIG)
    assert result.created and result.manifest.parent == "v6" and result.n_parsed == 1
    assert set(store.read_chunks("v7")["doc_id"]) == set(before["v6"][0]["doc_id"]) | {"e.md"}
    assert_reads_as_before(store, {v: before[v] for v in summary.kept})
    assert store.exported_versions("chunks") == {"v7"}


def test_a_second_gc_prunes_what_is_no_longer_pinned_and_keeps_reads_exact(store: CorpusStore) -> None:
    before = snapshot(store, VERSIONS)
    assert retention.gc(store, keep_last=2, keep=["v1"]).pruned == ["v4"]
    again = retention.gc(store, keep_last=1)
    assert again.pruned == ["v1", "v5"] and list(again.kept) == ["v2", "v3", "v6"]
    assert_reads_as_before(store, {v: before[v] for v in again.kept})
    settled = retention.gc(store, keep_last=1)  # nothing to prune: no rewrite, nothing removed
    assert settled.pruned == [] and not settled.lance_rewritten and settled.removed == []
    assert_reads_as_before(store, {v: before[v] for v in settled.kept})


def test_dry_run_changes_nothing_and_says_what_would_go(store: CorpusStore) -> None:
    before = files(store.root)
    summary = retention.gc(store, keep_last=1, dry_run=True)
    assert files(store.root) == before
    assert summary.dry_run and summary.pruned == ["v1", "v4", "v5"]
    assert summary.bytes_freed == sum(r.bytes for r in summary.removed) > 0
    assert "would prune 3 corpus version(s): v1, v4, v5" in summary.text()
    assert [m.name for m in store.versions()] == VERSIONS


def test_gc_waits_for_the_writer_lock(store: CorpusStore) -> None:
    holder = hold_lock(store.root, None)
    try:
        with pytest.raises(StoreLocked):
            retention.gc(store, keep_last=1, lock_timeout=0.2)
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert [m.name for m in store.versions()] == VERSIONS


class Interrupted(RuntimeError):
    pass


@pytest.mark.parametrize("after_steps", [1, 5, 8])
def test_an_interrupted_gc_leaves_every_kept_version_readable(store: CorpusStore, after_steps: int) -> None:
    """Killed during the LanceDB rewrite (after 1 tag moved, after the chunks table, half-way through documents):
    every kept version reads the same, a new version can be committed, and the next gc finishes the job."""
    before = snapshot(store, VERSIONS)
    steps = []

    lance_tags = importlib.import_module("lance.dataset").Tags  # `lance.dataset` itself is a function
    move_tag = lance_tags.update

    def interrupt(tags, name: str, version: int) -> None:  # killed right after a rewritten version's tag moved
        move_tag(tags, name, version)
        steps.append(name)
        if len(steps) == after_steps:
            raise Interrupted(f"killed after {name}")

    with pytest.MonkeyPatch.context() as patch, pytest.raises(Interrupted):
        patch.setattr(lance_tags, "update", interrupt)
        retention.gc(store, keep_last=2, keep=["v1"])
    kept = ["v1", "v2", "v3", "v5", "v6"]
    assert [m.name for m in store.versions()] == kept and store.layout.gc_pending.exists()
    assert_reads_as_before(store, {v: before[v] for v in kept})

    source = store.root.parent / "src-v7"
    write_tree(source, {**TREES[-1], "e.md": paragraphs("e", 1)})
    assert ingest(source, store, version="v7", config=CONFIG).created
    v7 = store.read_chunks("v7")
    assert set(v7["doc_id"]) == set(before["v6"][0]["doc_id"]) | {"e.md"}

    finished = retention.gc(store, keep_last=3, keep=["v1"])
    assert finished.lance_rewritten and not store.layout.gc_pending.exists()
    assert finished.pruned == [] and list(finished.kept) == ["v1", "v2", "v3", "v5", "v6", "v7"]
    assert_reads_as_before(store, {v: before[v] for v in kept})
    assert store.read_chunks("v7").equals(v7)


def test_an_interrupted_gc_before_lancedb_leaves_no_tag_behind(store: CorpusStore, monkeypatch) -> None:
    before = snapshot(store, VERSIONS)
    with monkeypatch.context() as patch:
        patch.setattr(retention, "_prune_lance", lambda *a, **k: (_ for _ in ()).throw(Interrupted("killed")))
        with pytest.raises(Interrupted):
            retention.gc(store, keep_last=1)
    assert [m.name for m in store.versions()] == ["v2", "v3", "v6"]
    assert "v4" in tags(store, "chunks")  # its manifest went first: the version is gone, its tag is left over
    assert_reads_as_before(store, {v: before[v] for v in ("v2", "v3", "v6")})
    summary = retention.gc(store, keep_last=1)
    assert summary.pruned == [] and tags(store, "chunks") == tags(store, "documents") == {"v2", "v3", "v6"}
    assert_reads_as_before(store, {v: before[v] for v in ("v2", "v3", "v6")})


# ---------------------------------------------------------------------- CLI and Dagster


def test_cli_gc(store: CorpusStore) -> None:
    runner = CliRunner()
    unknown = runner.invoke(main, ["gc", "--keep-last", "1", "--keep", "v9", "--store", str(store.root)])
    assert unknown.exit_code != 0 and "unknown corpus version 'v9'" in unknown.output
    dry = runner.invoke(main, ["gc", "--keep-last", "2", "--dry-run", "--json", "--store", str(store.root)])
    assert dry.exit_code == 0, dry.output
    planned = json.loads(dry.output)
    assert planned["dry_run"] and planned["pruned"] == ["v1", "v4"] and planned["bytes_freed"] > 0
    done = runner.invoke(main, ["gc", "--keep-last", "2", "--store", str(store.root)])
    assert done.exit_code == 0, done.output
    assert "pruned 2 corpus version(s): v1, v4" in done.output and "v2" in done.output and "freed" in done.output
    assert [m.name for m in store.versions()] == ["v2", "v3", "v5", "v6"]


def test_gc_settings_from_the_environment() -> None:
    from pipelines.definitions import settings_from_env

    config = settings_from_env({"CITEKEEPER_GC_KEEP_LAST": "7", "CITEKEEPER_GC_KEEP": "v1, release-2026 ,"}).store
    assert (config.gc_keep_last, config.gc_keep) == (7, ["v1", "release-2026"])
    assert settings_from_env({}).store.gc_keep_last is None and settings_from_env({}).store.gc_keep == []
    with pytest.raises(ValueError, match="CITEKEEPER_GC_KEEP_LAST"):
        settings_from_env({"CITEKEEPER_GC_KEEP_LAST": "seven"})


def test_weekly_gc_schedule_is_off_by_default_and_the_job_runs_gc(store: CorpusStore) -> None:
    from pipelines import automation
    from pipelines.definitions import build_definitions
    from tests.dagster_settings import settings

    assert automation.weekly_gc_schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assert automation.weekly_gc_schedule.job_name == "citekeeper_gc"

    def evaluate(config):
        when = datetime(2026, 12, 6, 4, tzinfo=UTC)
        with dg.build_schedule_context(resources=config.resources(), scheduled_execution_time=when) as context:
            return automation.weekly_gc_schedule.evaluate_tick(context)

    unset = evaluate(settings(store_dir=str(store.root)))
    assert not unset.run_requests and "gc_keep_last is not set" in unset.skip_message
    config = settings(store_dir=str(store.root), gc_keep_last=1, gc_keep=["v5"])
    (request,) = evaluate(config).run_requests
    assert request.run_key == "gc-20261206T040000Z"

    before = snapshot(store, ["v2", "v3", "v5", "v6"])
    job = build_definitions(config).resolve_job_def("citekeeper_gc")
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("corpus_version", VERSIONS)
    result = job.execute_in_process(instance=instance)
    assert result.success
    assert instance.get_dynamic_partitions("corpus_version") == ["v2", "v3", "v5", "v6"]
    assert [m.name for m in store.versions()] == ["v2", "v3", "v5", "v6"]
    assert_reads_as_before(store, before)
    (output,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    assert output.event_specific_data.metadata["pruned"].value == ["v1", "v4"]
    assert output.event_specific_data.metadata["bytes_freed"].value > 0
    from assets.citations import chunk_diff  # v5's parent v4 is gone: its diff has nothing to compare with

    diffed = dg.materialize([chunk_diff], partition_key="v5", resources=config.resources(), instance=instance)
    assert (
        diffed.asset_materializations_for_node("chunk_diff")[0].metadata["note"].value
        == "parent v4 was pruned by gc: nothing to diff"
    )
