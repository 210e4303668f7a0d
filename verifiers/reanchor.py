"""Re-anchor stale and removed citations: find where their evidence went in the target version.

Three tiers, first hit wins:
1. exact: the evidence (quote, or the whole cited chunk) verbatim in a document's canonical text,
   the citation's own document first;
2. fuzzy: rapidfuzz partial_ratio over the target chunks (own document first), aligned to a span;
3. hybrid: LanceDB hybrid search (MiniLM vectors + full text) for the most similar chunk.
Each suggestion is a chunk_id plus offsets into its document's canonical text and a 0..1 score.
"""
from __future__ import annotations

from dataclasses import dataclass

import polars as pl
from rapidfuzz import fuzz, process

FUZZY_MIN_SCORE = 0.85
HYBRID_MIN_SCORE = 0.5

SUGGESTION_SCHEMA = {
    "citation_id": pl.String,
    "suggested_chunk_id": pl.String,
    "suggested_start_char": pl.Int64,
    "suggested_end_char": pl.Int64,
    "suggested_score": pl.Float64,
    "suggested_method": pl.String,
    "suggested_text": pl.String,
}


@dataclass(frozen=True)
class Suggestion:
    chunk_id: str
    start_char: int
    end_char: int
    score: float
    method: str  # exact | fuzzy | hybrid
    text: str


class Reanchorer:
    """Searches one target version. `index` (a citekeeper.embeddings.ChunkIndex factory) is optional and
    built only when the exact and fuzzy tiers both miss."""

    def __init__(self, target_docs: pl.DataFrame, target_chunks: pl.DataFrame, index_factory=None):
        self.docs = target_docs.select("doc_id", "text")
        self.chunks = target_chunks.select("chunk_id", "doc_id", "text", "start_char", "end_char", "access_scope", "source_path")
        self._index_factory = index_factory
        self._index = None

    def suggest(self, evidence: str, prefer_doc_ids: list[str]) -> Suggestion | None:
        return self.exact(evidence, prefer_doc_ids) or self.fuzzy(evidence, prefer_doc_ids) or self.hybrid(evidence)

    def _preferred_first(self, frame: pl.DataFrame, prefer_doc_ids: list[str]) -> pl.DataFrame:
        rank = pl.col("doc_id").replace_strict(prefer_doc_ids, range(len(prefer_doc_ids)), default=len(prefer_doc_ids))
        return frame.with_columns(_rank=rank).sort("_rank", maintain_order=True).drop("_rank")

    def exact(self, evidence: str, prefer_doc_ids: list[str]) -> Suggestion | None:
        found = self.docs.filter(pl.col("text").str.contains(evidence, literal=True))
        if found.is_empty():
            return None
        doc = self._preferred_first(found, prefer_doc_ids).row(0, named=True)
        start = doc["text"].index(evidence)
        return self._span(doc["doc_id"], start, start + len(evidence), 1.0, "exact", doc["text"])

    def _span(self, doc_id: str, start: int, end: int, score: float, method: str, doc_text: str) -> Suggestion:
        """The suggestion for a document span: the chunk overlapping it most carries it."""
        overlap = pl.min_horizontal(pl.col("end_char"), pl.lit(end)) - pl.max_horizontal(pl.col("start_char"), pl.lit(start))
        best = (
            self.chunks.filter(pl.col("doc_id") == doc_id)
            .with_columns(_overlap=overlap)
            .sort("_overlap", descending=True)
            .row(0, named=True)
        )
        return Suggestion(best["chunk_id"], start, end, score, method, doc_text[start:end])

    def fuzzy(self, evidence: str, prefer_doc_ids: list[str]) -> Suggestion | None:
        own = self.chunks.filter(pl.col("doc_id").is_in(prefer_doc_ids))
        for candidates in (own, self.chunks):
            if candidates.is_empty():
                continue
            hit = process.extractOne(
                evidence, candidates["text"].to_list(), scorer=fuzz.partial_ratio, score_cutoff=FUZZY_MIN_SCORE * 100
            )
            if hit is not None:
                chunk = candidates.row(hit[2], named=True)
                return self._aligned(evidence, chunk)
        return None

    def _aligned(self, evidence: str, chunk: dict) -> Suggestion:
        alignment = fuzz.partial_ratio_alignment(evidence, chunk["text"])
        if len(evidence) <= len(chunk["text"]):
            start, end = alignment.dest_start, alignment.dest_end
        else:  # the chunk is the shorter side: it is contained in the evidence, suggest all of it
            start, end = 0, len(chunk["text"])
        return Suggestion(
            chunk["chunk_id"],
            chunk["start_char"] + start,
            chunk["start_char"] + end,
            alignment.score / 100.0,
            "fuzzy",
            chunk["text"][start:end],
        )

    def hybrid(self, evidence: str) -> Suggestion | None:
        if self._index_factory is None:
            return None
        if self._index is None:
            self._index = self._index_factory()
        hits = [h for h in self._index.search(evidence, limit=5) if h.score >= HYBRID_MIN_SCORE]
        if not hits:
            return None
        best = max(hits, key=lambda h: h.score)
        return Suggestion(best.chunk_id, best.start_char, best.end_char, best.score, "hybrid", best.text)


def reanchor(rows: pl.DataFrame, reanchorer: Reanchorer) -> pl.DataFrame:
    """Suggestions for citation rows (citation_id, evidence, doc_id, new_doc_id); one row per citation."""
    out = []
    for row in rows.select("citation_id", "evidence", "doc_id", "new_doc_id").iter_rows(named=True):
        prefer = [d for d in (row["new_doc_id"], row["doc_id"]) if d is not None]
        found = reanchorer.suggest(row["evidence"], prefer)
        out.append(
            {"citation_id": row["citation_id"]}
            | (
                {
                    "suggested_chunk_id": found.chunk_id,
                    "suggested_start_char": found.start_char,
                    "suggested_end_char": found.end_char,
                    "suggested_score": found.score,
                    "suggested_method": found.method,
                    "suggested_text": found.text,
                }
                if found
                else {}
            )
        )
    where = reanchorer.chunks.select(
        suggested_chunk_id="chunk_id", suggested_source_path="source_path", suggested_access_scope="access_scope"
    )
    return pl.DataFrame(out, schema=SUGGESTION_SCHEMA).join(where, on="suggested_chunk_id", how="left")
