"""Persistent cache of NLI verdicts, keyed by (model, settings, claim text hash, evidence text hash): one LanceDB
table that runs and shards share, so a pair whose claim and evidence are unchanged never reaches the model
again (docs/verification.md, "Bulk and incremental")."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pyarrow as pa
import tenacity

from citekeeper.schema import NLI_CACHE
from citekeeper.tables import empty, to_arrow, to_frame

log = logging.getLogger(__name__)

KEY = ["model_key", "settings_key", "claim_hash", "evidence_hash"]
VALUES = ["p_entailment", "p_neutral", "p_contradiction", "window_start", "window_end", "n_windows"]
MERGE_KEY = "cache_key"
TABLE = "verdicts"
INDEX = "cache_key_idx"

POINT_LOOKUP_RATIO = 1000  # point lookups for at most one key per this many stored rows
LOOKUP_BATCH = 1000  # keys per IN filter
SCAN_BATCH_ROWS = 65_536  # stored rows per batch of a scan lookup
INDEX_MIN_ROWS = 100_000  # below this a scan costs next to nothing, and point lookups would take < 100 keys
MERGE_ATTEMPTS = 6  # whole-merge attempts, each with Lance's own conflict retries inside
COMPACT_FRAGMENTS = 32
KEEP_VERSIONS = timedelta(hours=1)  # a lookup holds its version for seconds, a flush's merge plan for minutes

# Lance's marker for an unenforced primary key.
PRIMARY_KEY = {"lance-schema:unenforced-primary-key": "true"}
TABLE_SCHEMA = pa.schema([f.with_metadata(PRIMARY_KEY) if f.name == MERGE_KEY else f for f in NLI_CACHE])
READ = [MERGE_KEY, *VALUES, "created_at"]  # what a lookup reads of a stored row
# What lancedb raises (RuntimeError) once Lance's own conflict retries are spent; lance.commit.CommitConflictError
# (an OSError) says conflict too, and carries `retryable`.
_CONFLICT_MESSAGES = ("too many concurrent writers", "conflict", "timed out")


def no_hits() -> pl.DataFrame:
    """What a lookup returns when nothing is cached."""
    return empty(NLI_CACHE).select(KEY[2:] + VALUES)


def cache_key(model_key: str, settings_key: str, claim_hash: str, evidence_hash: str) -> str:
    """The merge key of one verdict: a digest of its four key columns (lowercase hex, 32 characters)."""
    joined = "\x1f".join((model_key, settings_key, claim_hash, evidence_hash))
    return hashlib.blake2b(joined.encode("utf-8"), digest_size=16).hexdigest()


def with_cache_key(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` (with the four KEY columns) plus its cache_key."""
    keys = [cache_key(*row) for row in frame.select(KEY).iter_rows()]
    return frame.with_columns(pl.Series(MERGE_KEY, keys, dtype=pl.String))


class VerdictCache:
    """lookup() before scoring, add() what was scored, flush() once at the end of the run.

    One table, `verdicts` (schema NLI_CACHE), one row per key: the four KEY columns folded into `cache_key`
    (cache_key(); lancedb takes a one-column primary key only), which is the table's merge key, its unenforced
    primary key and what lookups filter on."""

    def __init__(self, directory: Path | str):
        self.directory = Path(directory)
        self._new: list[pl.DataFrame] = []
        # How the last lookup read the table: plan (none / point / scan), rows_scanned and bytes_read (Lance's
        # scan statistics), hits.
        self.last_read: dict[str, int | str] = {"plan": "none", "rows_scanned": 0, "bytes_read": 0, "hits": 0}
        self.merge_attempts = 0  # commit attempts of every upsert so far (more than one each: concurrent writers)

    @property
    def table_path(self) -> Path:
        return self.directory / f"{TABLE}.lance"

    # ------------------------------------------------------------------ reading

    def lookup(self, model_key: str, settings_key: str, keys: pl.DataFrame) -> pl.DataFrame:
        """Cached verdicts for the (claim_hash, evidence_hash) rows of `keys` (misses are absent).

        Two plans (bench/bench_verdict_cache.py weighs them): *point*, once the table is indexed and for at most one
        key per POINT_LOOKUP_RATIO stored rows, `cache_key IN (...)` filters of LOOKUP_BATCH keys answered from the
        BTree index, reading the index pages, the rows found and the unindexed rows only; else *scan*, one pass
        over cache_key and the verdict columns, batch by batch, each hash-joined to the keys."""
        self.last_read = {"plan": "none", "rows_scanned": 0, "bytes_read": 0, "hits": 0}
        table = self._open() if not keys.is_empty() else None
        if table is None:
            return no_hits()
        wanted = with_cache_key(
            keys.select(KEY[2:]).unique().with_columns(model_key=pl.lit(model_key), settings_key=pl.lit(settings_key))
        ).select(MERGE_KEY, *KEY[2:])
        dataset = table.to_lance()
        stored_rows = dataset.count_rows()
        indexed = any(i.name == INDEX for i in table.list_indices())
        stats: list = []
        if indexed and wanted.height * POINT_LOOKUP_RATIO <= stored_rows:
            plan, found = "point", self._point_lookup(dataset, wanted[MERGE_KEY].sort().to_list(), stats.append)
        else:
            plan, found = "scan", self._scan_lookup(dataset, wanted, stats.append)
        hits = (
            found.join(wanted, on=MERGE_KEY, how="inner")
            .sort("created_at")
            .unique(subset=MERGE_KEY, keep="last", maintain_order=True)  # one per key, should a duplicate exist
            .select(KEY[2:] + VALUES)
        )
        self.last_read = {
            "plan": plan,
            "rows_scanned": sum(s.all_counts.get("rows_scanned", 0) for s in stats),
            "bytes_read": sum(s.bytes_read for s in stats),
            "hits": hits.height,
        }
        return hits

    @staticmethod
    def _point_lookup(dataset, digests: list[str], on_stats) -> pl.DataFrame:
        parts = [point_scanner(dataset, batch, on_stats).to_table() for batch in _batches(digests, LOOKUP_BATCH)]
        return to_frame(pa.concat_tables(parts))

    @staticmethod
    def _scan_lookup(dataset, wanted: pl.DataFrame, on_stats) -> pl.DataFrame:
        keys = wanted.select(MERGE_KEY)
        scanner = dataset.scanner(columns=READ, batch_size=SCAN_BATCH_ROWS, scan_stats_callback=on_stats)
        # an inner join (keys are unique on both sides) hashes the smaller side, a semi join always the keys
        found = [to_frame(batch).join(keys, on=MERGE_KEY, how="inner") for batch in scanner.to_batches()]
        return pl.concat(found) if found else to_frame(TABLE_SCHEMA.empty_table().select(READ))

    # ------------------------------------------------------------------ writing

    def add(self, model_key: str, settings_key: str, verdicts: pl.DataFrame) -> None:
        if verdicts.is_empty():
            return
        self._new.append(
            verdicts.select(KEY[2:] + VALUES).with_columns(
                pl.lit(model_key).alias("model_key"),
                pl.lit(settings_key).alias("settings_key"),
                pl.lit(datetime.now(UTC)).alias("created_at"),
            )
        )

    def flush(self, run_id: str) -> Path | None:
        """Upsert what was added since the last flush; returns the table's path (None when nothing was added).
        `run_id` names the run in the log."""
        if not self._new:
            return None
        rows = pl.concat(self._new, how="diagonal_relaxed")
        table = self._open(create=True)
        self._upsert(table, rows, what=f"run {run_id}")
        self._new = []
        self._maintain(table)
        return self.table_path

    def _open(self, create: bool = False):
        """The table at its latest version (other processes write it too), or None when there is none and
        `create` is False."""
        if not create and not self.table_path.exists():
            return None
        import lancedb  # lazily, like citekeeper.store: importing the verifiers stays light

        self.directory.mkdir(parents=True, exist_ok=True)
        db = lancedb.connect(str(self.directory))
        try:
            return db.open_table(TABLE)
        except ValueError:  # "Table 'verdicts' was not found"
            if not create:
                return None
        try:
            return db.create_table(TABLE, schema=TABLE_SCHEMA, exist_ok=True)
        except Exception:
            return db.open_table(TABLE)

    def _upsert(self, table, rows: pl.DataFrame, what: str) -> None:
        """One `merge_insert` on cache_key; two processes flushing at once lose and duplicate nothing.

        Lance re-plans a merge that lost to a concurrent commit inside the call. A concurrent insert of the same
        new key is a conflict only when the merge key is the unenforced primary key and the merge runs without
        the scalar index (the indexed path records no inserted keys: lance-format/lance#9238), so it scans
        cache_key (checked with lancedb 0.40, pylance 14: tests/test_verdict_cache.py). Once Lance's attempts
        are spent the whole merge is retried, MERGE_ATTEMPTS times at most with a jittered backoff: an upsert is
        idempotent."""
        # A merge source must not repeat a key (Lance would apply both rows): the last one wins.
        data = to_arrow(with_cache_key(rows).unique(subset=MERGE_KEY, keep="last", maintain_order=True), TABLE_SCHEMA)
        merges = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(MERGE_ATTEMPTS),
            # 0.5, 1, 2, 4, 8 s (at most 8) times 0.5-1.5: half of it fixed, plus uniform(0, all of it)
            wait=tenacity.wait_exponential(multiplier=0.25, max=4)
            + tenacity.wait_random_exponential(multiplier=0.5, max=8),
            retry=tenacity.retry_if_exception_type((RuntimeError, OSError)) & tenacity.retry_if_exception(_is_conflict),
            before_sleep=lambda state: _log_lost_merge(what, state),
            reraise=True,  # the last attempt's error, not tenacity's RetryError
        )
        for attempt in merges:
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    table.checkout_latest()  # what the writers it lost to committed
                self.merge_attempts += 1
                result = (
                    table.merge_insert(MERGE_KEY)
                    .when_matched_update_all()
                    .when_not_matched_insert_all()
                    .use_index(False)  # the indexed path records no inserted keys: see the docstring
                    .execute(data)
                )
        lance_attempts = getattr(result, "num_attempts", 1)
        self.merge_attempts += lance_attempts - 1
        if lance_attempts > 1:
            log.info(
                "verdict cache: upsert of %s committed after %d attempts (concurrent writers)", what, lance_attempts
            )

    def _maintain(self, table) -> None:
        """Best effort (a failure only logs): compact once there are COMPACT_FRAGMENTS fragments, create the BTree
        index at INDEX_MIN_ROWS rows and rebuild it once a tenth of the rows are unindexed, and remove table
        versions older than KEEP_VERSIONS."""
        try:
            table.checkout_latest()
            dataset = table.to_lance()
            rows = dataset.count_rows()
            if len(dataset.get_fragments()) >= COMPACT_FRAGMENTS:
                dataset.optimize.compact_files(materialize_deletions=True)
            index = next((i for i in table.list_indices() if i.name == INDEX), None)
            if index is None and rows >= INDEX_MIN_ROWS:
                dataset.create_scalar_index(MERGE_KEY, "BTREE", name=INDEX)
            elif index is not None and table.index_stats(INDEX).num_unindexed_rows * 10 >= rows:
                # rewrites the index: once per tenth of growth, so its writes stay proportional to the rows added
                dataset.optimize.optimize_indices(index_names=[INDEX])
            dataset.cleanup_old_versions(older_than=KEEP_VERSIONS)
        except Exception as error:
            level = logging.INFO if _is_conflict(error) else logging.WARNING  # another writer maintained it first
            log.log(level, "verdict cache: maintenance of %s skipped: %s", self.table_path, _first_line(error))


def point_scanner(dataset, digests: Sequence[str], on_stats=None):
    """The Lance scanner of one point-lookup batch: an IN filter on cache_key (hex digests: nothing to quote)."""
    assert all(len(d) == 32 and d.isalnum() for d in digests), "cache keys are hex digests"
    where = f"{MERGE_KEY} IN ({', '.join(repr(d) for d in digests)})"
    return dataset.scanner(columns=READ, filter=where, scan_stats_callback=on_stats)


def _is_conflict(error: BaseException) -> bool:
    if getattr(error, "retryable", None) is False:  # lance.commit.CommitConflictError: incompatible commits
        return False
    message = str(error).lower()
    return any(m in message for m in _CONFLICT_MESSAGES)


def _log_lost_merge(what: str, state: tenacity.RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome is not None else None
    assert error is not None, "before_sleep follows an attempt that raised"
    log.warning(
        "verdict cache: upsert of %s lost to concurrent writers (attempt %d of %d: %s); retrying in %.1f s",
        what,
        state.attempt_number,
        MERGE_ATTEMPTS,
        _first_line(error),
        state.upcoming_sleep,
    )


def _first_line(error: BaseException) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0]


def _batches(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
