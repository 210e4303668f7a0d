"""Parsing in a pool of worker processes: the same version as a serial parse, and a real per-document time
limit (the worker is killed, the document quarantined, the pool goes on). Parse results stream through
stage and commit in batches: what either holds is bounded by the batch size, not by the tree."""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

import parsers.ingest
from citekeeper.store import CorpusStore
from parsers.discover import discover_sources
from parsers.ingest import _load_staged, commit, ingest, stage, staged_rows
from parsers.parse_pool import iter_outcomes
from parsers.records import ParseConfig
from tests.conftest import SAMPLE_CORPUS

VOLATILE = ["ingested_at", "corpus_version"]


def parse_sources(sources, config):
    """Every outcome of iter_outcomes, put back in source order."""
    outcomes = [None] * len(sources)
    for index, outcome in iter_outcomes(sources, config):
        outcomes[index] = outcome
    return outcomes


def slow_markdown(n_paragraphs: int = 3000) -> str:
    """Takes unstructured ~8 s on an idle development core (spaCy runs on every paragraph)."""
    return "\n\n".join(
        f"Paragraph {i} has a sentence about item {i}. And another one follows it." for i in range(n_paragraphs)
    )


def comparable(store: CorpusStore, version: str) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    return (
        store.read_chunks(version).drop(VOLATILE),
        store.read_documents(version).drop(VOLATILE),
        store.read_errors(version).drop(["occurred_at", "corpus_version"]),
    )


def test_pool_and_serial_parse_give_the_same_version(tmp_path: Path) -> None:
    source = SAMPLE_CORPUS / "v1"  # markdown, HTML, PDF, DOCX, text
    serial, pooled = CorpusStore(tmp_path / "serial"), CorpusStore(tmp_path / "pooled")
    seen: list[tuple[str, int, int]] = []
    ingest(source, serial, version="v1", config=ParseConfig(workers=1))
    result = ingest(
        source,
        pooled,
        version="v1",
        config=ParseConfig(workers=2),
        progress=lambda path, done, total: seen.append((path, done, total)),
    )
    assert result.created and result.n_parsed > 4
    for a, b in zip(comparable(serial, "v1"), comparable(pooled, "v1")):
        assert a.equals(b)
    assert serial.manifest("v1").corpus_hash == pooled.manifest("v1").corpus_hash
    assert [done for _, done, _ in seen] == list(range(1, result.n_parsed + 1))
    assert {total for _, _, total in seen} == {result.n_parsed}
    assert multiprocessing.active_children() == []  # every worker was joined


def test_a_document_past_its_time_limit_has_its_worker_killed_and_the_pool_goes_on(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "a-slow.md").write_text(slow_markdown())
    (source / "a-slow-copy.md").write_text(slow_markdown())  # parsed after its original, by the same worker
    for name in ("b", "c", "d", "e"):
        (source / f"{name}.md").write_text(f"# {name}\n\nThe {name} document says one thing. Then another.\n")
    store = CorpusStore(tmp_path / "store")
    started = time.monotonic()
    result = ingest(source, store, config=ParseConfig(workers=2, parse_timeout_s=2.0))
    elapsed = time.monotonic() - started

    # the copy the killed worker had not reached went to a fresh worker, and ran out of time there too
    assert [(e.source_path, e.stage, e.error_type) for e in result.errors] == [
        ("a-slow-copy.md", "parse", "ParseTimeout"),
        ("a-slow.md", "parse", "ParseTimeout"),
    ]
    assert all(
        "longer than 2 s (parse_timeout_s)" in e.reason and "worker process was killed" in e.reason
        for e in result.errors
    )
    assert result.created and result.n_parsed == 4  # the others were parsed, by the other worker or a new one
    assert sorted(store.read_documents(result.manifest.name)["doc_id"]) == ["b.md", "c.md", "d.md", "e.md"]
    assert multiprocessing.active_children() == []
    assert elapsed < 60, elapsed  # not the slow document's full parse on a loaded machine


def test_a_worker_that_dies_quarantines_its_document(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "slow.md").write_text(slow_markdown())
    (slow,) = discover_sources(source, ParseConfig())[0]

    def kill_the_worker() -> None:  # what the out-of-memory killer would do
        deadline = time.monotonic() + 60
        while not multiprocessing.active_children() and time.monotonic() < deadline:
            time.sleep(0.05)
        for worker in multiprocessing.active_children():
            worker.kill()

    killer = threading.Thread(target=kill_the_worker)
    killer.start()
    (outcome,) = parse_sources([slow], ParseConfig(workers=2))
    killer.join()
    assert (outcome.source_path, outcome.stage, outcome.error_type) == ("slow.md", "parse", "WorkerDied")
    assert "killed by signal 9" in outcome.reason


def test_stage_and_commit_hold_one_batch_and_give_the_version_of_a_single_batch(tmp_path: Path, monkeypatch) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for i in range(7):
        (source / f"doc-{i}.md").write_text(
            f"# Doc {i}\n\nDocument {i} says one thing. Then another.\n\n## More\n\nA part {i}.\n"
        )
    (source / "bad.xyz").write_text("no parser")
    whole, batched = CorpusStore(tmp_path / "whole"), CorpusStore(tmp_path / "batched")
    ingest(source, whole, version="v1", config=ParseConfig(workers=1), batch_size=1000)

    tabled: list[int] = []  # documents per chunk table a stage builds: one batch at a time
    chunk_table = parsers.ingest.chunk_table
    monkeypatch.setattr(
        parsers.ingest, "chunk_table", lambda docs, at: tabled.append(len(docs)) or chunk_table(docs, at)
    )
    staged = stage(source, batched, "v1", config=ParseConfig(workers=2), batch_size=3)
    assert staged.n_parsed == 7 and sorted(tabled) == [1, 3, 3]
    row_groups = [
        pq.ParquetFile(staged.path / f"{table}.parquet").metadata.num_row_groups for table in ("chunks", "documents")
    ]
    assert row_groups == [3, 3]
    loaded = _load_staged(batched, "v1", 1)
    assert max(batch.num_rows for batch in staged_rows(loaded, "chunks", batch_size=2)) <= 2
    commit(batched, "v1", batch_size=2)
    for a, b in zip(comparable(whole, "v1"), comparable(batched, "v1")):
        assert a.equals(b)


def test_outcomes_stream_as_they_are_done(tmp_path: Path) -> None:
    """iter_outcomes hands on each outcome as it comes (the first long before the last document is parsed)
    with its index, and parse_sources puts them back in source order."""
    source = tmp_path / "src"
    source.mkdir()
    for i in range(6):
        (source / f"doc-{i}.md").write_text(f"# Doc {i}\n\nDocument {i} has text.\n")
    sources, _ = discover_sources(source, ParseConfig())
    seen: list[int] = []
    stream = iter_outcomes(sources, ParseConfig(workers=1), progress=lambda path, done, total: seen.append(done))
    index, first = next(stream)
    assert seen == [1] and first.source.doc_id == sources[index].doc_id  # one parsed, five to go
    rest = dict(stream)
    assert sorted([index, *rest]) == list(range(6))
    assert [o.source.doc_id for o in parse_sources(sources, ParseConfig(workers=2))] == [s.doc_id for s in sources]
