"""Re-anchor stale and removed citations: find where their evidence went in the target version, by three tiers
(verbatim, fuzzy, then hybrid or full-text search; docs/answers.md) whose candidates come from the preferred
documents and the version's full-text index, so the work per citation does not grow with the corpus."""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

import polars as pl
from rapidfuzz import fuzz, process

from citekeeper.locate import locate_quote
from citekeeper.scope import ACCESS_SCOPES
from citekeeper.text import HAN, normalize_text, snap_to_words

if TYPE_CHECKING:  # for annotations: memory_text_index is imported where an index is first built
    from citekeeper.search_index import ChunkIndex

FUZZY_MIN_SCORE = 0.85
HYBRID_MIN_SCORE = 0.5  # cosine for `hybrid`, bigram containment for `fts`
CANDIDATE_LIMIT = 30  # candidate chunks per citation from the full-text index
PIECE_TERMS = 2  # the evidence is also searched in consecutive pieces of about this many content words...
PIECE_CHARS = 12  # ...or characters, for text written without spaces
MIN_CHAR_PIECES, MAX_PIECES = 3, 16
# English function words: a piece is cut to hold PIECE_TERMS words besides these (a superset of the
# full-text tokenizer's stop words is what matters, the exact list does not).
FUNCTION_WORDS = frozenset(
    "a about above after again against all am an and any are as at be because been before being below between both "
    "but by can did do does doing down during each few for from further had has have having he her here hers herself "
    "him himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only "
    "or other our ours ourselves out over own same she should so some such than that the their theirs them themselves "
    "then there these they this those through to too under until up very was we were what when where which while who "
    "whom why will with would you your yours yourself yourselves".split()
)
_KANA_OR_HAN = re.compile(f"[\u3040-\u30ff{HAN}]")  # kana and Han: scripts written without spaces between words
BATCH = 2_000  # citations per batch in reanchor()
_NORMALIZED_CACHE = 4_096  # normalised texts of preferred documents kept

SUGGESTION_SCHEMA = {
    "citation_id": pl.String,
    "suggested_chunk_id": pl.String,
    "suggested_start_char": pl.Int64,
    "suggested_end_char": pl.Int64,
    "suggested_score": pl.Float64,
    "suggested_method": pl.String,
    "suggested_text": pl.String,
}
_CHUNK_FIELDS = ["chunk_id", "doc_id", "text", "start_char", "end_char"]


@dataclass(frozen=True)
class Suggestion:
    """Where the evidence went: a chunk, code-point offsets into its document's canonical text, and a 0..1 score
    (1.0 for exact and normalized)."""

    chunk_id: str
    start_char: int
    end_char: int
    score: float
    method: str  # exact | normalized | fuzzy | hybrid | fts
    text: str


def _normalized(text: str) -> str:
    """normalize_text(text, loose=True): the form the quote locator's last tier matches in, so a place this
    prefilter passes over holds no match of any tier."""
    return normalize_text(text, loose=True)


def _preferences(doc_ids: Iterable[str | None]) -> list[str]:
    """Preferred document ids in order, without nulls or repeats (a successor is often in the cited
    document itself, and a ranking needs each id once)."""
    return list(dict.fromkeys(d for d in doc_ids if d is not None))


def evidence_pieces(evidence: str) -> list[str]:
    """`evidence` cut into consecutive pieces (2 to MAX_PIECES of them). Text with spaces between words is cut
    between words, each piece holding about PIECE_TERMS words that are not function words (the full-text
    tokenizer drops stop words, so a piece of them alone would match anything); text written without spaces
    (Chinese, Japanese) is cut between characters, about PIECE_CHARS each. Empty for evidence too short to cut."""
    if _KANA_OR_HAN.search(evidence) is None:
        words = evidence.split()
        content = [i for i, word in enumerate(words) if word.strip(string.punctuation).lower() not in FUNCTION_WORDS]
        n = min(MAX_PIECES, max(2, len(content) // PIECE_TERMS))
        if len(content) < 2:
            return []
        starts = [0, *(content[len(content) * k // n] for k in range(1, n)), len(words)]
        parts = [" ".join(words[a:b]) for a, b in pairwise(starts)]
    elif len(evidence) >= 2 * MIN_CHAR_PIECES:
        n = min(MAX_PIECES, max(MIN_CHAR_PIECES, round(len(evidence) / PIECE_CHARS)))
        parts = [evidence[len(evidence) * k // n : len(evidence) * (k + 1) // n].strip() for k in range(n)]
    else:
        return []
    return [p for p in dict.fromkeys(parts) if p and p != evidence]


def search_texts(evidence: str) -> list[str]:
    """What the full-text query of a citation asks for, any of them with all its terms: the evidence, its
    pieces and its normalised form (when normalisation changes it)."""
    normalized = normalize_text(evidence)
    extra = [normalized] if normalized and normalized != evidence else []
    return list(dict.fromkeys([evidence, *evidence_pieces(evidence), *extra]))


class _Candidates:
    """The candidate chunks of one citation found by full-text search, best first, each chunk once."""

    def __init__(self, rows: list[dict]) -> None:
        self.chunks: dict[str, dict] = {}
        for row in rows:
            self.chunks.setdefault(row["chunk_id"], row)

    def doc_ids(self) -> list[str]:
        return list(dict.fromkeys(row["doc_id"] for row in self.chunks.values()))

    def stretches(self, exclude: list[str]) -> dict[str, tuple[int, int]]:
        """doc_id -> (first start_char, last end_char) of its candidate chunks, documents in order."""
        out: dict[str, tuple[int, int]] = {}
        for row in self.chunks.values():
            if row["doc_id"] in exclude:
                continue
            start, end = out.get(row["doc_id"], (row["start_char"], row["end_char"]))
            out[row["doc_id"]] = (min(start, row["start_char"]), max(end, row["end_char"]))
        return out


class Reanchorer:
    """Searches one target version.

    `text_index_factory` returns the version's full-text index (a citekeeper.search_index.ChunkIndex, e.g.
    EmbeddingStore.text_index); without one, an index of `target_chunks` is built in memory on first need.
    `index_factory` (a ChunkIndex with vectors, or full text only) is optional and called only when the
    verbatim and fuzzy tiers both miss. Both are called at most once. `visible`: the access scopes it may
    suggest from; `excluded_docs`: documents it never suggests (those outside the answer's audience). The indexes
    cover the whole version; what they find elsewhere is passed over.
    """

    def __init__(
        self,
        target_docs: pl.DataFrame,
        target_chunks: pl.DataFrame,
        index_factory=None,
        text_index_factory=None,
        visible: tuple[str, ...] = ACCESS_SCOPES,
        excluded_docs: frozenset[str] = frozenset(),
    ):
        chunks = target_chunks.select(
            "chunk_id", "doc_id", "text", "start_char", "end_char", "access_scope", "source_path"
        )
        allowed = pl.col("access_scope").is_in(visible) & ~pl.col("doc_id").is_in(
            pl.Series(list(excluded_docs), dtype=pl.String).implode()
        )
        self.chunks = chunks.filter(allowed).rechunk()
        self._visible_docs = set(self.chunks["doc_id"].to_list())
        self.docs = target_docs.select("doc_id", "text").filter(pl.col("doc_id").is_in(self._visible_docs)).rechunk()
        self._visible_chunks = set(self.chunks["chunk_id"].to_list())
        self._index_factory = index_factory
        self._index: ChunkIndex | None = None
        self._text_index_factory = text_index_factory
        self._text_index: ChunkIndex | None = None
        self._doc_row: dict[str, int] | None = None  # doc_id -> row of self.docs
        # the chunks, each document's contiguous, and doc_id -> (offset, length) in them
        self._chunks_by_doc: tuple[pl.DataFrame, dict[str, tuple[int, int]]] | None = None
        self._normalized_docs: dict[str, str] = {}

    # ------------------------------------------------------------ lookups (no scan per citation)

    def _doc_text(self, doc_id: str) -> str | None:
        if self._doc_row is None:
            self._doc_row = dict(zip(self.docs["doc_id"].to_list(), range(self.docs.height)))
        row = self._doc_row.get(doc_id)
        return None if row is None else self.docs["text"][row]

    def _doc_chunks(self, doc_id: str) -> list[dict]:
        """The chunks of a document, in the order of target_chunks."""
        if self._chunks_by_doc is None:
            self._chunks_by_doc = self._index_chunks_by_document()
        by_doc, slices = self._chunks_by_doc
        found = slices.get(doc_id)
        if found is None:
            return []
        offset, length = found
        return by_doc.slice(offset, length).to_dicts()

    def _index_chunks_by_document(self) -> tuple[pl.DataFrame, dict[str, tuple[int, int]]]:
        """The chunks with each document's contiguous, and doc_id -> (offset, length) of its chunks in them:
        target_chunks itself when each document's chunks are contiguous there (as stored), else a copy grouped
        by document (stable)."""
        frame = self.chunks.select(_CHUNK_FIELDS)
        runs = frame["doc_id"].rle()
        if runs.len() != frame["doc_id"].n_unique():
            frame = frame.sort("doc_id", maintain_order=True)
            runs = frame["doc_id"].rle()
        lengths = runs.struct.field("len").to_list()
        offsets = [0]
        for length in lengths[:-1]:
            offsets.append(offsets[-1] + length)
        return frame.rechunk(), dict(zip(runs.struct.field("value").to_list(), zip(offsets, lengths)))

    def _normalized_text(self, doc_id: str, text: str) -> str:
        """The normalised text of a preferred document, cached (the normalised evidence is searched in it)."""
        found = self._normalized_docs.get(doc_id)
        if found is None:
            if len(self._normalized_docs) >= _NORMALIZED_CACHE:
                self._normalized_docs.clear()
            found = self._normalized_docs[doc_id] = _normalized(text)
        return found

    def _text_search(self, queries: list[list[str]]) -> list[list[dict]]:
        if not queries:
            return []
        if self._text_index is None:
            if self._text_index_factory is not None:
                self._text_index = self._text_index_factory()
            else:
                from citekeeper.search_index import memory_text_index

                self._text_index = memory_text_index(self.chunks)
        found = self._text_index.match_any(queries, CANDIDATE_LIMIT)
        return [[row for row in rows if row["doc_id"] in self._visible_docs] for rows in found]

    # ------------------------------------------------------------ tiers

    def suggest_many(self, items: Sequence[tuple[str, Iterable[str | None]]]) -> list[Suggestion | None]:
        """Where each evidence went, for each (evidence, preferred document ids): the citations' full-text queries
        (one per citation whose preferred documents do not hold the evidence) run as one batch, and so do the last
        tier's searches."""
        evidence = [e for e, _ in items]
        prefer = [[d for d in _preferences(p) if d in self._visible_docs] for _, p in items]
        out: list[Suggestion | None] = [self._exact(e, p) if e is not None else None for e, p in zip(evidence, prefer)]

        # Candidates from the full-text index, one query per citation, then the verbatim and fuzzy tiers.
        pending = [i for i, found in enumerate(out) if found is None and evidence[i] is not None]
        for i, rows in zip(pending, self._text_search([search_texts(evidence[i]) for i in pending])):
            candidates = _Candidates(rows)
            others = [d for d in candidates.doc_ids() if d not in prefer[i]]
            out[i] = (
                self._exact(evidence[i], others)
                or self._normalized_match(evidence[i], prefer[i], candidates)
                or self._fuzzy(evidence[i], prefer[i], candidates)
            )

        # The last tier, for what is still unfound.
        pending = [i for i in pending if out[i] is None]
        for i, found in zip(pending, self._searched([evidence[i] for i in pending])):
            out[i] = found
        return out

    def _exact(self, evidence: str, doc_ids: Iterable[str]) -> Suggestion | None:
        """The first of `doc_ids` holding the evidence literally."""
        for doc_id in doc_ids:
            text = self._doc_text(doc_id)
            if text is None or (start := text.find(evidence)) < 0:
                continue
            found = self._span(doc_id, start, start + len(evidence), 1.0, "exact", text)
            if found is not None:
                return found
        return None

    def _normalized_match(self, evidence: str, prefer: list[str], candidates: _Candidates) -> Suggestion | None:
        """The first place whose normalised text holds the normalised evidence: a preferred document (all of
        it), else the stretch of a candidate document around its candidate chunks. locate_quote (a
        per-character offset map) runs only where the normalised evidence is."""
        needle = _normalized(evidence)
        if not needle:
            return None
        for doc_id in prefer:
            text = self._doc_text(doc_id)
            if text is not None and needle in self._normalized_text(doc_id, text):
                found = self._located(doc_id, text, 0, len(text), evidence)
                if found is not None:
                    return found
        margin = 2 * len(evidence) + 16  # the copy may reach past the candidate chunks into their neighbours
        for doc_id, (start, end) in candidates.stretches(exclude=prefer).items():
            text = self._doc_text(doc_id)
            if text is None:
                continue
            start, end = max(0, start - margin), min(len(text), end + margin)
            if needle in _normalized(text[start:end]):
                found = self._located(doc_id, text, start, end, evidence)
                if found is not None:
                    return found
        return None

    def _located(self, doc_id: str, text: str, start: int, end: int, evidence: str) -> Suggestion | None:
        match = locate_quote(text[start:end], evidence)
        if match is None:
            return None
        return self._span(doc_id, start + match.start, start + match.end, 1.0, match.kind, text)

    def _span(self, doc_id: str, start: int, end: int, score: float, method: str, doc_text: str) -> Suggestion | None:
        """The suggestion for a document span: the chunk overlapping it most carries it (the first such)."""
        chunks = self._doc_chunks(doc_id)
        if not chunks:
            return None
        best = max(chunks, key=lambda c: min(c["end_char"], end) - max(c["start_char"], start))
        return Suggestion(best["chunk_id"], start, end, score, method, doc_text[start:end])

    def _fuzzy(self, evidence: str, prefer: list[str], candidates: _Candidates) -> Suggestion | None:
        """The best partial_ratio match in the preferred documents' chunks, else in the other candidates."""
        own = [chunk for doc_id in prefer for chunk in self._doc_chunks(doc_id)]
        others = [chunk for chunk in candidates.chunks.values() if chunk["doc_id"] not in prefer]
        for pool in (own, others):
            if not pool:
                continue
            hit = process.extractOne(
                evidence, [c["text"] for c in pool], scorer=fuzz.partial_ratio, score_cutoff=FUZZY_MIN_SCORE * 100
            )
            if hit is not None:
                return self._aligned(evidence, pool[hit[2]])
        return None

    def _aligned(self, evidence: str, chunk: dict) -> Suggestion:
        alignment = fuzz.partial_ratio_alignment(evidence, chunk["text"])
        assert alignment is not None, "without a score cutoff there is always an alignment"
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

    def _searched(self, evidence: list[str]) -> list[Suggestion | None]:
        """The hybrid (or full-text only) tier: the best hit scoring at least HYBRID_MIN_SCORE."""
        if self._index_factory is None or not evidence:
            return [None] * len(evidence)
        if self._index is None:
            self._index = self._index_factory()
        out: list[Suggestion | None] = []
        for found in self._index.search_many(evidence, limit=5):
            hits = [h for h in found if h.score >= HYBRID_MIN_SCORE and h.chunk_id in self._visible_chunks]
            best = max(hits, key=lambda h: h.score) if hits else None
            out.append(
                None
                if best is None
                else Suggestion(best.chunk_id, best.start_char, best.end_char, best.score, best.method, best.text)
            )
        return out


def reanchor(rows: pl.DataFrame, reanchorer: Reanchorer, batch: int = BATCH) -> pl.DataFrame:
    """Suggestions for citation rows (citation_id, evidence, doc_id, new_doc_id); one row per citation."""
    out = []
    for part in rows.select("citation_id", "evidence", "doc_id", "new_doc_id").iter_slices(batch):
        found = reanchorer.suggest_many(
            [(e, (new, old)) for e, new, old in part.select("evidence", "new_doc_id", "doc_id").iter_rows()]
        )
        for citation_id, suggestion in zip(part["citation_id"], found):
            out.append(
                {"citation_id": citation_id}
                | (
                    {
                        "suggested_chunk_id": suggestion.chunk_id,
                        "suggested_start_char": suggestion.start_char,
                        "suggested_end_char": suggestion.end_char,
                        "suggested_score": suggestion.score,
                        "suggested_method": suggestion.method,
                        "suggested_text": suggestion.text,
                    }
                    if suggestion
                    else {}
                )
            )
    where = reanchorer.chunks.select(
        suggested_chunk_id="chunk_id", suggested_source_path="source_path", suggested_access_scope="access_scope"
    )
    return pl.DataFrame(out, schema=SUGGESTION_SCHEMA).join(where, on="suggested_chunk_id", how="left")
