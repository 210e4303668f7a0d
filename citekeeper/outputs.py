"""Where a command may write an output it is given a path for (`--out`, `--report`, `--to`): never inside the store
(its root, or its LanceDB and Parquet locations elsewhere), and over an existing file only when that file is an
output of the same kind, or when forced. What marks each kind of output is here too, beside its check."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

OUTPUT_KIND_KEY = "citekeeper.output"  # Parquet outputs: key-value metadata naming their kind
REPORT_MARKER = '<meta name="generator" content="citekeeper report">'  # in the head of every HTML report
_HEAD_BYTES = 1024  # the report marker comes before anything of variable length
_FIRST_LINE_BYTES = 2**20  # a repaired answer's first line longer than this is not recognised (--force replaces it)

# kind -> what an error message calls it; PARQUET_KINDS carry OUTPUT_KIND_KEY.
PARQUET_KINDS = {
    "chunks": "chunks export (Parquet)",
    "documents": "documents export (Parquet)",
    "errors": "errors export (Parquet)",
    "answers": "answers export (Parquet)",
    "chunk_diff": "chunk diff (Parquet)",
    "citation_status": "citation status (Parquet)",
}
REPORT, REPAIRED_ANSWERS = "report", "repaired_answers"
FILE_KINDS = {**PARQUET_KINDS, REPORT: "HTML report", REPAIRED_ANSWERS: "repaired answers (JSONL)"}
DIRECTORY = "directory"  # verification runs, pulled models: new subdirectories, so only the store is refused


class OutputRefused(ValueError):
    """An output path that would overwrite the store or a file of another kind; the message names it."""


def output_metadata(kind: str) -> dict[str, str]:
    """The Parquet metadata that marks an output of `kind` (PARQUET_KINDS)."""
    if kind not in PARQUET_KINDS:
        raise ValueError(f"not a Parquet output kind: {kind!r}")
    return {OUTPUT_KIND_KEY: kind}


def check_output(
    path: Path, kind: str, store_locations: Iterable[Path], force: bool = False, option: str = "--out"
) -> None:
    """Raise OutputRefused unless a command may write its `kind` output (FILE_KINDS or DIRECTORY) at `path`."""
    resolved = Path(path).resolve()  # through symbolic links: a link into the store is inside it
    for location in store_locations:
        owned = Path(location).resolve()
        if resolved == owned or owned in resolved.parents:
            raise OutputRefused(
                f"{option} {path}: inside the store ({owned}), whose files it would overwrite; "
                "write outputs outside the store"
            )
    if kind == DIRECTORY or force or not resolved.is_file() or is_output_of(resolved, kind):
        return
    raise OutputRefused(
        f"{option} {path}: exists and is not a citekeeper {FILE_KINDS[kind]}; pass --force to replace it"
    )


def is_output_of(path: Path, kind: str) -> bool:
    """Whether the file at `path` is an output of `kind`, by its marker; an empty file holds nothing to lose."""
    import pyarrow as pa  # only here: the CLI imports this module at its start
    import pyarrow.parquet as pq

    if path.stat().st_size == 0:
        return True
    try:
        if kind in PARQUET_KINDS:
            metadata = pq.read_schema(path).metadata or {}
            return metadata.get(OUTPUT_KIND_KEY.encode()) == kind.encode()
        with path.open("rb") as handle:
            if kind == REPORT:
                return REPORT_MARKER.encode() in handle.read(_HEAD_BYTES)
            return _is_repaired_answer(handle.readline(_FIRST_LINE_BYTES))
    except (pa.ArrowException, OSError):
        return False


def _is_repaired_answer(line: bytes) -> bool:
    """A record `citekeeper repair` wrote: its answer-level `repair` object says what it was repaired against."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(record, dict) and isinstance(record.get("repair"), dict) and "against" in record["repair"]
