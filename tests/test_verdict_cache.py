"""The NLI verdict cache (verifiers.verdict_cache): one LanceDB table upserted by key. Lookups read only the
keys asked for; concurrent flushes from real processes lose and duplicate nothing; conflicts past Lance's own
retries are retried, boundedly."""

from __future__ import annotations

import multiprocessing
from datetime import UTC, datetime
from pathlib import Path

import lancedb
import polars as pl
import pytest

from verifiers import verdict_cache
from verifiers.verdict_cache import KEY, TABLE, VALUES, VerdictCache, no_hits

MODEL, SETTINGS = "nli-model@rev/torch", "entail>=0.5"


def verdicts(ids, p: float = 0.9, prefix: str = "") -> pl.DataFrame:
    """What the engine adds: one row per (claim_hash, evidence_hash) with the scored values."""
    ids = list(ids)
    return pl.DataFrame(
        {
            "claim_hash": [f"sha256:claim{prefix}{i}" for i in ids],
            "evidence_hash": [f"sha256:evidence{prefix}{i}" for i in ids],
            "p_entailment": [p] * len(ids),
            "p_neutral": [(1 - p) / 2] * len(ids),
            "p_contradiction": [None if i % 3 == 0 else (1 - p) / 2 for i in ids],
            "window_start": [i for i in ids],
            "window_end": [i + 100 for i in ids],
            "n_windows": [1] * len(ids),
        },
        schema_overrides={
            "window_start": pl.Int64,
            "window_end": pl.Int64,
            "n_windows": pl.Int32,
            "p_contradiction": pl.Float64,
        },
    )


def keys_of(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select("claim_hash", "evidence_hash")


def stored(directory: Path) -> pl.DataFrame:
    return pl.from_arrow(lancedb.connect(str(directory)).open_table(TABLE).to_arrow())


def sort(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort("claim_hash", "evidence_hash")


def test_lookup_returns_what_was_flushed_per_model_and_settings(tmp_path):
    cache = VerdictCache(tmp_path / "cache")
    wanted = keys_of(verdicts(range(10)))
    assert cache.lookup(MODEL, SETTINGS, wanted).equals(no_hits())  # nothing stored yet
    assert not (tmp_path / "cache").exists()  # a lookup creates nothing
    assert cache.flush("r0") is None  # nothing added

    cache.add(MODEL, SETTINGS, verdicts(range(6)))
    assert cache.flush("r1") == tmp_path / "cache" / f"{TABLE}.lance"
    # the merge key is the table's primary key: what makes Lance detect concurrent inserts of one key
    schema = lancedb.connect(str(tmp_path / "cache")).open_table(TABLE).schema
    assert schema.field("cache_key").metadata == {b"lance-schema:unenforced-primary-key": b"true"}
    hits = VerdictCache(tmp_path / "cache").lookup(MODEL, SETTINGS, wanted)
    assert hits.schema == no_hits().schema
    assert sort(hits).equals(verdicts(range(6)).select(KEY[2:] + VALUES))  # nulls (p_contradiction) kept
    assert VerdictCache(tmp_path / "cache").lookup("other-model@rev/torch", SETTINGS, wanted).is_empty()
    assert VerdictCache(tmp_path / "cache").lookup(MODEL, "entail>=0.7", wanted).is_empty()


def test_a_key_flushed_again_is_updated_not_duplicated(tmp_path):
    cache = VerdictCache(tmp_path)
    cache.add(MODEL, SETTINGS, verdicts(range(5), p=0.9))
    cache.flush("r1")
    cache.add(MODEL, SETTINGS, verdicts(range(3, 8), p=0.2))
    cache.add(MODEL, SETTINGS, verdicts([7], p=0.3))  # the same key twice in one flush: the last one wins
    cache.flush("r2")
    rows = stored(tmp_path)
    assert rows.height == 8 and rows["cache_key"].n_unique() == 8
    hits = sort(cache.lookup(MODEL, SETTINGS, keys_of(verdicts(range(10)))))
    assert hits["p_entailment"].to_list() == [0.9, 0.9, 0.9, 0.2, 0.2, 0.2, 0.2, 0.3]


def test_a_point_lookup_reads_only_the_requested_keys(tmp_path, monkeypatch):
    monkeypatch.setattr(verdict_cache, "INDEX_MIN_ROWS", 1000)
    cache = VerdictCache(tmp_path)
    cache.add(MODEL, SETTINGS, verdicts(range(3000)))
    cache.flush("r1")  # creates the cache_key index
    assert [i.name for i in lancedb.connect(str(tmp_path)).open_table(TABLE).list_indices()] == [verdict_cache.INDEX]
    wanted = keys_of(verdicts([5, 17, 2999, 123456]))  # the last one is not cached

    monkeypatch.setattr(verdict_cache, "POINT_LOOKUP_RATIO", 500)
    point = cache.lookup(MODEL, SETTINGS, wanted)  # 4 keys for 3,000 rows: the point plan
    assert cache.last_read["plan"] == "point" and cache.last_read["hits"] == 3
    assert cache.last_read["rows_scanned"] == 3  # Lance read the three rows found, nothing else
    monkeypatch.setattr(verdict_cache, "POINT_LOOKUP_RATIO", 10**9)
    scan = cache.lookup(MODEL, SETTINGS, wanted)
    assert cache.last_read["plan"] == "scan" and cache.last_read["rows_scanned"] == 3000
    assert sort(point).equals(sort(scan)) and point.height == 3

    # rows flushed after the index was built are found too (scanned until the index takes them in)
    cache.add(MODEL, SETTINGS, verdicts(range(3000, 3100)))
    cache.flush("r2")  # 100 unindexed rows: under a tenth, the index stays as it is
    monkeypatch.setattr(verdict_cache, "POINT_LOOKUP_RATIO", 1000)
    hits = cache.lookup(MODEL, SETTINGS, keys_of(verdicts([1, 3050])))
    assert cache.last_read["plan"] == "point" and hits.height == 2
    assert cache.last_read["rows_scanned"] <= 1 + 100


def test_many_keys_are_looked_up_in_one_scan_with_the_same_result(tmp_path, monkeypatch):
    monkeypatch.setattr(verdict_cache, "INDEX_MIN_ROWS", 1000)
    monkeypatch.setattr(verdict_cache, "LOOKUP_BATCH", 7)  # batched IN filters
    monkeypatch.setattr(verdict_cache, "SCAN_BATCH_ROWS", 500)
    cache = VerdictCache(tmp_path)
    cache.add(MODEL, SETTINGS, verdicts(range(2000)))
    cache.flush("r1")
    wanted = keys_of(verdicts(range(1800, 2100)))
    scan = cache.lookup(MODEL, SETTINGS, wanted)
    assert cache.last_read["plan"] == "scan" and scan.height == 200
    monkeypatch.setattr(verdict_cache, "POINT_LOOKUP_RATIO", 0)
    point = cache.lookup(MODEL, SETTINGS, wanted)
    assert cache.last_read["plan"] == "point"
    assert sort(scan).equals(sort(point))
    assert sort(scan).equals(sort(verdicts(range(1800, 2000)).select(KEY[2:] + VALUES)))


def test_compaction_keeps_every_verdict(tmp_path, monkeypatch):
    monkeypatch.setattr(verdict_cache, "COMPACT_FRAGMENTS", 4)
    monkeypatch.setattr(verdict_cache, "INDEX_MIN_ROWS", 10)
    cache = VerdictCache(tmp_path)
    for run in range(6):
        cache.add(MODEL, SETTINGS, verdicts(range(run * 10, run * 10 + 15), p=run / 10))  # overlapping runs
        cache.flush(f"r{run}")
    table = lancedb.connect(str(tmp_path)).open_table(TABLE)
    assert len(table.to_lance().get_fragments()) < 4
    rows = stored(tmp_path)
    assert rows.height == 65 and rows["cache_key"].n_unique() == 65
    monkeypatch.setattr(verdict_cache, "POINT_LOOKUP_RATIO", 0)
    hits = cache.lookup(MODEL, SETTINGS, keys_of(verdicts(range(65))))
    p = {int(c.removeprefix("sha256:claim")): p for c, p in hits.select("claim_hash", "p_entailment").iter_rows()}
    assert len(p) == 65  # the last run wins:
    assert [p[i] for i in (0, 9, 10, 19, 20, 64)] == [0.0, 0.0, 0.1, 0.1, 0.2, 0.5]


# ---------------------------------------------------------------------- concurrent writers


def _flush_rounds(directory: str, writer: str, rounds: list[list[int]], barrier, done) -> None:
    """A child process: open the cache, then flush each round's verdicts (p marks the writer); every writer
    opens and starts each flush at the same moment."""
    p = {"a": 0.25, "b": 0.75}[writer]
    barrier.wait()
    cache = VerdictCache(directory)
    for ids in rounds:
        cache.add(MODEL, SETTINGS, verdicts(ids, p=p))
        barrier.wait()
        cache.flush(f"{writer}-{ids[0]}")  # the first one creates the table, if none
    done.put((writer, cache.merge_attempts))


def _run_writers(directory: Path, plans: dict[str, list[list[int]]], timeout: float = 240) -> dict[str, int]:
    """Run one child per writer; returns each one's merge attempts (more than its flushes: it lost races)."""
    ctx = multiprocessing.get_context("spawn")
    barrier, done = ctx.Barrier(len(plans), timeout=timeout), ctx.Queue()
    children = [ctx.Process(target=_flush_rounds, args=(str(directory), w, r, barrier, done)) for w, r in plans.items()]
    for child in children:
        child.start()
    attempts = dict(done.get(timeout=timeout) for _ in children)
    for child in children:
        child.join(timeout=30)
        assert child.exitcode == 0
    assert sorted(attempts) == sorted(plans)
    print(f"merge attempts per writer: {attempts}")
    return attempts


def assert_each_verdict_once(directory: Path, expected_ids: set[int], writers_of: dict[int, set[float]]) -> None:
    rows = stored(directory)
    assert rows.height == len(expected_ids), "a verdict was lost or stored twice"
    assert rows["cache_key"].n_unique() == rows.height
    ids = {int(h.removeprefix("sha256:claim")) for h in rows["claim_hash"]}
    assert ids == expected_ids
    for claim, p in rows.select("claim_hash", "p_entailment").iter_rows():
        assert p in writers_of[int(claim.removeprefix("sha256:claim"))]


@pytest.mark.parametrize("indexed", [False, True], ids=["new-table", "indexed-table"])
def test_two_processes_flushing_at_once_lose_and_duplicate_nothing(tmp_path, monkeypatch, indexed):
    """Disjoint keys (a: 0-99 and 200-..., b: 300-...) and overlapping ones (100-199, flushed by both in the
    same rounds), five flushes each. Without a table, both create it; with one, it already has an index (the
    merge must still detect concurrent inserts of the same new key)."""
    if indexed:
        monkeypatch.setattr(verdict_cache, "INDEX_MIN_ROWS", 10)
        seed = VerdictCache(tmp_path)
        seed.add(MODEL, SETTINGS, verdicts(range(1000, 1050), p=0.5))
        seed.flush("seed")
        assert lancedb.connect(str(tmp_path)).open_table(TABLE).list_indices()
    overlap = [list(range(100 + 20 * r, 120 + 20 * r)) for r in range(5)]
    plans = {
        "a": [[*range(20 * r, 20 * r + 20), *overlap[r], *range(200 + 10 * r, 210 + 10 * r)] for r in range(5)],
        "b": [overlap[r] + list(range(300 + 20 * r, 320 + 20 * r)) for r in range(5)],
    }
    _run_writers(tmp_path, plans)
    writers_of: dict[int, set[float]] = {}
    for writer, rounds in plans.items():
        for ids in rounds:
            for i in ids:
                writers_of.setdefault(i, set()).add({"a": 0.25, "b": 0.75}[writer])
    if indexed:
        writers_of.update({i: {0.5} for i in range(1000, 1050)})
    assert_each_verdict_once(tmp_path, set(writers_of), writers_of)


# ---------------------------------------------------------------------- the bounded retry


class FlakyTable:
    """A table whose merges fail `failures` times with `error`, then succeed."""

    def __init__(self, failures: int, error: Exception):
        self.failures, self.error, self.merges, self.refreshes = failures, error, 0, 0

    def merge_insert(self, on):
        assert on == "cache_key"
        return self

    def when_matched_update_all(self):
        return self

    def when_not_matched_insert_all(self):
        return self

    def use_index(self, use_index):
        assert use_index is False
        return self

    def execute(self, data):
        self.merges += 1
        if self.merges <= self.failures:
            raise self.error

    def checkout_latest(self):
        self.refreshes += 1


def test_an_upsert_that_keeps_losing_to_other_writers_is_retried_a_bounded_number_of_times(tmp_path, monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)  # tenacity sleeps with time.sleep
    rows = verdicts(range(3)).with_columns(
        model_key=pl.lit(MODEL), settings_key=pl.lit(SETTINGS), created_at=pl.lit(datetime.now(UTC))
    )
    cache = VerdictCache(tmp_path)
    lost = RuntimeError("lance error: Too many concurrent writers. Attempted 10 times, but failed on retry_timeout")
    table = FlakyTable(2, lost)
    cache._upsert(table, rows, "test")
    assert table.merges == 3 and table.refreshes == 2

    table = FlakyTable(99, RuntimeError("Runtime error: merge insert timed out"))
    with pytest.raises(RuntimeError, match="timed out"):
        cache._upsert(table, rows, "test")
    assert table.merges == verdict_cache.MERGE_ATTEMPTS

    table = FlakyTable(1, RuntimeError("lance error: schema mismatch"))  # not a conflict: no retry
    with pytest.raises(RuntimeError, match="schema"):
        cache._upsert(table, rows, "test")
    assert table.merges == 1
