"""Diff two corpus versions at document and chunk level, in polars. Only the chunks of changed documents are read,
so the cost follows the size of the change, not of the corpus (matching and change kinds: docs/answers.md)."""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np
import polars as pl
from rapidfuzz import fuzz, process

from citekeeper.native_locator import LOCATOR_COLUMNS
from citekeeper.schema import CHUNK_DIFF, DOC_DIFF
from citekeeper.scope import aggregate_documents, withhold_documents
from citekeeper.tables import conform, counts_of, read_parquet, write_parquet

DOC_COLUMNS = ["doc_id", "doc_content_hash", "source_path"]
DEFAULT_THRESHOLD = 0.5  # minimum text similarity (0..1) for a chunk to count as a modified successor
SIMILARITY_THREADS = 4

Frame = pl.DataFrame | pl.LazyFrame


@dataclass(frozen=True)
class VersionDiff:
    old_version: str
    new_version: str
    chunks: pl.DataFrame  # schema CHUNK_DIFF
    docs: pl.DataFrame  # schema DOC_DIFF

    def chunk_counts(self) -> dict[str, int]:
        return _counts(self.chunks)

    def doc_counts(self) -> dict[str, int]:
        return _counts(self.docs)

    def changed_docs(self) -> pl.DataFrame:
        return self.docs.filter(pl.col("change") != "unchanged")

    def shared(self, store) -> VersionDiff:
        """This diff as shared outputs show it: the doc_ids and paths of aggregate_only documents withheld."""
        withheld = aggregate_documents(store, [self.old_version, self.new_version])
        return replace(
            self, chunks=withhold_documents(self.chunks, withheld), docs=withhold_documents(self.docs, withheld)
        )


def _counts(frame: pl.DataFrame) -> dict[str, int]:
    return counts_of(frame, "change")


# ---------------------------------------------------------------- documents


def _with_occurrence(frame: pl.DataFrame, key: str | list[str], order: str) -> pl.DataFrame:
    """Number equal keys 0, 1, 2... so duplicates pair up one to one in a join."""
    return frame.sort(order).with_columns(pl.int_range(pl.len()).over(key).alias("_occ"))


def _doc_rows(paired: pl.DataFrame, change: pl.Expr) -> pl.DataFrame:
    """DOC_DIFF columns from an old/new join whose new-side columns carry the suffix `_new`."""
    return paired.select(
        change.alias("change"),
        pl.col("doc_id").alias("old_doc_id"),
        pl.col("doc_id_new").alias("new_doc_id"),
        pl.col("source_path").alias("old_source_path"),
        pl.col("source_path_new").alias("new_source_path"),
        pl.col("doc_content_hash").alias("old_content_hash"),
        pl.col("doc_content_hash_new").alias("new_content_hash"),
    )


def diff_documents(old_docs: Frame, new_docs: Frame) -> pl.DataFrame:
    """Document-level changes; columns of DOC_DIFF without the version columns."""
    old = old_docs.lazy().select(DOC_COLUMNS).collect()
    new = new_docs.lazy().select(DOC_COLUMNS).collect()
    same_id = old.join(new, on="doc_id", how="inner", suffix="_new", coalesce=False)
    same_content = pl.col("doc_content_hash") == pl.col("doc_content_hash_new")
    both = _doc_rows(
        same_id,
        # An explicit doc_id keeps its id at a new path: a rename, whose chunks are compared for their new locator.
        pl.when(same_content & (pl.col("source_path") == pl.col("source_path_new")))
        .then(pl.lit("unchanged"))
        .when(same_content)
        .then(pl.lit("renamed"))
        .otherwise(pl.lit("modified")),
    )
    # Documents on one side only: equal content under another doc_id is a rename.
    gone = _with_occurrence(old.join(new, on="doc_id", how="anti"), "doc_content_hash", "doc_id")
    came = _with_occurrence(new.join(old, on="doc_id", how="anti"), "doc_content_hash", "doc_id")
    paired = gone.join(came, on=["doc_content_hash", "_occ"], how="full", suffix="_new", coalesce=False)
    unpaired = _doc_rows(
        paired,
        pl.when(pl.col("doc_id").is_null())
        .then(pl.lit("added"))
        .when(pl.col("doc_id_new").is_null())
        .then(pl.lit("removed"))
        .otherwise(pl.lit("renamed")),
    )
    return pl.concat([both, unpaired]).sort("change", "old_doc_id", "new_doc_id", nulls_last=True)


# ---------------------------------------------------------------- chunks

MATCH_COLUMNS = ["chunk_id", "doc_id", "text_hash", "start_char", "end_char"]
# Where a chunk is: the same text anywhere else in these is a move, never `unchanged`.
LOCATOR = ["start_char", "end_char", "section_path", "source_path", *LOCATOR_COLUMNS]
CHUNK_COLUMNS = list(dict.fromkeys([*MATCH_COLUMNS, *LOCATOR, "text"]))
LINK_SCHEMA = {"old_row": pl.UInt32, "new_row": pl.UInt32, "change": pl.String, "similarity": pl.Float64}
# doc_ids -> the CHUNK_COLUMNS of a version's chunks in those documents; a store reads them through its
# doc_id index, so what a diff reads follows the change.
ChunkReader = Callable[[list[str]], pl.DataFrame]


def _same_text_links(old: pl.DataFrame, new: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Pair rows with equal `by` keys; the k-th occurrence on one side pairs with the k-th on the other."""
    keys = [*by, "_occ"]
    # Number only the rows whose key occurs on both sides (usually few), not every unmatched row.
    old, new = old.join(new.select(by), on=by, how="semi"), new.join(old.select(by), on=by, how="semi")
    if old.is_empty():
        return pl.DataFrame(schema={"old_row": pl.UInt32, "new_row": pl.UInt32})
    o = _with_occurrence(old, by, "start_char").select(*keys, old_row="_row")
    n = _with_occurrence(new, by, "start_char").select(*keys, new_row="_row")
    return o.join(n, on=keys).select("old_row", "new_row")


def _similar_links(old: pl.DataFrame, new: pl.DataFrame, threshold: float) -> pl.DataFrame:
    """Greedy best-first pairing by text similarity, only within each document present on both sides.
    A pair that is the best of both its old and its new row is one greedy would take (ties go to the
    first row), so each round takes all such mutual-best pairs of every document at once."""
    candidates = _similar_candidates(old, new, threshold)
    similarity = pl.col("similarity")
    taken = []
    while not candidates.is_empty():
        best_new = (
            candidates.filter(similarity == similarity.max().over("old_row"))
            .group_by("old_row")
            .agg(pl.col("new_row").min())
        )
        best_old = (
            candidates.filter(similarity == similarity.max().over("new_row"))
            .group_by("new_row")
            .agg(pl.col("old_row").min())
        )
        mutual = candidates.join(
            best_new.join(best_old, on=["old_row", "new_row"]), on=["old_row", "new_row"], how="semi"
        )
        taken.append(mutual)
        candidates = candidates.join(mutual, on="old_row", how="anti").join(mutual, on="new_row", how="anti")
    return pl.concat([candidates, *taken])  # candidates is empty by now; it gives the schema if none were taken


def _similar_candidates(old: pl.DataFrame, new: pl.DataFrame, threshold: float) -> pl.DataFrame:
    """(old_row, new_row, similarity) of each pair in one document with a similarity at or above the threshold."""
    old, new = old.sort("doc_id", "_row"), new.sort("doc_id", "_row")
    # Each document's old x new score matrix, flattened row-major, lines up with this join's pairs.
    pairs = old.select("doc_id", old_row="_row").join(
        new.select("doc_id", new_row="_row"), on="doc_id", maintain_order="left_right"
    )
    texts = (
        old.group_by("doc_id", maintain_order=True)
        .agg("text")
        .join(new.group_by("doc_id", maintain_order=True).agg("text"), on="doc_id", maintain_order="left")
    )
    docs = list(zip(texts["text"].to_list(), texts["text_right"].to_list()))
    # rapidfuzz releases the GIL, so batches of documents are scored on all cores.
    workers = min(os.cpu_count() or 1, SIMILARITY_THREADS)
    size = max(1, -(-len(docs) // workers))
    with ThreadPoolExecutor(workers) as pool:
        batches = list(pool.map(_score_docs, [docs[i : i + size] for i in range(0, len(docs), size)]))
    similarity = np.concatenate([np.empty(0), *batches]) / 100.0
    return pairs.select("old_row", "new_row", similarity=similarity).filter(pl.col("similarity") >= threshold)


def _score_docs(docs: list[tuple[list[str], list[str]]]) -> np.ndarray:
    return np.concatenate(
        [process.cdist(a, b, scorer=fuzz.ratio, workers=1, dtype=np.float64).ravel() for a, b in docs]
    )


def _same_locator(suffix: str = "_new") -> pl.Expr:
    return pl.all_horizontal(pl.col(c).eq_missing(pl.col(c + suffix)) for c in LOCATOR)


def _same_id_links(old: pl.DataFrame, new: pl.DataFrame) -> pl.DataFrame:
    """Same chunk_id on both sides: modified (other text, with its text ratio), unchanged (same locator) or moved."""
    same = old.join(new, on="chunk_id", suffix="_new")
    same_text = pl.col("text_hash") == pl.col("text_hash_new")
    edited = same.with_row_index("_i").filter(~same_text)
    ratios = process.cpdist(edited["text"].to_list(), edited["text_new"].to_list(), scorer=fuzz.ratio, dtype=np.float64)
    similarity = pl.Series(np.ones(same.height)).scatter(edited["_i"], ratios / 100.0)
    return same.select(
        old_row="_row",
        new_row="_row_new",
        change=pl.when(~same_text)
        .then(pl.lit("modified"))
        .when(_same_locator())
        .then(pl.lit("unchanged"))
        .otherwise(pl.lit("moved")),
        similarity=similarity,
    )


def _repeated(old: pl.DataFrame, new: pl.DataFrame) -> pl.DataFrame:
    """(doc_id, text_hash) of the text that occurs more than once in a document on either side."""
    counts = [side.group_by("doc_id", "text_hash").len().filter(pl.col("len") > 1) for side in (old, new)]
    return pl.concat(counts).select("doc_id", "text_hash").unique()


def _positional_links(old: pl.DataFrame, new: pl.DataFrame, repeated: pl.DataFrame) -> pl.DataFrame:
    """Copies of repeated text paired by position: each such document's chunk sequence (by text_hash, in text
    order) aligned old to new by a longest common subsequence, and the aligned copies paired, unchanged or
    moved. Chunk ids number the copies, so when an earlier copy goes the survivor takes the deleted one's id:
    ids cannot pair them."""
    docs = repeated["doc_id"].unique().implode()
    old_seq, new_seq = (
        side.filter(pl.col("doc_id").is_in(docs))
        .sort("doc_id", "start_char")
        .group_by("doc_id", maintain_order=True)
        .agg("text_hash", "_row")
        for side in (old, new)
    )
    pairs: list[tuple[int, int]] = []
    for _, hashes, rows, new_hashes, new_rows in old_seq.join(new_seq, on="doc_id").iter_rows():
        pairs.extend((rows[i], new_rows[j]) for i, j in _common_subsequence(hashes, new_hashes))
    aligned = pl.DataFrame(pairs, schema={"old_row": pl.UInt32, "new_row": pl.UInt32}, orient="row")
    paired = (
        aligned.join(old, left_on="old_row", right_on="_row")
        .join(new, left_on="new_row", right_on="_row", suffix="_new")
        .join(repeated, on=["doc_id", "text_hash"], how="semi")  # unique text pairs by chunk_id
    )
    unchanged = (pl.col("chunk_id") == pl.col("chunk_id_new")) & _same_locator()
    return paired.select(
        "old_row",
        "new_row",
        change=pl.when(unchanged).then(pl.lit("unchanged")).otherwise(pl.lit("moved")),
        similarity=pl.lit(1.0),
    )


def _common_subsequence(old: list[str], new: list[str]) -> list[tuple[int, int]]:
    """The (i, j) pairs of a longest common subsequence of two sequences (Hunt-Szymanski: a longest increasing
    run of the equal pairs, O(pairs log n)). difflib's longest-block-first matching is not one: with
    P A P -> A X P it pairs the deleted first P with the survivor."""
    where: dict[str, list[int]] = {}
    for j, key in enumerate(new):
        where.setdefault(key, []).append(j)
    tails: list[int] = []  # tails[k]: the smallest j ending a common run of length k + 1
    ends: list[tuple] = []  # the (i, j, previous) node at each tails[k]
    node: tuple | None
    for i, key in enumerate(old):
        for j in reversed(where.get(key, ())):  # descending: one j per i in any increasing run
            k = bisect.bisect_left(tails, j)
            node = (i, j, ends[k - 1] if k else None)
            if k == len(tails):
                tails.append(j)
                ends.append(node)
            else:
                tails[k], ends[k] = j, node
    pairs: list[tuple[int, int]] = []
    node = ends[-1] if ends else None
    while node is not None:
        pairs.append((node[0], node[1]))
        node = node[2]
    return pairs[::-1]


def _unmatched(frame: pl.DataFrame, links: pl.DataFrame, side: str) -> pl.DataFrame:
    return frame.filter(~pl.col("_row").is_in(links[side].implode()))


def diff_chunks(
    old_chunks: pl.DataFrame, new_chunks: pl.DataFrame, threshold: float = DEFAULT_THRESHOLD
) -> pl.DataFrame:
    """Chunk-level changes between two sets of chunks (CHUNK_COLUMNS; in practice the changed documents')."""
    old, new = old_chunks.with_row_index("_row"), new_chunks.with_row_index("_row")
    repeated = _repeated(old, new)
    by_position = _positional_links(old, new, repeated)
    old_left, new_left = _unmatched(old, by_position, "old_row"), _unmatched(new, by_position, "new_row")
    unique_text = [side.join(repeated, on=["doc_id", "text_hash"], how="anti") for side in (old_left, new_left)]
    same_id = _same_id_links(*unique_text)
    links = [by_position, same_id]
    old_left, new_left = _unmatched(old_left, same_id, "old_row"), _unmatched(new_left, same_id, "new_row")
    # Each later stage sees only what the earlier ones left unmatched.
    for by, change in ((["doc_id", "text_hash"], "moved"), (["text_hash"], "relocated")):
        pairs = _same_text_links(old_left, new_left, by)
        links.append(pairs.with_columns(change=pl.lit(change), similarity=pl.lit(1.0)))
        old_left, new_left = _unmatched(old_left, pairs, "old_row"), _unmatched(new_left, pairs, "new_row")
    similar = _similar_links(old_left, new_left, threshold)
    links.append(similar.with_columns(change=pl.lit("modified")))
    links.append(_unmatched(old_left, similar, "old_row").select(old_row="_row", change=pl.lit("removed")))
    links.append(_unmatched(new_left, similar, "new_row").select(new_row="_row", change=pl.lit("added")))
    every = pl.concat(
        [link.cast({k: v for k, v in LINK_SCHEMA.items() if k in link.columns}) for link in links], how="diagonal"
    )
    every = every.join(_side(old, "old"), on="old_row", how="left").join(_side(new, "new"), on="new_row", how="left")
    return every.select(name for name in CHUNK_DIFF.names if name in every.columns)


def _side(frame: pl.DataFrame, prefix: str) -> pl.DataFrame:
    """One side's locator columns, named as in CHUNK_DIFF (old_row/old_chunk_id, ...)."""
    return frame.select(
        pl.col("_row").alias(f"{prefix}_row"), *(pl.col(c).alias(f"{prefix}_{c}") for c in MATCH_COLUMNS)
    )


# ---------------------------------------------------------------- versions


def diff_changed(
    old_version: str,
    new_version: str,
    old_docs: Frame,
    new_docs: Frame,
    read_old_chunks: ChunkReader,
    read_new_chunks: ChunkReader,
    threshold: float = DEFAULT_THRESHOLD,
) -> VersionDiff:
    """Diff two versions: documents by content hash, then only the changed documents' chunks, which the
    readers fetch (so the cost follows the change, not the corpus)."""
    docs = diff_documents(old_docs, new_docs)
    changed = docs.filter(pl.col("change") != "unchanged")
    with ThreadPoolExecutor(2) as pool:  # the two reads overlap: LanceDB and polars release the GIL
        old = pool.submit(read_old_chunks, changed["old_doc_id"].drop_nulls().to_list())
        new = pool.submit(read_new_chunks, changed["new_doc_id"].drop_nulls().to_list())
        chunks = diff_chunks(old.result(), new.result(), threshold)
    versions = [pl.lit(old_version).alias("old_version"), pl.lit(new_version).alias("new_version")]
    return VersionDiff(
        old_version,
        new_version,
        chunks=conform(chunks.with_columns(versions), CHUNK_DIFF),
        docs=conform(docs.with_columns(versions), DOC_DIFF),
    )


def _store_reader(store, version: str) -> ChunkReader:
    return lambda doc_ids: store.read_chunks(version, columns=CHUNK_COLUMNS, doc_ids=doc_ids)


def diff_versions(store, old_version: str, new_version: str) -> VersionDiff:
    """Diff two versions of a CorpusStore (default threshold), cached under <store.root>/diffs/<old>__<new>/
    (versions are immutable)."""
    chunk_path = store.layout.chunk_diff_file(old_version, new_version)
    doc_path = store.layout.doc_diff_file(old_version, new_version)
    if chunk_path.exists() and doc_path.exists():
        return VersionDiff(
            old_version, new_version, read_parquet(chunk_path, CHUNK_DIFF), read_parquet(doc_path, DOC_DIFF)
        )
    result = diff_changed(  # reading an unknown version raises UnknownVersion naming the known ones
        old_version,
        new_version,
        store.read_documents(old_version, columns=DOC_COLUMNS),
        store.read_documents(new_version, columns=DOC_COLUMNS),
        _store_reader(store, old_version),
        _store_reader(store, new_version),
    )
    write_parquet(result.chunks, CHUNK_DIFF, chunk_path)
    write_parquet(result.docs, DOC_DIFF, doc_path)
    return result
