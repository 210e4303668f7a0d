"""A changed document under the source root triggers the sensor, which adds a corpus-version partition
and requests a run; that run materializes ingest and every downstream asset of the new version."""

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import polars as pl

from citekeeper.answers.store import AnswerStore
from citekeeper.layout import latest_run_dir
from citekeeper.store import CorpusStore
from parsers.discover import discover_sources
from parsers.ingest import ingest
from parsers.records import ParseConfig
from parsers.source_tree import source_fingerprint
from pipelines.automation import equal_version, nightly_reindex_schedule, source_change_sensor
from pipelines.definitions import build_definitions
from tests.dagster_settings import settings

GUIDE = "# Guide\n\nInstall the client with pip.\n\n## Usage\n\nCall get() with a URL.\n"
FAQ_V1 = "# FAQ\n\nTimeouts default to five seconds.\n"
FAQ_V2 = "# FAQ\n\nTimeouts default to ten seconds since the last release.\n"


def _tick(defs: dg.Definitions, instance: dg.DagsterInstance, cursor: str | None):
    """Evaluate the sensor as the daemon does, and apply its dynamic-partition requests."""
    context = dg.build_sensor_context(
        instance=instance, instance_ref=instance.get_ref(), cursor=cursor, definitions=defs, resources=defs.resources
    )
    data = source_change_sensor.evaluate_tick(context)
    for request in data.dynamic_partitions_requests:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return data


def _run(defs: dg.Definitions, instance: dg.DagsterInstance, request: dg.RunRequest) -> dg.ExecuteInProcessResult:
    job = defs.resolve_job_def(request.job_name or "citekeeper_pipeline")
    return job.execute_in_process(partition_key=request.partition_key, instance=instance, tags=request.tags)


# Observability: what each materialization must record in Dagster (counts, quarantine, model use, durations).
REQUIRED_METADATA = {
    "documents": {"n_documents", "n_quarantined", "quarantined", "stage_seconds", "commit_seconds"},
    "chunks": {"n_chunks"},
    "chunk_diff": {"duration_s"},
    "citation_status": {"n_citations", "duration_s"},
    "stale_report": {"path", "duration_s"},
    "verification": {"status_counts", "model_calls", "cache_hits", "duration_s"},
}


def _metadata(instance: dg.DagsterInstance, key: str, partition: str) -> dict:
    (record,) = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(key), asset_partitions=[partition]), limit=1
    ).records
    return record.asset_materialization.metadata


def _register_answer_on_faq(store: CorpusStore, version: str, path: Path) -> None:
    """An answer quoting the FAQ sentence that the test then edits (what `citekeeper answers add` does)."""
    chunks = store.read_chunks(version)
    faq = chunks.filter(pl.col("text").str.contains("five seconds", literal=True))
    path.write_text(
        json.dumps(
            {
                "answer_id": "timeouts",
                "question": "What is the default timeout?",
                "corpus_version": version,
                "answer": "Timeouts default to five seconds.",
                "claims": [
                    {
                        "text": "Timeouts default to five seconds.",
                        "citations": [{"chunk_id": faq["chunk_id"][0], "quote": "Timeouts default to five seconds."}],
                    }
                ],
            }
        )
        + "\n"
    )
    assert AnswerStore(store.root).add(path).n_registered == 1


def _materialized_keys(instance: dg.DagsterInstance, keys, partition: str) -> set[dg.AssetKey]:
    return {
        key
        for key in keys
        if instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1
        ).records
    }


def test_fingerprint_uses_stat_only(tmp_path: Path):
    doc = tmp_path / "a.md"
    doc.write_text("x")
    os.utime(doc, ns=(10**18, 10**18))
    before = source_fingerprint(tmp_path, ParseConfig())
    doc.write_text("y")  # same size, same mtime below: invisible to a stat-only fingerprint
    os.utime(doc, ns=(10**18, 10**18))
    assert source_fingerprint(tmp_path, ParseConfig()) == before
    os.utime(doc, ns=(10**18, 10**18 + 1))
    assert source_fingerprint(tmp_path, ParseConfig()) != before
    (tmp_path / "b.md").write_text("")
    assert source_fingerprint(tmp_path, ParseConfig()) != before


def test_fingerprint_covers_the_files_discovery_sees_and_no_others(tmp_path: Path):
    """Each edit below that discovery would not see leaves the fingerprint as it was; a sidecar, read with its
    document, changes it."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    for path in (root / "faq.md", root / "drafts" / "wip.md", root / ".git" / "HEAD", outside / "guide.md"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(FAQ_V1)
    (root / "linked").symlink_to(outside, target_is_directory=True)  # out of the root: rejected, never followed
    config = ParseConfig(exclude=("drafts/**",))
    before = source_fingerprint(root, config)
    for unseen in (root / "drafts" / "wip.md", root / ".git" / "HEAD", outside / "guide.md"):
        unseen.write_text(FAQ_V2)
        assert source_fingerprint(root, config) == before, unseen
    (root / "faq.md.citekeeper.json").write_text('{"access_scope": "internal_only"}')
    assert source_fingerprint(root, config) != before


def test_a_retargeted_directory_link_is_a_change_to_the_sensor(tmp_path: Path):
    """Discovery follows a directory link inside the root, and so does the sensor: pointing `current` at another
    release changes the documents under it though no file under the root changed."""
    source = tmp_path / "source"
    for release, faq in (("v1", FAQ_V1), ("v2", FAQ_V2)):
        (source / "releases" / release).mkdir(parents=True)
        (source / "releases" / release / "faq.md").write_text(faq)
    (source / "current").symlink_to(source / "releases" / "v1", target_is_directory=True)
    configured = settings(store_dir=str(tmp_path / "store"), source_dir=str(source), exclude=["releases/**"])
    defs = build_definitions(configured)

    with dg.instance_for_test() as instance:
        first = _tick(defs, instance, cursor=None)
        assert len(first.run_requests) == 1
        (source / "current").unlink()
        (source / "current").symlink_to(source / "releases" / "v2", target_is_directory=True)
        retargeted = _tick(defs, instance, cursor=first.cursor)
        assert len(retargeted.run_requests) == 1, retargeted.skip_message
    sources, _ = discover_sources(source, configured.ingest.parse_config())
    assert [(s.source_path, s.path.read_text()) for s in sources] == [("current/faq.md", FAQ_V2)]


def test_changed_document_triggers_new_version_with_downstream_assets(tmp_path: Path):
    source = tmp_path / "source"
    source.mkdir()
    (source / "guide.md").write_text(GUIDE)
    (source / "faq.md").write_text(FAQ_V1)
    defs = build_definitions(settings(store_dir=str(tmp_path / "store"), source_dir=str(source)))
    job_keys = defs.resolve_job_def("citekeeper_pipeline").asset_layer.executable_asset_keys
    store = CorpusStore(tmp_path / "store")

    with dg.instance_for_test() as instance:
        first = _tick(defs, instance, cursor=None)
        (request_v1,) = first.run_requests
        assert instance.get_dynamic_partitions("corpus_version") == [request_v1.partition_key]
        assert _run(defs, instance, request_v1).success
        _register_answer_on_faq(store, request_v1.partition_key, tmp_path / "answers.jsonl")

        unchanged = _tick(defs, instance, cursor=first.cursor)
        assert not unchanged.run_requests and "no change" in unchanged.skip_message
        os.utime(source / "guide.md", ns=(10**18, 10**18))  # touched, same bytes
        touched = _tick(defs, instance, cursor=first.cursor)
        assert not touched.run_requests and request_v1.partition_key in touched.skip_message
        assert touched.cursor != first.cursor

        (source / "faq.md").write_text(FAQ_V2)
        changed = _tick(defs, instance, cursor=touched.cursor)
        (request_v2,) = changed.run_requests
        v1, v2 = request_v1.partition_key, request_v2.partition_key
        assert instance.get_dynamic_partitions("corpus_version") == [v1, v2]
        result = _run(defs, instance, request_v2)
        assert result.success
        assert _materialized_keys(instance, job_keys, v2) == set(job_keys)
        assert {dg.AssetKey(k) for k in REQUIRED_METADATA} <= set(job_keys)
        for key, required in REQUIRED_METADATA.items():
            assert required <= set(_metadata(instance, key, v2)), key
        diff_counts = {k: v.value for k, v in _metadata(instance, "chunk_diff", v2).items() if k.startswith("chunks_")}
        assert sum(diff_counts.values()) > 0, diff_counts  # the changed faq.md shows up in the diff

    assert [m.name for m in store.versions()] == [v1, v2]
    assert store.manifest(v2).parent == v1
    chunks_v1 = store.read_chunks(v1)  # time travel: only the latest version (v2) keeps a Parquet export
    chunks_v2 = pl.read_parquet(store.parquet_path("chunks", v2))
    assert any("ten seconds" in text for text in chunks_v2["text"])
    guide_ids = lambda chunks: set(chunks.filter(pl.col("source_path") == "guide.md")["chunk_id"])  # noqa: E731
    assert guide_ids(chunks_v1) == guide_ids(chunks_v2)
    # the change reached the answers: the citation on the edited sentence went stale and was re-verified
    status = pl.read_parquet(store.layout.citation_status_file(v2))
    assert status["status"].to_list() == ["stale"]
    claims = pl.read_parquet(latest_run_dir(store.layout.runs_dir, v2) / "claims.parquet")
    assert claims["answer_id"].to_list() == ["timeouts"] and claims["corpus_version"].to_list() == [v2]


def test_nightly_schedule_reindexes_changed_tree_and_skips_unchanged(tmp_path: Path):
    source = tmp_path / "source"
    source.mkdir()
    (source / "faq.md").write_text(FAQ_V1)
    defs = build_definitions(settings(store_dir=str(tmp_path / "store"), source_dir=str(source)))
    night = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)

    def tick(when: datetime):
        with dg.build_schedule_context(
            instance=instance,
            instance_ref=instance.get_ref(),
            scheduled_execution_time=when,
            resources=defs.resources,
            repository_def=defs.get_repository_def(),
        ) as context:
            return nightly_reindex_schedule.evaluate_tick(context)

    with dg.instance_for_test() as instance:
        (request,) = tick(night).run_requests
        assert request.partition_key == "nightly-20261130T020000Z"
        assert instance.get_dynamic_partitions("corpus_version") == [request.partition_key]
        job = defs.resolve_job_def("citekeeper_ingest")
        assert job.execute_in_process(partition_key=request.partition_key, instance=instance).success

        unchanged = tick(night + timedelta(days=1))
        assert not unchanged.run_requests and "nightly-20261130T020000Z" in unchanged.skip_message
        (source / "faq.md").write_text(FAQ_V2)
        (changed,) = tick(night + timedelta(days=2)).run_requests
        assert changed.partition_key == "nightly-20261202T020000Z"
    assert [m.name for m in CorpusStore(tmp_path / "store").versions()] == ["nightly-20261130T020000Z"]


def test_a_scope_flip_or_new_globs_are_changes_to_the_sensor(tmp_path: Path):
    source = tmp_path / "source"
    source.mkdir()
    (source / "faq.md").write_text(FAQ_V1)
    (source / "drafts").mkdir()
    (source / "drafts" / "wip.md").write_text(GUIDE)
    configured = settings(
        store_dir=str(tmp_path / "store"), source_dir=str(source), exclude=["drafts/**"], parse_workers=1
    )
    store, config = configured.store, configured.ingest
    assert config.parse_config() == ParseConfig(exclude=("drafts/**",), workers=1)
    ingest(source, store.corpus_store(), config=config.parse_config())
    assert equal_version(store, config) == "v0001"
    assert equal_version(store, config.model_copy(update={"parse_workers": 2})) == "v0001"  # not a parse setting

    (source / "faq.md.citekeeper.json").write_text('{"access_scope": "internal_only"}')
    assert equal_version(store, config) is None  # same bytes, new scope: a new version is due
    (source / "faq.md.citekeeper.json").unlink()
    assert equal_version(store, config.model_copy(update={"exclude": []})) is None  # drafts/wip.md joins the tree

    other = config.model_copy(update={"include": ["**/*.md"]}).parse_config()
    assert source_fingerprint(source, config.parse_config()) != source_fingerprint(source, other)


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    """Write `files` into the clone and commit them; the commit's id."""
    for name, text in files.items():
        (repo / name).write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", message], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def test_a_git_branch_is_watched_by_its_commit(tmp_path: Path):
    """The sensor over git:REPO@main: a new commit is a change (whatever its files' mtimes), the same commit is
    none, and the version records the commit it was made from."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    first_commit = _commit(repo, {"guide.md": GUIDE, "faq.md": FAQ_V1}, "first")
    defs = build_definitions(settings(store_dir=str(tmp_path / "store"), source_dir=f"git:{repo}@main"))
    store = CorpusStore(tmp_path / "store")
    with dg.instance_for_test() as instance:
        first = _tick(defs, instance, cursor=None)
        (request_v1,) = first.run_requests
        assert _run(defs, instance, request_v1).success
        assert store.manifest(request_v1.partition_key).source_revision == first_commit

        (repo / "faq.md").write_text(FAQ_V2)  # in the working tree only: not the ref's tree
        assert "no change" in _tick(defs, instance, cursor=first.cursor).skip_message
        second_commit = _commit(repo, {}, "faq: ten seconds")
        changed = _tick(defs, instance, cursor=first.cursor)
        (request_v2,) = changed.run_requests
        assert _run(defs, instance, request_v2).success
    v2 = store.manifest(request_v2.partition_key)
    assert (v2.source_revision, v2.parent, v2.n_parsed, v2.n_reused) == (second_commit, request_v1.partition_key, 1, 1)
    assert any("ten seconds" in text for text in store.read_chunks(v2.name)["text"])
