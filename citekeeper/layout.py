"""Every path under a store root (StoreLayout): the one place that knows where each table, output and lock lives
(the tree: docs/production.md, "The store root")."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl

# Every name that becomes a path component (corpus versions, run ids): never "..", a "/" or a hidden name. The
# same are LanceDB's tag rules, so a version name is also a valid tag.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class UnsafeName(ValueError):
    """A version name or run id that cannot be a path component; the message names it and the rule."""


def is_safe_name(value: object) -> bool:
    return isinstance(value, str) and SAFE_NAME.fullmatch(value) is not None


def safe_name(value: str, what: str) -> str:
    if not is_safe_name(value):
        raise UnsafeName(
            f"invalid {what} {value!r:.80}: use letters, digits, '.', '-' or '_' "
            "(starting with a letter or digit, at most 128 characters)"
        )
    return value


@dataclass(frozen=True)
class StoreLayout:
    root: Path

    def __init__(self, root: Path | str):
        object.__setattr__(self, "root", Path(root))

    @property
    def lance_dir(self) -> Path:
        return self.root / "lance"

    @property
    def versions_dir(self) -> Path:
        return self.root / "versions"

    def manifest(self, version: str) -> Path:
        return self.versions_dir / f"{safe_name(version, 'corpus version name')}.json"

    @property
    def parquet_dir(self) -> Path:
        return self.root / "parquet"

    def export_parts(self, table: str, version: str) -> Path:
        """The part layout of a version's chunk or document export (citekeeper.exports.PartLayout), kept here, not
        beside the parts, so that the export folder holds Parquet files only; written last, it marks them complete."""
        return self.root / "export_parts" / table / f"{safe_name(version, 'corpus version name')}.json"

    @property
    def staging_dir(self) -> Path:
        return self.root / "staging"

    def read_objects_dir(self, cache_key: str) -> Path:
        """Where discovery keeps what it read of one listed source's objects (citekeeper.schema.READ_OBJECTS)."""
        return self.root / "cache" / "sources" / hashlib.sha256(cache_key.encode()).hexdigest()[:16]

    @property
    def lock(self) -> Path:
        return self.root / ".lock"

    @property
    def readers_lock(self) -> Path:
        """The readers' shared lease against gc (CorpusStore.reading): a SQLite file holding no data."""
        return self.root / ".readers.lock"

    @property
    def answers_dir(self) -> Path:
        return self.root / "answers"

    @property
    def answers_lock(self) -> Path:
        """The answer store's writers' lock: every add, and gc while it rewrites what answers cite."""
        return self.answers_dir / ".lock"

    @property
    def embeddings_dir(self) -> Path:
        return self.root / "embeddings"

    @property
    def gc_pending(self) -> Path:
        return self.root / ".gc-pending"

    @property
    def diffs_dir(self) -> Path:
        return self.root / "diffs"

    def diff_dir(self, old_version: str, new_version: str) -> Path:
        return (
            self.diffs_dir
            / f"{safe_name(old_version, 'corpus version name')}__{safe_name(new_version, 'corpus version name')}"
        )

    def chunk_diff_file(self, old_version: str, new_version: str) -> Path:
        return self.diff_dir(old_version, new_version) / "chunk_diff.parquet"

    def doc_diff_file(self, old_version: str, new_version: str) -> Path:
        return self.diff_dir(old_version, new_version) / "doc_diff.parquet"

    @property
    def citations_dir(self) -> Path:
        return self.root / "citations"

    def citation_status_dir(self, target_version: str) -> Path:
        return self.citations_dir / f"target_version={safe_name(target_version, 'corpus version name')}"

    def citation_status_file(self, target_version: str) -> Path:
        return self.citation_status_dir(target_version) / "citation_status.parquet"

    def blast_radius_file(self, target_version: str) -> Path:
        return self.citation_status_dir(target_version) / "blast_radius.parquet"

    def report_file(self, target_version: str) -> Path:
        return self.citation_status_dir(target_version) / "report.html"

    @property
    def repairs_root(self) -> Path:
        return self.root / "repairs"

    def repairs_dir(self, target_version: str) -> Path:
        return self.repairs_root / f"target_version={safe_name(target_version, 'corpus version name')}"

    def repairs_file(self, target_version: str) -> Path:
        return self.repairs_dir(target_version) / "repairs.parquet"

    def repaired_answers_file(self, target_version: str) -> Path:
        return self.repairs_dir(target_version) / "repaired.jsonl"

    def repair_summary_file(self, target_version: str) -> Path:
        return self.repairs_dir(target_version) / "summary.json"

    @property
    def verify_dir(self) -> Path:
        return self.root / "verify"

    @property
    def runs_dir(self) -> Path:
        return self.verify_dir / "runs"

    @property
    def verdict_cache_dir(self) -> Path:
        return self.verify_dir / "cache"

    @property
    def onnx_dir(self) -> Path:
        return self.verify_dir / "onnx"


def run_dir(out_dir: Path | str, version: str, run_id: str) -> Path:
    """Where one verification run's tables go under any output dir (the store's runs_dir, or --out)."""
    return (
        Path(out_dir)
        / f"corpus_version={safe_name(version, 'corpus version name')}"
        / f"run_id={safe_name(run_id, 'run id')}"
    )


def shard_run_dir(out_dir: Path | str, version: str, run_id: str, index: int, count: int) -> Path:
    """Where one shard of a sharded verification run writes its tables and its tally."""
    return run_dir(out_dir, version, run_id) / f"shard={index}-of-{count}"


def run_table_files(directory: Path, table: str) -> list[Path]:
    """The files of one table (pairs, claims, answers) of the run in `directory`: its own, or its shards'."""
    whole = directory / f"{table}.parquet"
    return [whole] if whole.exists() else sorted(directory.glob(f"shard=*/{table}.parquet"))


def latest_run_dir(out_dir: Path | str, version: str) -> Path | None:
    """The complete run_dir (it has its run.parquet, written last) under `out_dir` for `version` that started
    last: by the run row's started_at, not by name (a run id such as "nightly" sorts after any timestamp)."""
    rows = sorted((Path(out_dir) / f"corpus_version={version}").glob("run_id=*/run.parquet"))
    if not rows:
        return None
    # extra_columns: runs written by different releases differ in their other columns (a newer one has `checker`)
    started = (
        pl.scan_parquet(rows, include_file_paths="path", extra_columns="ignore").select("started_at", "path").collect()
    )
    return Path(started.sort("started_at", "path")["path"][-1]).parent
