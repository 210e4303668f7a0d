"""Answer files read line by line (JSONL) or row by row (Parquet), in batches: a bad line is an error of that
line only, and memory follows the batch, not the file."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from citekeeper.answers.records import AnswerInputError, AnswerLimits, ParsedAnswer, parse_answer


@dataclass(frozen=True)
class LineError:
    line: int  # 1-based line (JSONL) or row (Parquet) number
    field: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.field}: {self.message}"


READ_BATCH = 20_000  # records parsed and registered at a time: memory follows this, not the file


def read_answer_records(
    path: Path, limits: AnswerLimits = AnswerLimits()
) -> tuple[list[ParsedAnswer], list[LineError]]:
    """The answers of a JSONL or Parquet file, and an error for each problem of a bad non-blank line / row."""
    answers, errors = [], []
    for batch_answers, batch_errors in iter_answer_records(path, limits=limits):
        answers.extend(batch_answers)
        errors.extend(batch_errors)
    return answers, errors


def iter_answer_records(
    path: Path, batch_size: int = READ_BATCH, limits: AnswerLimits = AnswerLimits(), convert: Convert | None = None
) -> Iterator[tuple[list[ParsedAnswer], list[LineError]]]:
    """read_answer_records in batches of at most `batch_size` lines / rows, read as they are needed."""
    path = Path(path)
    rows = _parquet_rows(path, batch_size) if path.suffix.lower() == ".parquet" else _jsonl_rows(path)
    return parsed_batches(rows, batch_size, limits, convert)


class JsonLine(NamedTuple):
    """A JSONL line: its value, and its text (a record kept as given needs no encoding again)."""

    value: object
    text: str


# Parses a record of another shape (an LLM API's response, citekeeper.answers.formats), read from a line (the line's
# text, when it was one), within the AnswerLimits; raises AnswerInputError.
Convert = Callable[[object, int, AnswerLimits, str | None], ParsedAnswer]


def parsed_batches(
    rows: Iterable[tuple[int, object]],
    batch_size: int = READ_BATCH,
    limits: AnswerLimits = AnswerLimits(),
    convert: Convert | None = None,
) -> Iterator[tuple[list[ParsedAnswer], list[LineError]]]:
    """(line, record) pairs (a record, or the LineError of a line that could not be read) parsed `batch_size`
    at a time, each first through `convert` when given: the good ones as ParsedAnswers, an error per problem of
    the others."""
    answers: list[ParsedAnswer] = []
    errors: list[LineError] = []
    for n, (line_no, row) in enumerate(rows, start=1):
        if isinstance(row, LineError):
            errors.append(row)
        else:
            try:
                record, text = (row.value, row.text) if isinstance(row, JsonLine) else (row, None)
                answers.append(
                    convert(record, line_no, limits, text) if convert else parse_answer(record, line_no, limits)
                )
            except AnswerInputError as exc:
                errors.extend(LineError(line_no, issue.field, issue.message) for issue in exc.issues)
        if n % batch_size == 0:
            yield answers, errors
            answers, errors = [], []
    if answers or errors:
        yield answers, errors


def _parquet_rows(path: Path, batch_size: int) -> Iterator[tuple[int, object]]:
    """Rows numbered from 1; a file Arrow cannot read (truncated, not Parquet) is one error, at row 0."""
    line_no = 0
    try:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size):
            for row in batch.to_pylist():
                line_no += 1
                yield line_no, row
    except (pa.ArrowException, OSError) as exc:
        yield line_no, LineError(line_no, "file", f"not a readable Parquet file after row {line_no}: {exc}")


def _jsonl_rows(path: Path) -> Iterator[tuple[int, object]]:
    """Each line decoded and parsed on its own: a bad byte or a bad line is an error of that line only."""
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield (
                    line_no,
                    LineError(
                        line_no, "json", f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
                    ),
                )
                continue
            if not line.strip():
                continue
            try:
                yield line_no, JsonLine(json.loads(line), line.strip())
            except json.JSONDecodeError as exc:
                yield line_no, LineError(line_no, "json", f"not valid JSON ({exc.msg} at column {exc.colno})")
            except RecursionError:
                yield line_no, LineError(line_no, "json", "nested too deeply to be an answer")
