"""The answer store under <store_root>/answers/: registered answers, their claims and citations, every revision
kept; each add is committed whole by one manifest rename (files and guarantees: AnswerStore)."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from filelock import FileLock, Timeout

from citekeeper import cycle_collector
from citekeeper.answers.anchoring import DocumentTexts, anchor_answers
from citekeeper.answers.files import READ_BATCH, LineError, iter_answer_records, parsed_batches
from citekeeper.answers.formats import converter
from citekeeper.answers.records import AnswerLimits, ParsedAnswer, answer_rows
from citekeeper.files import atomic_write_text, fsync_file
from citekeeper.layout import StoreLayout
from citekeeper.schema import ANSWERS, CITATIONS, CLAIMS
from citekeeper.sharding import Shard
from citekeeper.store import DEFAULT_LOCK_TIMEOUT, CorpusStore
from citekeeper.tables import empty

TABLES = {"answers": ANSWERS, "claims": CLAIMS, "citations": CITATIONS}
PARTS = "parts"
CURRENT_ORDER = {
    "answers": ["answer_id"],
    "claims": ["answer_id", "claim_index"],
    "citations": ["answer_id", "claim_id", "citation_index"],
}
ANSWER_BATCH = 50_000  # answers per batch of the commands that read the store in batches (stale, verify)


class UnknownAnswer(LookupError):
    """No current answer has this id."""


class AnswerStoreLocked(RuntimeError):
    pass


@dataclass
class AddResult:
    added: list[str] = field(default_factory=list)  # answer_ids registered for the first time
    revised: list[tuple[str, int]] = field(default_factory=list)  # (answer_id, new revision)
    unchanged: list[str] = field(default_factory=list)  # identical re-adds, or of content a repair revised: no-op
    errors: list[LineError] = field(default_factory=list)
    # Registered, with a citation invalid: the document it names is not in the version it cites.
    unanchored: list[LineError] = field(default_factory=list)
    # An answer_id on more than one line of the file: each later line registered after it, in file order.
    repeated: list[LineError] = field(default_factory=list)

    @property
    def n_registered(self) -> int:
        return len(self.added) + len(self.revised)

    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.revised)} revised, {len(self.unchanged)} unchanged, "
            f"{len(self.errors)} error(s)"
            + (f", {len(self.unanchored)} citation(s) of missing documents" if self.unanchored else "")
        )


@dataclass(frozen=True)
class AnswerSnapshot:
    """The store as of one commit. Take one snapshot to read several tables that must agree with each other."""

    root: Path  # the answers dir
    parts: tuple[str, ...]  # paths relative to root, as the manifest lists them

    def scan(self, table: str) -> pl.LazyFrame:
        """Every revision's rows of `table`, lazily: select and filter before collecting to read only that.
        Parts written before a column existed read it as nulls."""
        columns = empty(TABLES[table]).schema
        files = [self.root / part / f"{table}.parquet" for part in self.parts]
        if not files:
            return pl.LazyFrame(schema=columns)
        return pl.scan_parquet(files, schema=columns, missing_columns="insert", extra_columns="ignore")

    def read(self, table: str) -> pl.DataFrame:
        return self.scan(table).collect()

    def revisions_of(self, answer_ids: list[str]) -> pl.DataFrame:
        """answer_id, revision, content_hash, repaired_from of every revision of these answers (only they are
        materialised: an add reads what it adds, not the whole store)."""
        wanted = pl.col("answer_id").is_in(pl.Series(answer_ids, dtype=pl.String).implode())
        return (
            self.scan("answers")
            .select("answer_id", "revision", "content_hash", "repaired_from")
            .filter(wanted)
            .collect()
        )

    def all_answers(self) -> pl.DataFrame:
        return self.read("answers")

    def _latest(self) -> pl.LazyFrame:
        """answer_id and current (highest) revision of every answer, from two columns of the answers table."""
        return self.scan("answers").group_by("answer_id").agg(pl.col("revision").max())

    def _current(self, table: str) -> pl.DataFrame:
        """Rows of each answer's latest revision."""
        return (
            self.scan(table)
            .join(self._latest(), on=["answer_id", "revision"], how="semi")
            .collect()
            .sort(CURRENT_ORDER[table])
        )

    def current_batches(
        self,
        tables: tuple[str, ...],
        answers_per_batch: int = ANSWER_BATCH,
        shard: Shard | None = None,
        columns: Mapping[str, Sequence[str]] | None = None,
    ) -> Iterator[dict[str, pl.DataFrame]]:
        """The current rows of `tables`, `answers_per_batch` answers at a time in answer_id order, all rows of an
        answer in one batch; with `shard`, only the answers it owns; with `columns` (table -> names, answer_id and
        revision among them), only those of a table. A batch is read through a range filter on answer_id (Parquet
        statistics skip the row groups outside it), so memory is bounded by the batch."""
        wanted = dict(columns or {})
        latest = self._latest().sort("answer_id").collect()
        if shard is not None:
            latest = latest.filter(shard.owned("answer_id"))
        for offset in range(0, latest.height, answers_per_batch):
            batch = latest.slice(offset, answers_per_batch)
            in_range = pl.col("answer_id").is_between(pl.lit(batch["answer_id"][0]), pl.lit(batch["answer_id"][-1]))
            yield {
                table: self.scan(table)
                .select(wanted.get(table) or pl.all())
                .filter(in_range)
                .join(batch.lazy(), on=["answer_id", "revision"], how="semi")
                .collect()
                .sort(CURRENT_ORDER[table])
                for table in tables
            }

    def answers(self) -> pl.DataFrame:
        return self._current("answers")

    def claims(self) -> pl.DataFrame:
        return self._current("claims")

    def citations(self) -> pl.DataFrame:
        return self._current("citations")


def _repaired_content(answers: pl.DataFrame) -> set[tuple[str, str]]:
    """(answer_id, content_hash) of every revision a repair was made from, or that came before one. Re-adding that
    content (a pipeline registering the same answers file each run) is a no-op: it must not undo the repair."""
    repairs = (
        answers.filter(pl.col("repaired_from").is_not_null())
        .group_by("answer_id")
        .agg(latest_from=pl.col("repaired_from").max())
    )
    before = answers.join(repairs, on="answer_id").filter(pl.col("revision") <= pl.col("latest_from"))
    return set(before.select("answer_id", "content_hash").iter_rows())


class _PartWriter:
    """Writes one add's part, batch by batch, into a directory no manifest lists yet (so no reader sees it)."""

    def __init__(self, parts_dir: Path, sequence: int):
        # The sequence orders parts for a person listing the directory; the token keeps names unique regardless.
        self.name = f"{PARTS}/{sequence:06d}-{uuid.uuid4().hex[:8]}"
        self.directory = parts_dir / self.name.split("/", 1)[1]
        self.n_answers = 0
        self._writers: dict[str, pq.ParquetWriter] = {}

    def write(self, rows: dict[str, list[dict]]) -> None:
        if not rows["answers"]:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        for name, schema in TABLES.items():
            if name not in self._writers:
                self._writers[name] = pq.ParquetWriter(self.directory / f"{name}.parquet", schema)
            self._writers[name].write_table(pa.Table.from_pylist(rows[name], schema=schema))
        self.n_answers += len(rows["answers"])

    def close(self) -> bool:
        """Finish the files; False (nothing written) when the add registered nothing."""
        for writer in self._writers.values():
            writer.close()
        for name in self._writers:  # on disk before the manifest that lists them
            fsync_file(self.directory / f"{name}.parquet")
        return self.n_answers > 0


class AnswerStore:
    """Files under StoreLayout.answers_dir: manifest.json ({"parts": [...]}: the committed parts, oldest first),
    parts/<n>-<token>/{answers,claims,citations}.parquet (the rows one add registered) and .lock (the writers'
    lock). An add writes its part, then os.replace()s the manifest, committing all three tables at once; a reader
    reads the manifest once, then only the parts it lists, so it sees a commit whole or not at all. A part no
    manifest lists (a killed add) is deleted by the next add; no stored part is rewritten. An answer's current
    revision is its highest: `.answers()`, `.claims()`, `.citations()` return those, `all_answers()` every one."""

    def __init__(
        self,
        store_root: Path | str,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        limits: AnswerLimits = AnswerLimits(),
        corpus: CorpusStore | None = None,
    ):
        """`corpus`: the store citations by document are anchored in (default: the one at `store_root`, its tables
        under the root)."""
        self.layout = StoreLayout(store_root)
        self.root = self.layout.answers_dir
        self.store_root = store_root
        self._corpus = corpus
        self.limits = limits
        self.lock_timeout = lock_timeout

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    @property
    def parts_dir(self) -> Path:
        return self.root / PARTS

    # ------------------------------------------------------------ reading

    def snapshot(self) -> AnswerSnapshot:
        return AnswerSnapshot(self.root, self._committed_parts())

    def _committed_parts(self) -> tuple[str, ...]:
        try:
            return tuple(json.loads(self.manifest_path.read_text(encoding="utf-8"))["parts"])
        except FileNotFoundError:  # nothing committed yet
            return ()

    def all_answers(self) -> pl.DataFrame:
        return self.snapshot().all_answers()

    def answers(self) -> pl.DataFrame:
        return self.snapshot().answers()

    def claims(self) -> pl.DataFrame:
        return self.snapshot().claims()

    def citations(self) -> pl.DataFrame:
        return self.snapshot().citations()

    # ------------------------------------------------------------ writing

    def add(
        self,
        path: Path | str,
        expected_revisions: dict[str, int] | None = None,
        batch_size: int = READ_BATCH,
        response_format: str | None = None,
        audience: tuple[str, ...] | None = None,
    ) -> AddResult:
        """Register every good record of a JSONL or Parquet file; bad lines are reported, not fatal. The file is
        read, checked and written `batch_size` records at a time, all of it committed at once at the end.
        With `response_format` (citekeeper.answers.formats.RESPONSE_FORMATS) each line is an LLM API's or framework's
        response in its envelope.

        With `expected_revisions` (answer_id -> revision), an answer whose current revision is another one is
        not registered but reported: it changed since the records were made from it (a repair's guard).
        With `audience` (groups), every answer is registered for it too (ParsedAnswer.for_audience: never wider).
        """
        path = Path(path)
        batches = iter_answer_records(path, batch_size, self.limits, converter(response_format))
        return self._add(batches, str(path), expected_revisions, audience)

    def add_records(
        self,
        records: Iterable[dict],
        source: str = "api",
        batch_size: int = READ_BATCH,
        response_format: str | None = None,
        audience: tuple[str, ...] | None = None,
    ) -> AddResult:
        """Register answer records given as dicts (either form, as one line of an answers file holds, or responses
        in their envelope with `response_format`): what RAG code calls as it produces answers. Record N's problems
        are reported as `line N`, the good ones register. `audience`: as add's."""
        batches = parsed_batches(enumerate(records, start=1), batch_size, self.limits, converter(response_format))
        return self._add(batches, source, None, audience)

    def _add(
        self, batches, source: str, expected_revisions: dict[str, int] | None, audience: tuple[str, ...] | None = None
    ) -> AddResult:
        result = AddResult()
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            with FileLock(self.layout.answers_lock, timeout=self.lock_timeout), cycle_collector.paused():
                self._register(batches, source, result, expected_revisions or {}, audience)
        except Timeout as exc:
            raise AnswerStoreLocked(
                f"answer store {self.root} is locked by another writer (waited {self.lock_timeout:.0f}s)"
            ) from exc
        return result

    def _register(
        self,
        batches: Iterator[tuple[list[ParsedAnswer], list[LineError]]],
        source_file: str,
        result: AddResult,
        expected_revisions: dict[str, int],
        audience: tuple[str, ...] | None = None,
    ) -> None:
        snapshot = self.snapshot()
        self._remove_uncommitted(snapshot.parts)
        registered_at = datetime.now(UTC)
        current: dict[str, tuple[int, str | None]] = {}  # answer_id -> (revision, content_hash), as of this add
        first_line: dict[str, int | None] = {}
        part = _PartWriter(self.parts_dir, sequence=len(snapshot.parts) + 1)
        texts = DocumentTexts(self._corpus or CorpusStore(self.store_root))
        for answers, errors in batches:
            result.errors.extend(errors)
            answers, unanchored = anchor_answers([answer.for_audience(audience) for answer in answers], texts)
            result.unanchored.extend(unanchored)
            repaired = self._known(snapshot, [a.answer_id for a in answers if a.answer_id not in current], current)
            new_rows: dict[str, list[dict]] = {name: [] for name in TABLES}
            for answer in answers:
                first = first_line.setdefault(answer.answer_id, answer.line)
                if first != answer.line:
                    result.repeated.append(
                        LineError(
                            answer.line or 0,
                            "answer_id",
                            f"{answer.answer_id!r:.80} is also on line {first}: "
                            "registered in file order, so this line revises it",
                        )
                    )
                revision, content_hash = current.get(answer.answer_id, (0, None))
                expected = expected_revisions.get(answer.answer_id, revision)
                if expected != revision:
                    message = (
                        f"{answer.answer_id} is at revision {revision}, not {expected}: it changed since this was made"
                    )
                    result.errors.append(LineError(answer.line or 0, "answer_id", message))
                    continue
                if content_hash == answer.content_hash or (answer.answer_id, answer.content_hash) in repaired:
                    result.unchanged.append(answer.answer_id)
                    continue
                revision += 1
                current[answer.answer_id] = (revision, answer.content_hash)
                if revision > 1:
                    result.revised.append((answer.answer_id, revision))
                else:
                    result.added.append(answer.answer_id)
                for name, rows in answer_rows(answer, revision, source_file, registered_at).items():
                    new_rows[name].extend(rows)
            part.write(new_rows)
        if part.close():
            self._publish([*snapshot.parts, part.name])

    @staticmethod
    def _known(snapshot: AnswerSnapshot, answer_ids: list[str], current: dict) -> set[tuple[str, str]]:
        """Put the stored current revision of `answer_ids` into `current`; return their repaired content."""
        revisions = snapshot.revisions_of(answer_ids)
        latest = revisions.sort("revision").group_by("answer_id").last()
        current.update(
            (row[0], (row[1], row[2])) for row in latest.select("answer_id", "revision", "content_hash").iter_rows()
        )
        return _repaired_content(revisions)

    def _remove_uncommitted(self, committed: tuple[str, ...]) -> None:
        """Parts of adds killed before their commit (their manifest temp file goes with the next write of the
        manifest: citekeeper.files). Safe under the writers' lock: no manifest lists these parts, so no reader
        opens them."""
        for part in self.parts_dir.glob("*"):
            if f"{PARTS}/{part.name}" not in committed:
                shutil.rmtree(part)

    def _publish(self, parts: list[str]) -> None:
        """The commit: one os.replace makes the new part visible, all three tables at once."""
        atomic_write_text(self.manifest_path, json.dumps({"parts": parts}, indent=1) + "\n")
