"""Retention (`citekeeper gc`): which corpus versions are kept, pruning what belongs only to the others, and
rewriting the kept versions' LanceDB data compactly, safe against a crash at any point (what is kept and
pruned: docs/ingest.md, "Retention"; the crash-safety argument: gc)."""

from __future__ import annotations

import json
import os
import shutil
import time
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from contextlib import nullcontext, suppress
from dataclasses import asdict, dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import filelock
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from citekeeper.answers.store import AnswerStore
from citekeeper.files import abandoned_temp_files, atomic_write_text, remove_abandoned
from citekeeper.lance_tables import DOC_ID_INDEX, add_rows, delete_docs, index_doc_ids, restored, sorted_batches
from citekeeper.locations import is_remote, parquet_filesystem
from citekeeper.store import DEFAULT_LOCK_TIMEOUT, EXPORTS, SORT_KEYS, TABLES, CorpusStore, StoreError, StoreLocked
from citekeeper.tables import to_frame

if TYPE_CHECKING:
    from lance import LanceDataset

STAGING_MAX_AGE = timedelta(days=1)  # an uncommitted staging folder untouched this long is a leftover
EMBEDDING_INDEX_PREFIX = "chunks__"  # citekeeper.search_index: chunks__<version>__<tokenizer>__<model>


@dataclass(frozen=True)
class Removal:
    kind: str  # manifest | export | diff | citations | repairs | verify_run | staging | embeddings | temp
    version: str | None  # the version it belonged to (None: a diff, named by both)
    location: str  # a local path or an object-store URI
    bytes: int


@dataclass
class GcSummary:
    dry_run: bool
    keep_last: int
    pruned: list[str]  # oldest first
    kept: dict[str, list[str]]  # version -> why kept, oldest first
    removed: list[Removal] = field(default_factory=list)  # with --dry-run: what would go
    bytes_before: int = 0  # the whole store: root, plus the LanceDB and Parquet locations when elsewhere
    bytes_after: int = 0  # with --dry-run: bytes_before less what the listed removals would free
    lance_rewritten: bool = False
    lance_versions_removed: dict[str, int] = field(default_factory=dict)  # table -> table versions cleaned up
    seconds: float = 0.0

    @property
    def bytes_freed(self) -> int:
        return self.bytes_before - self.bytes_after

    def to_dict(self) -> dict:
        return {**asdict(self), "bytes_freed": self.bytes_freed}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def text(self) -> str:
        verb = "would prune" if self.dry_run else "pruned"
        lines = [
            f"{verb} {len(self.pruned)} corpus version(s)" + (f": {', '.join(self.pruned)}" if self.pruned else "")
        ]
        lines.append(f"kept {len(self.kept)} corpus version(s):")
        lines += [f"  {name:<24} {'; '.join(reasons)}" for name, reasons in self.kept.items()]
        counts = Counter(r.kind for r in self.removed)
        what = ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items())) or "nothing"
        lines.append(
            f"{'would remove' if self.dry_run else 'removed'}: {what} "
            f"({_size(sum(r.bytes for r in self.removed))} outside LanceDB)"
        )
        if self.dry_run:
            lines.append(
                "LanceDB: unchanged (dry run)"
                + ("; gc would rewrite the kept versions compactly" if self.pruned else "")
                + " and clean up the table versions no kept version references"
            )
        else:
            cleaned = ", ".join(f"{t} {n}" for t, n in self.lance_versions_removed.items()) or "none"
            lines.append(
                f"LanceDB: {'kept versions rewritten compactly; ' if self.lance_rewritten else ''}"
                f"table versions cleaned up: {cleaned}"
            )
        freed = "would free at least" if self.dry_run else "freed"
        lines.append(
            f"store bytes: {_size(self.bytes_before)} before, {_size(self.bytes_after)} after; "
            f"{freed} {_size(self.bytes_freed)} ({self.seconds:.1f}s)"
        )
        return "\n".join(lines)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


# ---------------------------------------------------------------------- what to keep


def cited_versions(store_root: Path | str) -> Counter:
    """corpus_version -> number of current answer revisions citing it (at the answer or a citation)."""
    answers = AnswerStore(store_root).snapshot()
    cited = pl.concat(
        [
            answers.answers().select("answer_id", "corpus_version"),
            answers.citations().select("answer_id", "corpus_version"),
        ]
    ).unique()
    return Counter(cited["corpus_version"].to_list())


def plan(store: CorpusStore, keep_last: int, keep: Iterable[str] = ()) -> tuple[dict[str, list[str]], list[str]]:
    """(kept: version -> reasons, pruned), both oldest first. UnknownVersion for a `keep` that does not exist:
    a misspelt pin must not let its version go."""
    if keep_last < 0:
        raise ValueError(f"keep_last must be 0 or more, not {keep_last}")
    versions = [m.name for m in store.versions()]
    keep = list(dict.fromkeys(keep))
    for name in keep:
        store.manifest(name)
    reasons: dict[str, list[str]] = {name: [] for name in versions}
    if versions:
        reasons[versions[-1]].append("latest")
    for name in versions[-keep_last:] if keep_last else []:
        reasons[name].append(f"last {keep_last}")
    for name in keep:
        reasons[name].append("--keep")
    for name, n in sorted(cited_versions(store.root).items()):
        if name in reasons:
            reasons[name].append(f"cited by {n} current answer(s)")
    kept = {name: why for name, why in reasons.items() if why}
    return kept, [name for name in versions if name not in kept]


# ---------------------------------------------------------------------- sizes


def _path_bytes(path: Path) -> int:
    if path.is_file() and not path.is_symlink():
        return path.stat().st_size
    total = 0
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            with suppress(OSError):  # vanished meanwhile
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def _remote_bytes(uri: str, storage_options: dict) -> int:
    filesystem, path = parquet_filesystem(uri, storage_options)
    infos = filesystem.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    return sum(info.size or 0 for info in infos if info.type == pafs.FileType.File)


def store_bytes(store: CorpusStore) -> int:
    """Bytes of everything the store holds: its root, and its LanceDB / Parquet locations when they are elsewhere."""
    total = _path_bytes(store.root) if store.root.exists() else 0
    root = store.root.resolve()
    for uri in dict.fromkeys(u for u in (store.lance_uri, store.parquet_uri) if u):
        if is_remote(uri):
            total += _remote_bytes(uri, store.storage_options)
            continue
        local = Path(uri.removeprefix("file://")).resolve()
        if local.exists() and not local.is_relative_to(root):
            total += _path_bytes(local)
    return total


# ---------------------------------------------------------------------- what goes


def _local(kind: str, version: str | None, path: Path) -> Removal:
    return Removal(kind, version, str(path), _path_bytes(path))


def _subdirs(folder: Path, prefix: str = "") -> dict[str, Path]:
    """name (without prefix) -> folder, for the folders under `folder` whose name starts with prefix."""
    if not folder.is_dir():
        return {}
    return {p.name.removeprefix(prefix): p for p in folder.iterdir() if p.is_dir() and p.name.startswith(prefix)}


def _names_two_kept(diff_name: str, kept: set[str]) -> bool:
    """Whether diffs/<old>__<new> names two kept versions (names may contain '__': try every split)."""
    parts = diff_name.split("__")
    return any("__".join(parts[:i]) in kept and "__".join(parts[i:]) in kept for i in range(1, len(parts)))


def _export_removals(store: CorpusStore, kept: set[str], latest: str | None) -> list[Removal]:
    """Export folders, and the part layouts beside them, of versions not kept (chunks and documents: not latest)."""
    removals = []
    for table in EXPORTS:
        for version in sorted(store.exported_versions(table)):
            if version in kept and (table not in TABLES or version == latest):
                continue
            folder = store.export_folder(table, version)
            removals.append(Removal("export", version, str(folder.location), folder.size_bytes()))
            if folder.layout_path.is_file():
                removals.append(_local("export", version, folder.layout_path))
    return removals


def _embedding_removals(store: CorpusStore, kept: set[str]) -> list[Removal]:
    """Re-anchoring indexes (embeddings/chunks__<version>__...) of versions that are not kept."""
    folder = store.layout.embeddings_dir
    if not folder.is_dir():
        return []
    removals = []
    for path in sorted(folder.glob(f"{EMBEDDING_INDEX_PREFIX}*.lance")):
        if not any(path.name.startswith(f"{EMBEDDING_INDEX_PREFIX}{name}__") for name in kept):
            version = path.name.removeprefix(EMBEDDING_INDEX_PREFIX).split("__")[0]
            removals.append(_local("embeddings", version, path))
    return removals


def _staging_removals(store: CorpusStore, committed: set[str], max_age: timedelta) -> list[Removal]:
    """Staged shards of a version already committed (or pruned), and staging folders untouched for max_age
    (a stage takes no lock, so a fresh one may belong to a sharded ingest that is running)."""
    removals, now = [], time.time()
    for name, path in sorted(_subdirs(store.layout.staging_dir).items()):
        newest = max(
            (os.lstat(os.path.join(d, f)).st_mtime for d, _, fs in os.walk(path) for f in fs),
            default=path.stat().st_mtime,
        )
        if name in committed or now - newest > max_age.total_seconds():
            removals.append(_local("staging", name, path))
    return removals


def removals(
    store: CorpusStore, kept: Sequence[str], pruned: Sequence[str], staging_max_age: timedelta = STAGING_MAX_AGE
) -> list[Removal]:
    """Everything outside LanceDB that goes when `pruned` go and `kept` stay (manifests first)."""
    layout, keep = store.layout, set(kept)
    latest = kept[-1] if kept else None
    found = [_local("manifest", name, layout.manifest(name)) for name in pruned]
    found += [_local("temp", None, path) for path in _abandoned_temp_files(store.root)]
    found += _export_removals(store, keep, latest)
    found += [
        _local("diff", None, p) for n, p in sorted(_subdirs(layout.diffs_dir).items()) if not _names_two_kept(n, keep)
    ]
    for kind, folder, prefix in (
        ("citations", layout.citations_dir, "target_version="),
        ("repairs", layout.repairs_root, "target_version="),
        ("verify_run", layout.runs_dir, "corpus_version="),
    ):
        found += [_local(kind, n, p) for n, p in sorted(_subdirs(folder, prefix).items()) if n not in keep]
    found += _embedding_removals(store, keep)
    found += _staging_removals(store, set(kept) | set(pruned), staging_max_age)
    return found


def _abandoned_temp_files(root: Path) -> list[Path]:
    """Temp files of atomic writes whose writer died (citekeeper.files), anywhere under the root but in LanceDB's
    tables (`*.lance`), which are not written that way."""
    found = []
    for folder, subfolders, _ in os.walk(root):
        subfolders[:] = [name for name in subfolders if not name.endswith(".lance")]
        found += abandoned_temp_files(Path(folder))
    return found


def _remove(store: CorpusStore, removal: Removal) -> None:
    if removal.kind == "temp":  # checked again: only while no writer holds it
        remove_abandoned(Path(removal.location))
        return
    if is_remote(removal.location):
        filesystem, folder = parquet_filesystem(removal.location, store.storage_options)  # an export folder
        if filesystem.get_file_info(folder).type == pafs.FileType.Directory:
            filesystem.delete_dir(folder)
        return
    path = Path(removal.location)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


# ---------------------------------------------------------------------- LanceDB


def _merge_index(dataset: LanceDataset) -> None:
    """One doc_id index segment covering every row: reads of this table version consult one segment, and
    compaction, which merges only fragments that a single index segment covers, can merge them all."""
    index_doc_ids(dataset)
    index = next((i for i in dataset.describe_indices() if i.name == DOC_ID_INDEX), None)
    if index is not None and len(index.segments) > 1:
        dataset.optimize.optimize_indices(index_names=[DOC_ID_INDEX], num_indices_to_merge=len(index.segments))


def _compact(dataset: LanceDataset) -> None:
    """Lance compaction of the head: deleted rows materialised away, small fragments merged (up to Lance's
    target of 1Mi rows a fragment), the index remapped."""
    _merge_index(dataset)
    dataset.optimize.compact_files(materialize_deletions=True, materialize_deletions_threshold=0.0)
    _merge_index(dataset)


def _row_addresses(dataset) -> pl.DataFrame:
    """doc_id and row address of every row of a table version. A row address (fragment, offset) names one
    immutable row for the table's whole history (fragment ids are never reused, not even after a restore), so
    equal addresses are equal rows."""
    return to_frame(dataset.to_table(columns=["doc_id"], with_row_address=True))


def _changed_doc_ids(a: pl.DataFrame, b: pl.DataFrame) -> list[str]:
    """Documents whose rows differ between two table versions (their _row_addresses): those with a row in one and
    not the other."""
    gone = a.join(b, on="_rowaddr", how="anti")["doc_id"]
    new = b.join(a, on="_rowaddr", how="anti")["doc_id"]
    return sorted(set(gone.to_list()) | set(new.to_list()))


def _rewrite(head: LanceDataset, table: str, kept: Sequence[str], old: dict[str, int]) -> dict[str, int]:
    """Rewrite the kept versions (oldest first, `old`: their current table versions) around the latest, the version
    read most: the latest as one compacted table version with its rows in read order (SORT_KEYS), then each older
    kept version, newest first, as that base minus the documents changed since plus their rows as of then. Each
    tag moves to its new table version. Returns version -> table version. (Compacting the head alone would not
    free what the oldest kept tag still references: every fragment appended since, with its deleted rows.)"""
    latest = head.checkout_version(old[kept[-1]])  # old table versions are read by number, whatever the tags say
    latest_rows = _row_addresses(latest)  # read once: every older kept version is compared with it
    dataset = restored(head, old[kept[-1]])
    _write_sorted(dataset, latest, SORT_KEYS[table])
    _compact(dataset)
    new = {kept[-1]: dataset.version}
    dataset.tags.update(kept[-1], dataset.version)
    for name in reversed(kept[:-1]):
        dataset = restored(dataset, new[kept[-1]])
        then = head.checkout_version(old[name])
        changed = _changed_doc_ids(_row_addresses(then), latest_rows)
        delete_docs(dataset, changed)
        if changed:
            add_rows(dataset, then.to_table(filter=pc.field("doc_id").isin(changed)), dataset.schema)
        index_doc_ids(dataset)
        dataset.tags.update(name, dataset.version)
        new[name] = dataset.version
    return new


def _write_sorted(dataset: LanceDataset, source: LanceDataset, keys: list[str]) -> None:
    """Overwrite the head with the rows of `source` (a table version) in `keys` order, so a read of it finds them
    already sorted; a batch at a time (lance_tables.sorted_batches)."""
    batches = (batch for rows in sorted_batches(source, keys) for batch in rows.to_batches())
    dataset.insert(pa.RecordBatchReader.from_batches(source.schema, batches), mode="overwrite")


def _cleanup(store: CorpusStore, table: str) -> int:
    """Remove every table version no tag references (the head stays); returns how many went. Lance's own
    cleanup_old_versions: LanceDB's Table.optimize refuses to clean up when old versions are tagged."""
    head = store.lance_head(table)
    if head is None:
        return 0
    stats = head.cleanup_old_versions(
        older_than=timedelta(0), delete_unverified=True, error_if_tagged_old_versions=False
    )  # delete_unverified: safe under the writer lock, no other writer has files in flight
    return stats.old_versions


# ---------------------------------------------------------------------- gc


def _update_manifest(store: CorpusStore, name: str, lance_versions: dict[str, int]) -> None:
    manifest = store.manifest(name)
    if manifest.lance_versions != lance_versions:
        store.write_manifest(replace(manifest, lance_versions={**manifest.lance_versions, **lance_versions}))


def gc(
    store: CorpusStore,
    keep_last: int,
    keep: Iterable[str] = (),
    *,
    dry_run: bool = False,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    staging_max_age: timedelta = STAGING_MAX_AGE,
    rewrite: bool | None = None,
) -> GcSummary:
    """Prune every version that is not kept (docs/ingest.md, "Retention") and compact what stays.

    Crash safety: gc holds the store's writer lock, excludes readers (CorpusStore.reading), and holds the answer
    store's lock while it decides what is cited and deletes manifests. Until cleanup, every tag points at a table
    version holding its version's rows (old history or rewritten) and nothing a tag references is deleted;
    manifests follow the new table versions before cleanup. `.gc-pending` is written before the rewrite and removed
    after cleanup, so an interrupted gc leaves every kept version readable and the next gc redoes the rewrite.

    dry_run: change nothing, report what would go (bytes_after counts only the files outside LanceDB).
    rewrite: rewrite the kept versions' LanceDB data (None: when versions were pruned now, or a gc died midway).
    """
    started = time.perf_counter()
    # Readers (stale, verify, repair) read the versions gc prunes and rewrites and write beside the outputs it removes.
    with store.lock(lock_timeout), nullcontext() if dry_run else store.excluding_readers(lock_timeout):
        before = store_bytes(store)
        try:  # no answer may start citing a version between the decision and the manifest's removal
            with nullcontext() if dry_run else _answers_lock(store, lock_timeout):
                kept, pruned = plan(store, keep_last, keep)
                _check_tags(store, list(kept))
                doomed = removals(store, list(kept), pruned, staging_max_age)
                summary = GcSummary(dry_run, keep_last, pruned, kept, doomed, before)
                if dry_run:
                    summary.bytes_after = before - sum(r.bytes for r in doomed)
                    summary.seconds = time.perf_counter() - started
                    return summary
                for removal in doomed:
                    if removal.kind == "manifest":
                        _remove(store, removal)
        except filelock.Timeout:
            raise StoreLocked(
                f"the answer store under {store.root} is locked by a writer; waited {lock_timeout:g}s"
            ) from None
        for removal in doomed:
            if removal.kind != "manifest":
                _remove(store, removal)
        _prune_lance(store, list(kept), rewrite, summary)
        summary.bytes_after = store_bytes(store)
        summary.seconds = time.perf_counter() - started
    return summary


def _answers_lock(store: CorpusStore, timeout: float) -> filelock.FileLock:
    """The answer store's writers' lock (StoreLayout.answers_lock)."""
    store.layout.answers_dir.mkdir(parents=True, exist_ok=True)
    return filelock.FileLock(str(store.layout.answers_lock), timeout=timeout)


def _check_tags(store: CorpusStore, kept: list[str]) -> None:
    """Every kept version must be readable by its tag before anything is removed."""
    for table in TABLES:
        dataset = store.lance_head(table)
        if dataset is not None and kept:
            missing = [name for name in kept if name not in dataset.tags.list()]
            if missing:
                raise StoreError(
                    f"LanceDB table {table} has no tag for corpus version(s) {missing}; gc changed nothing"
                )


def _prune_lance(store: CorpusStore, kept: list[str], rewrite: bool | None, summary: GcSummary) -> None:
    """Drop the tags of versions not kept, rewrite the kept ones (by default: when a tag went, that is when a
    version was pruned now or by an interrupted gc, or when an earlier rewrite did not finish), clean up."""
    pending = store.layout.gc_pending
    heads = {name: store.lance_head(name) for name in TABLES}
    tables = {name: dataset for name, dataset in heads.items() if dataset is not None}
    if not tables:
        return
    if rewrite is None:
        rewrite = pending.exists() or any(set(t.tags.list()) - set(kept) for t in tables.values())
    rewrite = rewrite and bool(kept)
    if rewrite:
        atomic_write_text(pending, json.dumps({"kept": kept}) + "\n")
    new_versions: dict[str, dict[str, int]] = {name: {} for name in kept}
    for table, dataset in tables.items():
        tags = {name: tag["version"] for name, tag in dataset.tags.list().items()}
        for name in tags:
            if name not in kept:  # pruned now, or left by a gc or commit that died
                dataset.tags.delete(name)
        if rewrite:
            for name, version in _rewrite(dataset, table, kept, tags).items():
                new_versions[name][table] = version
    if rewrite:
        for name, versions in new_versions.items():
            _update_manifest(store, name, versions)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary.lance_versions_removed = {table: _cleanup(store, table) for table in tables}
    summary.lance_rewritten = rewrite
    pending.unlink(missing_ok=True)
