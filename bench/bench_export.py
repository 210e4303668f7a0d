"""What a commit's Parquet export costs, in parts by doc_id range against one file (issue #34).

A store of N synthetic documents (five paragraph chunks each, doc_ids as a tree of folders names them) is
committed whole, then 1% of its documents change, either spread over the corpus (every 100th document, as
bench_reindex.py edits) or together (one run of adjacent doc_ids: a folder edited). Each commit goes through
`CorpusStore.commit_version`; the times are the export's (`_export_parquet`) and the whole commit's, which
includes removing the parent's export. The baseline is the same store with one part (docs_per_part above N):
every commit rewrites the whole export, as the single-file layout did. Prints, for each size and kind of change,
parts/one-file for the export of the change (target: below 1 where the change is together; the spread case is
reported as it is).

    .venv/bin/python bench/bench_export.py [--sizes 5000,20000,50000] [--docs-per-part 32]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from citekeeper.schema import INGEST_ERRORS
from citekeeper.store import STORED_SCHEMAS, CorpusStore, VersionManifest
from tests.test_store import document

ONE_FILE = 10**9  # docs_per_part above any corpus here: one part


def rows(doc_ids: list[str], revision: int) -> tuple[pa.Table, pa.Table]:
    built = [
        document(d, [f"Paragraph {i} of {d}, revision {revision}, with words enough to cite." for i in range(5)])
        for d in doc_ids
    ]
    chunks = pa.Table.from_pylist([c for _, cs in built for c in cs], schema=STORED_SCHEMAS["chunks"])
    return chunks, pa.Table.from_pylist([d for d, _ in built], schema=STORED_SCHEMAS["documents"])


def timed_commit(store: CorpusStore, name: str, parent: str | None, doc_ids: list[str], replaced: list[str]):
    """(export seconds, commit seconds) of one commit_version of `doc_ids`' new rows."""
    chunks, documents = rows(doc_ids, revision=0 if parent is None else 1)
    manifest = VersionManifest(
        name=name, parent=parent, created_at="", n_documents=0, n_chunks=0, n_errors=0, corpus_hash=name
    )
    export_s = []
    real_export = store._export_parquet

    def export(*args, **kwargs):
        started = time.perf_counter()
        real_export(*args, **kwargs)
        export_s.append(time.perf_counter() - started)

    store._export_parquet = export  # type: ignore[method-assign]
    started = time.perf_counter()
    with store.lock():
        store.commit_version(
            manifest,
            replaced_doc_ids=replaced,
            chunks=chunks,
            documents=documents,
            errors=INGEST_ERRORS.empty_table(),
        )
    return export_s[0], time.perf_counter() - started


def measure(n_documents: int, docs_per_part: int, together: bool, scratch: Path) -> tuple[float, float, float]:
    """(full export s, export of the 1% change s, commit of the change s) in a fresh store."""
    doc_ids = [f"part-{i // 100:03d}/note-{i:06d}.md" for i in range(n_documents)]
    n_changed = n_documents // 100
    changed = doc_ids[n_documents // 3 : n_documents // 3 + n_changed] if together else doc_ids[::100]
    with tempfile.TemporaryDirectory(dir=scratch) as folder:
        store = CorpusStore(Path(folder) / "store", docs_per_part=docs_per_part)
        full_export, _ = timed_commit(store, "v1", None, doc_ids, [])
        change_export, change_commit = timed_commit(store, "v2", "v1", changed, changed)
    return full_export, change_export, change_commit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="5000,20000,50000")
    parser.add_argument("--docs-per-part", type=int, default=CorpusStore(".").docs_per_part)
    args = parser.parse_args()
    print(f"bench_export: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, {args.docs_per_part}/part")
    with tempfile.TemporaryDirectory(prefix="ck-export-") as scratch:
        for n in (int(size) for size in args.sizes.split(",")):
            for together in (False, True):
                kind = "together (adjacent doc_ids)" if together else "spread (every 100th)"
                one = measure(n, ONE_FILE, together, Path(scratch))
                parts = measure(n, args.docs_per_part, together, Path(scratch))
                print(
                    f"{n:>7,} documents, 1% changed {kind}:\n"
                    f"    one file: full export {one[0]:6.2f} s, export of the change {one[1]:6.3f} s, its commit "
                    f"{one[2]:6.3f} s\n"
                    f"    parts:    full export {parts[0]:6.2f} s, export of the change {parts[1]:6.3f} s, its commit "
                    f"{parts[2]:6.3f} s\n"
                    f"    parts/one file: export of the change {parts[1] / one[1]:.3f}, "
                    f"commit {parts[2] / one[2]:.3f}, full export {parts[0] / one[0]:.2f}",
                    flush=True,
                )
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
