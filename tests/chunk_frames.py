"""Small CHUNKS/DOCUMENTS frames built from plain document texts, for diff and citation tests.

Chunks are the paragraphs of each document (split on blank lines) with ids derived the way the ingest
contract describes: doc_id + text + occurrence, so an unchanged paragraph keeps its id.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from changes.diff import CHUNK_COLUMNS, DEFAULT_THRESHOLD, ChunkReader, Frame, VersionDiff, diff_changed
from citekeeper.identity import text_hash
from citekeeper.schema import CHUNKS, DOCUMENTS
from citekeeper.tables import from_rows

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def doc_id_of(path: str) -> str:
    return "doc_" + hashlib.sha256(path.encode()).hexdigest()[:12]


def build_version(
    version: str, docs: dict[str, str], internal: frozenset[str] = frozenset()
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(documents, chunks) of one version; `docs` maps source_path -> canonical text."""
    doc_rows, chunk_rows = [], []
    for path, text in docs.items():
        doc_id = doc_id_of(path)
        scope = "internal_only" if path in internal else "user_visible"
        paragraphs, seen, cursor = [], {}, 0
        for part in text.split("\n\n"):
            start = text.index(part, cursor)
            cursor = start + len(part)
            if part.strip():
                paragraphs.append((part, start))
        for ordinal, (part, start) in enumerate(paragraphs):
            occurrence = seen[part] = seen.get(part, -1) + 1
            chunk_rows.append(
                {
                    "chunk_id": "chk_" + hashlib.sha256(f"{doc_id}|{part}|{occurrence}".encode()).hexdigest()[:16],
                    "doc_id": doc_id,
                    "corpus_version": version,
                    "doc_content_hash": text_hash(text),
                    "ordinal": ordinal,
                    "text": part,
                    "text_hash": text_hash(part),
                    "start_char": start,
                    "end_char": start + len(part),
                    "page_start": None,
                    "page_end": None,
                    "section_path": [path],
                    "element_types": ["NarrativeText"],
                    "source_path": path,
                    "title": path,
                    "filetype": "md",
                    "access_scope": scope,
                    "ingested_at": NOW,
                }
            )
        doc_rows.append(
            {
                "doc_id": doc_id,
                "corpus_version": version,
                "doc_content_hash": text_hash(text),
                "source_path": path,
                "title": path,
                "filetype": "md",
                "access_scope": scope,
                "size_bytes": len(text.encode()),
                "n_chunks": len(paragraphs),
                "text": text,
                "ingested_at": NOW,
            }
        )
    return from_rows(doc_rows, DOCUMENTS), from_rows(chunk_rows, CHUNKS)


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def diff_frames(
    old_version: str,
    new_version: str,
    old_docs: Frame,
    new_docs: Frame,
    old_chunks: Frame,
    new_chunks: Frame,
    threshold: float = DEFAULT_THRESHOLD,
) -> VersionDiff:
    """Diff two versions given their document and chunk frames (DataFrames or LazyFrames)."""
    return diff_changed(
        old_version, new_version, old_docs, new_docs, _frame_reader(old_chunks), _frame_reader(new_chunks), threshold
    )


def _frame_reader(chunks: Frame) -> ChunkReader:
    return lambda doc_ids: chunks.lazy().filter(pl.col("doc_id").is_in(doc_ids)).select(CHUNK_COLUMNS).collect()
