"""Re-anchoring tiers (exact, fuzzy, hybrid) on English text and the per-model text_hash embedding cache."""
import polars as pl
import pytest

from citekeeper.embeddings import Embedder, EmbeddingStore
from citekeeper.schema import CITATIONS
from citekeeper.tables import from_rows
from tests.chunk_frames import build_version, doc_id_of
from citekeeper.answers import answer_rows, parse_answer
from verifiers.citation_status import CHUNK_COLUMNS, judge
from verifiers.diff import diff_frames
from verifiers.reanchor import Reanchorer, reanchor

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


def reanchored_in_place(old: dict[str, str], new: dict[str, str], cited_text: str, quote: str) -> tuple[dict, str]:
    """Cite `quote` in the v1 chunk `cited_text`, judge it against v2 (it must be stale, its successor in its
    own document), re-anchor it; the suggestion row and the text of that document."""
    old_docs, old_chunks = build_version("v1", old)
    new_docs, new_chunks = build_version("v2", new)
    cited = old_chunks.filter(pl.col("text") == cited_text)["chunk_id"].item()
    record = {"answer_id": "a1", "answer": "...", "corpus_version": "v1",
              "claims": [{"text": "claim", "citations": [{"chunk_id": cited, "quote": quote}]}]}  # fmt: skip
    rows = from_rows(answer_rows(parse_answer(record), 1, None, None)["citations"], CITATIONS)
    diff = diff_frames("v1", "v2", old_docs, new_docs, old_chunks, new_chunks)
    status = judge(rows, old_chunks.select(CHUNK_COLUMNS), diff, new_chunks.select(CHUNK_COLUMNS), "v2")
    assert status["status"].to_list() == ["stale"] and status["new_doc_id"].item() == status["doc_id"].item()
    suggestion = reanchor(status, Reanchorer(new_docs, new_chunks)).row(0, named=True)
    return suggestion, doc_text(new_docs, status["doc_id"].item())


def test_a_quote_moved_to_the_neighbouring_chunk_of_its_document_is_found_there():
    # The quoted sentence leaves its (modified, hence stale) chunk for the next one: the successor is in
    # the citation's own document, so the preferred documents repeat one id.
    old = {"timeouts.md": "Timeouts are on by default. Pools are reused.\n\nConnect timeouts are separate."}
    new = {"timeouts.md": "Timeouts are always on by default.\n\nPools are reused. Connect timeouts are separate."}
    row, text = reanchored_in_place(old, new, "Timeouts are on by default. Pools are reused.", "Pools are reused.")
    assert row["suggested_method"] == "exact" and row["suggested_score"] == 1.0
    assert text[row["suggested_start_char"] : row["suggested_end_char"]] == "Pools are reused."
    _, chunks = build_version("v2", new)
    assert row["suggested_chunk_id"] == chunks.filter(pl.col("text").str.starts_with("Pools"))["chunk_id"].item()


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
    embedder = Embedder()
    EmbeddingStore(tmp_path, embedder).chunk_index("v1", v1)
    first = embedder.n_embedded
    assert first == v1["text_hash"].n_unique()
    # A fresh EmbeddingStore over the same directory reuses the on-disk cache: only the new paragraph is embedded.
    again = EmbeddingStore(tmp_path, embedder)
    again.chunk_index("v2", v2)
    assert embedder.n_embedded - first == 1
    vectors = again.vectors(v2.select("text_hash", "text"), embedder)
    assert vectors.height == v2["text_hash"].n_unique() and embedder.n_embedded - first == 1


class _Renamed:
    """Another model's name over the same weights: its vectors must come from its own cache."""

    def __init__(self, embedder: Embedder, name: str):
        self._embedder, self.name, self.dim, self.n_embedded = embedder, name, embedder.dim, 0

    def embed(self, texts: list[str]):
        self.n_embedded += len(texts)
        return self._embedder.embed(texts)


def test_the_embedding_cache_is_per_model(tmp_path):
    _, v1 = build_version("v1", DOCS)
    english = Embedder()
    EmbeddingStore(tmp_path, english).chunk_index("v1", v1)
    other = _Renamed(english, "some/other-model")
    index = EmbeddingStore(tmp_path, other).chunk_index("v1", v1)
    assert other.n_embedded == v1["text_hash"].n_unique()  # nothing served from the MiniLM cache
    assert index.table.name != EmbeddingStore(tmp_path, english).chunk_index("v1", v1).table.name
