"""The answer store: registered answers, their claims and citations, every revision kept.

Files: <store_root>/answers/{answers,claims,citations}.parquet (schemas ANSWERS, CLAIMS, CITATIONS).
The current revision of an answer is its highest one; `.answers()`, `.claims()` and `.citations()`
return current revisions only, `all_*` every revision.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
from filelock import FileLock, Timeout

from citekeeper.layout import StoreLayout
from citekeeper.schema import ANSWERS, CITATIONS, CLAIMS
from citekeeper.tables import from_rows, read_parquet, write_parquet
from citekeeper.answers import LineError, ParsedAnswer, answer_rows, read_answer_records

TABLES = {"answers": ANSWERS, "claims": CLAIMS, "citations": CITATIONS}


class AnswerStoreLocked(RuntimeError):
    pass


@dataclass
class AddResult:
    added: list[str] = field(default_factory=list)  # answer_ids registered for the first time
    revised: list[tuple[str, int]] = field(default_factory=list)  # (answer_id, new revision)
    unchanged: list[str] = field(default_factory=list)  # identical re-adds: no-op
    errors: list[LineError] = field(default_factory=list)

    @property
    def n_registered(self) -> int:
        return len(self.added) + len(self.revised)

    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.revised)} revised, {len(self.unchanged)} unchanged, "
            f"{len(self.errors)} error(s)"
        )


class AnswerStore:
    def __init__(self, store_root: Path | str, lock_timeout: float = 60.0):
        self.root = StoreLayout(store_root).answers_dir
        self.lock_timeout = lock_timeout

    def path(self, table: str) -> Path:
        return self.root / f"{table}.parquet"

    def _read(self, table: str) -> pl.DataFrame:
        return read_parquet(self.path(table), TABLES[table])

    # ------------------------------------------------------------ reading

    def all_answers(self) -> pl.DataFrame:
        return self._read("answers")

    def _current(self, table: str) -> pl.DataFrame:
        """Rows of each answer's latest revision."""
        frame = self._read(table)
        answers = frame if table == "answers" else self.all_answers()
        latest = answers.group_by("answer_id").agg(pl.col("revision").max())
        return frame.join(latest, on=["answer_id", "revision"], how="semi")

    def answers(self) -> pl.DataFrame:
        return self._current("answers").sort("answer_id")

    def claims(self) -> pl.DataFrame:
        return self._current("claims").sort("answer_id", "claim_index")

    def citations(self) -> pl.DataFrame:
        return self._current("citations").sort("answer_id", "claim_id", "citation_index")

    # ------------------------------------------------------------ writing

    def add(self, path: Path | str) -> AddResult:
        """Register every good record of a JSONL or Parquet file; bad lines are reported, not fatal."""
        path = Path(path)
        parsed, errors = read_answer_records(path)
        result = AddResult(errors=errors)
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            with FileLock(self.root / ".lock", timeout=self.lock_timeout):
                self._register(parsed, str(path), result)
        except Timeout as exc:
            raise AnswerStoreLocked(
                f"answer store {self.root} is locked by another writer (waited {self.lock_timeout:.0f}s)"
            ) from exc
        return result

    def _register(self, parsed: list[ParsedAnswer], source_file: str, result: AddResult) -> None:
        current = {
            row["answer_id"]: (row["revision"], row["content_hash"])
            for row in self.answers().select("answer_id", "revision", "content_hash").to_dicts()
        }
        new_rows: dict[str, list[dict]] = {name: [] for name in TABLES}
        registered_at = datetime.now(timezone.utc)
        for answer in parsed:
            revision, content_hash = current.get(answer.answer_id, (0, None))
            if content_hash == answer.content_hash:
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
        if not new_rows["answers"]:
            return
        for name, schema in TABLES.items():
            combined = pl.concat([self._read(name), from_rows(new_rows[name], schema)])
            write_parquet(combined, schema, self.path(name))
