"""Re-anchoring tiers (exact, fuzzy, hybrid) and the text_hash embedding cache."""
import polars as pl
import pytest

from citekeeper.embeddings import EmbeddingStore
from tests.chunk_frames import build_version, doc_id_of
from verifiers.reanchor import Reanchorer

DOCS = {
    "timeouts.md": "HTTPX enforces timeouts by default.\n\nThe default timeout is five seconds of network inactivity.",
    "proxies.md": "Proxies are configured with the proxy argument.\n\nSet HTTPS_PROXY to route traffic through a proxy server.",
    "auth.md": "Basic authentication sends a username and password.\n\nDigest authentication hashes the credentials.",
}


@pytest.fixture(scope="module")
def target():
    return build_version("v2", DOCS)


def doc_text(docs: pl.DataFrame, doc_id: str) -> str:
    return docs.filter(pl.col("doc_id") == doc_id)["text"].item()


def test_exact_prefers_own_document_and_gives_document_offsets(target):
    docs, chunks = target
    quote = "The default timeout is five seconds"
    found = Reanchorer(docs, chunks).suggest(quote, [doc_id_of("timeouts.md")])
    assert found.method == "exact" and found.score == 1.0
    text = doc_text(docs, doc_id_of("timeouts.md"))
    assert text[found.start_char : found.end_char] == quote
    chunk = chunks.filter(pl.col("chunk_id") == found.chunk_id).row(0, named=True)
    assert chunk["start_char"] <= found.start_char < found.end_char <= chunk["end_char"]


def test_fuzzy_finds_a_lightly_edited_quote(target):
    docs, chunks = target
    quote = "Set HTTPS_PROXY to route all traffic through the proxy server."
    found = Reanchorer(docs, chunks).suggest(quote, [doc_id_of("timeouts.md")])
    assert found.method == "fuzzy" and 0.85 <= found.score < 1.0
    text = doc_text(docs, doc_id_of("proxies.md"))
    assert "HTTPS_PROXY" in text[found.start_char : found.end_char]


def test_hybrid_finds_a_paraphrase_and_misses_nonsense(target, tmp_path):
    docs, chunks = target
    embeddings = EmbeddingStore(tmp_path)
    reanchorer = Reanchorer(docs, chunks, lambda: embeddings.chunk_index("v2", chunks))
    found = reanchorer.suggest("How long does the client wait before it gives up on a silent connection?", [])
    assert found.method == "hybrid"
    assert found.chunk_id == chunks.filter(pl.col("text").str.contains("five seconds"))["chunk_id"].item()
    assert reanchorer.suggest("zebra quartz polka 1911", []) is None


def test_unchanged_chunks_are_never_embedded_twice(tmp_path):
    _, v1 = build_version("v1", DOCS)
    edited = dict(DOCS, **{"auth.md": DOCS["auth.md"] + "\n\nBearer tokens go in the Authorization header."})
    _, v2 = build_version("v2", edited)
    embeddings = EmbeddingStore(tmp_path)
    embeddings.chunk_index("v1", v1)
    first = embeddings.embedder.n_embedded
    assert first == v1["text_hash"].n_unique()
    # A fresh EmbeddingStore over the same directory reuses the on-disk cache: only the new paragraph is embedded.
    again = EmbeddingStore(tmp_path, embeddings.embedder)
    again.chunk_index("v2", v2)
    assert embeddings.embedder.n_embedded - first == 1
    vectors = again.vectors(v2.select("text_hash", "text"))
    assert vectors.height == v2["text_hash"].n_unique() and embeddings.embedder.n_embedded - first == 1
