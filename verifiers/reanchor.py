"""Re-anchor stale and removed citations: find where their evidence went in the target version.

Three tiers, first hit wins; the suggestion's `method` says which one found it:
1. verbatim: the evidence (quote, or the whole cited chunk) in a document's canonical text, located with
   citekeeper.locate.locate_quote: `exact` (a literal substring, searched in every document first) or
   `normalized` (equal after NFKC, typographic folding and whitespace collapsing: full-width forms,
   curly quotes, line breaks); preferred documents (the successor's, then the cited one) first;
2. `fuzzy`: rapidfuzz partial_ratio over the target chunks (preferred documents first), aligned to a span of
   whole words (rapidfuzz compares code points, so it works for Chinese as for English);
3. `hybrid`: LanceDB hybrid search (vectors + full text) for the most similar chunk, score = cosine; or
   `fts` when the corpus' embedding model cannot be loaded: full-text search only, score = the share of
   the evidence's character bigrams found in the chunk (citekeeper.embeddings.bigram_containment).
Each suggestion is a chunk_id plus code-point offsets into its document's canonical text and a 0..1 score
(1.0 for exact and normalized).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl
from rapidfuzz import fuzz, process

from citekeeper.locate import locate_quote
from citekeeper.text import normalize_text, snap_to_words

FUZZY_MIN_SCORE = 0.85
HYBRID_MIN_SCORE = 0.5  # cosine for `hybrid`, bigram containment for `fts`

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
    method: str  # exact | normalized | fuzzy | hybrid | fts
    text: str


def _preferences(doc_ids: Iterable[str | None]) -> list[str]:
    """Preferred document ids in order, without nulls or repeats (a successor is often in the cited
    document itself, and a ranking needs each id once)."""
    return list(dict.fromkeys(d for d in doc_ids if d is not None))


class Reanchorer:
    """Searches one target version. `index_factory` (returning a citekeeper.embeddings.ChunkIndex) is
    optional and called only when the verbatim and fuzzy tiers both miss."""

    def __init__(self, target_docs: pl.DataFrame, target_chunks: pl.DataFrame, index_factory=None):
        self.docs = target_docs.select("doc_id", "text")
        self.chunks = target_chunks.select("chunk_id", "doc_id", "text", "start_char", "end_char", "access_scope", "source_path")
        self._index_factory = index_factory
        self._index = None
        self._normalized_docs: pl.DataFrame | None = None

    def suggest(self, evidence: str, prefer_doc_ids: Iterable[str | None]) -> Suggestion | None:
        prefer = _preferences(prefer_doc_ids)
        return self.verbatim(evidence, prefer) or self.fuzzy(evidence, prefer) or self.hybrid(evidence)

    def _preferred_first(self, frame: pl.DataFrame, prefer: list[str]) -> pl.DataFrame:
        rank = pl.col("doc_id").replace_strict(prefer, range(len(prefer)), default=len(prefer))
        return frame.with_columns(_rank=rank).sort("_rank", maintain_order=True).drop("_rank")

    def verbatim(self, evidence: str, prefer: list[str]) -> Suggestion | None:
        """An exact match in any document (preferred first), else a normalised one."""
        for candidates in (self._containing(evidence), self._containing_normalized(evidence)):
            for doc in self._preferred_first(candidates, prefer).iter_rows(named=True):
                match = locate_quote(doc["text"], evidence)
                if match is not None:
                    return self._span(doc["doc_id"], match.start, match.end, 1.0, match.kind, doc["text"])
        return None

    def _containing(self, evidence: str) -> pl.DataFrame:
        return self.docs.filter(pl.col("text").str.contains(evidence, literal=True))

    def _containing_normalized(self, evidence: str) -> pl.DataFrame:
        """Documents whose normalised text contains the normalised evidence: a vectorised filter, so
        locate_quote (a per-character offset map) runs only on documents that match."""
        needle = normalize_text(evidence)
        if not needle:
            return self.docs.clear()
        if self._normalized_docs is None:  # normalised once per target version, on first need
            self._normalized_docs = self.docs.with_columns(
                _normalized=pl.col("text").map_elements(normalize_text, return_dtype=pl.String)
            )
        return self._normalized_docs.filter(pl.col("_normalized").str.contains(needle, literal=True)).drop("_normalized")

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

    def fuzzy(self, evidence: str, prefer: list[str]) -> Suggestion | None:
        own = self.chunks.filter(pl.col("doc_id").is_in(prefer))
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
        if len(evidence) <= len(chunk["text"]):  # an aligned window can cut words: suggest whole ones
            start, end = snap_to_words(chunk["text"], alignment.dest_start, alignment.dest_end)
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
        return Suggestion(best.chunk_id, best.start_char, best.end_char, best.score, best.method, best.text)


def reanchor(rows: pl.DataFrame, reanchorer: Reanchorer) -> pl.DataFrame:
    """Suggestions for citation rows (citation_id, evidence, doc_id, new_doc_id); one row per citation."""
    out = []
    for row in rows.select("citation_id", "evidence", "doc_id", "new_doc_id").iter_rows(named=True):
        found = reanchorer.suggest(row["evidence"], (row["new_doc_id"], row["doc_id"]))
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
