"""Incremental reindex with 1% of documents changed, against a full ingest of the same corpus.

The corpus (>= 200 documents) is built in a temp dir from every httpx-docs release tag, twice over (the
second copy gets a distinct first line, so no two documents are identical). Each round: a full ingest into
a fresh store, then 1% of the documents get a new paragraph and the tree is ingested again as the next
version (only those documents are re-parsed; everything else carries over).

    .venv/bin/python bench/bench_reindex.py [--source DIR] [--rounds N]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_ingest import DEFAULT_SOURCE, Timer, summary
from citekeeper.store import CorpusStore
from parsers.ingest import ingest

TARGET = 0.05
CHANGED_FRACTION = 0.01


def build_corpus(source: Path, out: Path) -> list[Path]:
    files = sorted(p for p in source.rglob("*.md") if p.is_file())
    for copy in ("a", "b"):
        for path in files:
            target = out / copy / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            prefix = "" if copy == "a" else f"Mirror copy of {path.relative_to(source).as_posix()}.\n\n"
            target.write_text(prefix + path.read_text(encoding="utf-8"), encoding="utf-8")
    return sorted(out.rglob("*.md"))


def change(documents: list[Path], round_index: int) -> list[Path]:
    """Append a paragraph to 1% of the documents, spread over the corpus."""
    n_changed = math.ceil(len(documents) * CHANGED_FRACTION)
    step = len(documents) // n_changed
    changed = documents[round_index % step :: step][:n_changed]
    for path in changed:
        with path.open("a", encoding="utf-8") as out:
            out.write(f"\n\nA paragraph added in round {round_index} of the reindex benchmark.\n")
    return changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        corpus = Path(scratch) / "corpus"
        documents = build_corpus(args.source, corpus)
        ingest(documents[0].parent, CorpusStore(Path(scratch) / "warmup"))  # imports, lazy model loads
        full_runs, incremental_runs = [], []
        for round_index in range(args.rounds):
            store_dir = Path(scratch) / "store"
            shutil.rmtree(store_dir, ignore_errors=True)
            store = CorpusStore(store_dir)
            with Timer() as full:
                ingest(corpus, store)
            changed = change(documents, round_index)
            with Timer() as incremental:
                result = ingest(corpus, store)
            assert result.created and result.n_parsed == len(changed), (result.n_parsed, len(changed))
            full_runs.append(full)
            incremental_runs.append(incremental)
    print(
        f"documents: {len(documents)}; changed per round: {len(changed)} "
        f"({len(changed) / len(documents):.1%}); best of {args.rounds} rounds"
    )
    full_cpu, full_wall = summary("full ingest", full_runs, 1, "run")
    incremental_cpu, incremental_wall = summary("incremental reindex", incremental_runs, 1, "run")
    print(f"CPU-time ratio incremental/full: {incremental_cpu / full_cpu:.4f}")
    print(f"ratio incremental/full (wall time): {incremental_wall / full_wall:.4f} (target <= {TARGET})")


if __name__ == "__main__":
    main()
