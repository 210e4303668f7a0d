"""Re-anchoring tiers (exact, fuzzy, hybrid) on English text and the per-model text_hash embedding cache."""

import polars as pl
import pytest

from changes.citation_status import CHUNK_COLUMNS, judge
from changes.reanchor import Reanchorer, Suggestion, reanchor
from citekeeper.answers.records import answer_rows, parse_answer
from citekeeper.schema import CITATIONS
from citekeeper.search_index import Embedder, EmbeddingModelUnavailable, EmbeddingStore
from citekeeper.tables import from_rows
from tests.chunk_frames import build_version, diff_frames, doc_id_of

DOCS = {
    "timeouts.md": "HTTPX enforces timeouts by default.\n\nThe default timeout is five seconds of network inactivity.",
    "proxies.md": (
        "Proxies are configured with the proxy argument.\n\nSet HTTPS_PROXY to route traffic through a proxy server."
    ),
    "auth.md": "Basic authentication sends a username and password.\n\nDigest authentication hashes the credentials.",
}


def suggest(reanchorer: Reanchorer, evidence: str, prefer_doc_ids) -> Suggestion | None:
    """One citation's suggestion (Reanchorer.suggest_many of one)."""
    return reanchorer.suggest_many([(evidence, prefer_doc_ids)])[0]


@pytest.fixture(scope="module")
def target():
    return build_version("v2", DOCS)


def doc_text(docs: pl.DataFrame, doc_id: str) -> str:
    return docs.filter(pl.col("doc_id") == doc_id)["text"].item()


def test_exact_prefers_own_document_and_gives_document_offsets(target):
    docs, chunks = target
    quote = "The default timeout is five seconds"
    found = suggest(Reanchorer(docs, chunks), quote, [doc_id_of("timeouts.md")])
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
    record = {
        "answer_id": "a1",
        "answer": "...",
        "corpus_version": "v1",
        "claims": [{"text": "claim", "citations": [{"chunk_id": cited, "quote": quote}]}],
    }
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
    found = suggest(Reanchorer(docs, chunks), quote, [doc_id_of("timeouts.md")])
    assert found.method == "fuzzy" and 0.85 <= found.score < 1.0
    text = doc_text(docs, doc_id_of("proxies.md"))
    assert "HTTPS_PROXY" in text[found.start_char : found.end_char]


def test_hybrid_finds_a_paraphrase_and_misses_nonsense(target, tmp_path):
    docs, chunks = target
    embeddings = EmbeddingStore(tmp_path)
    reanchorer = Reanchorer(docs, chunks, lambda: embeddings.chunk_index("v2", chunks))
    found = suggest(reanchorer, "How long does the client wait before it gives up on a silent connection?", [])
    assert found.method == "hybrid"
    assert found.chunk_id == chunks.filter(pl.col("text").str.contains("five seconds"))["chunk_id"].item()
    assert suggest(reanchorer, "zebra quartz polka 1911", []) is None


class _Counted:
    """An embedder under a name (another model's: its vectors must come from its own cache), counting the texts
    it embeds."""

    def __init__(self, embedder: Embedder, name: str):
        self._embedder, self.name, self.dim, self.n_embedded = embedder, name, embedder.dim, 0

    def embed(self, texts: list[str]):
        self.n_embedded += len(texts)
        return self._embedder.embed(texts)


def test_unchanged_chunks_are_never_embedded_twice(tmp_path):
    _, v1 = build_version("v1", DOCS)
    edited = dict(DOCS, **{"auth.md": DOCS["auth.md"] + "\n\nBearer tokens go in the Authorization header."})
    _, v2 = build_version("v2", edited)
    model = Embedder()
    embedder = _Counted(model, model.name)
    EmbeddingStore(tmp_path, embedder).chunk_index("v1", v1)
    first = embedder.n_embedded
    assert first == v1["text_hash"].n_unique()
    # A fresh EmbeddingStore over the same directory reuses the on-disk cache: only the new paragraph is embedded.
    again = EmbeddingStore(tmp_path, embedder)
    again.chunk_index("v2", v2)
    assert embedder.n_embedded - first == 1
    vectors = again.vectors(v2.select("text_hash", "text"), embedder)
    assert vectors.height == v2["text_hash"].n_unique() and embedder.n_embedded - first == 1


def test_the_embedding_cache_is_per_model(tmp_path):
    _, v1 = build_version("v1", DOCS)
    english = Embedder()
    EmbeddingStore(tmp_path, english).chunk_index("v1", v1)
    other = _Counted(english, "some/other-model")
    index = EmbeddingStore(tmp_path, other).chunk_index("v1", v1)
    assert other.n_embedded == v1["text_hash"].n_unique()  # nothing served from the MiniLM cache
    assert index.table.name != EmbeddingStore(tmp_path, english).chunk_index("v1", v1).table.name


# ---------------------------------------------------------------- candidates from the full-text index


class _CountingIndex:
    """A full-text index wrapper that records the queries asked of it (or answers none of them)."""

    def __init__(self, index, answer: bool = True):
        self.index, self.answer, self.calls = index, answer, []

    def match_any(self, queries, limit):
        self.calls.append(len(queries))
        return self.index.match_any(queries, limit) if self.answer else [[] for _ in queries]


def test_candidates_come_from_the_full_text_index_never_from_a_scan(target):
    """Beyond the preferred documents, only what the index returns is searched: an index that answers
    nothing leaves a verbatim copy in another document unfound; the real one finds it."""
    from citekeeper.search_index import memory_text_index

    docs, chunks = target
    quote = "Set HTTPS_PROXY to route traffic through a proxy server."
    blind = _CountingIndex(memory_text_index(chunks), answer=False)
    assert suggest(Reanchorer(docs, chunks, text_index_factory=lambda: blind), quote, [doc_id_of("auth.md")]) is None
    assert blind.calls == [1]
    found = suggest(
        Reanchorer(docs, chunks, text_index_factory=lambda: memory_text_index(chunks)), quote, [doc_id_of("auth.md")]
    )
    assert (
        found.method == "exact" and doc_text(docs, doc_id_of("proxies.md"))[found.start_char : found.end_char] == quote
    )


def test_full_text_queries_are_batched_and_skipped_when_the_own_document_holds_the_evidence(target):
    from citekeeper.search_index import memory_text_index

    docs, chunks = target
    counting = _CountingIndex(memory_text_index(chunks))
    reanchorer = Reanchorer(docs, chunks, text_index_factory=lambda: counting)
    rows = pl.DataFrame(
        {
            "citation_id": ["own", "moved", "edited", "gone"],
            "evidence": [
                "The default timeout is five seconds",
                "Digest authentication hashes the credentials.",
                "Set HTTPS_PROXY to route all traffic through the proxy server.",
                "zebra quartz polka 1911",
            ],
            "doc_id": [doc_id_of("timeouts.md")] * 4,
            "new_doc_id": [doc_id_of("timeouts.md")] * 4,
        }
    )
    found = reanchor(rows, reanchorer)
    assert counting.calls == [3]  # one batch of three queries; the own document held the first quote
    assert dict(zip(found["citation_id"], found["suggested_method"])) == {
        "own": "exact",
        "moved": "exact",
        "edited": "fuzzy",
        "gone": None,
    }


def test_a_quote_across_a_chunk_boundary_of_another_document_is_found_exactly(target):
    docs, chunks = target
    quote = "Proxies are configured with the proxy argument.\n\nSet HTTPS_PROXY"
    found = suggest(Reanchorer(docs, chunks), quote, [doc_id_of("timeouts.md")])
    assert (
        found.method == "exact" and doc_text(docs, doc_id_of("proxies.md"))[found.start_char : found.end_char] == quote
    )


def test_a_quote_in_double_quotes_is_searched_as_words_not_as_a_phrase(tmp_path, target):
    # A string full-text query in double quotes is a phrase query in LanceDB, which an index without token
    # positions rejects; the last tier must not fail on such evidence.
    docs, chunks = target
    store = EmbeddingStore(tmp_path, model=str(tmp_path / "no-such-model"), language="en")
    with pytest.warns(EmbeddingModelUnavailable):
        reanchorer = Reanchorer(
            docs, chunks, lambda: store.chunk_index("v2", chunks), lambda: store.text_index("v2", chunks)
        )
        found = suggest(reanchorer, '"seconds of inactivity before the default timeout"', [])
    assert (
        found.method == "fts"
        and found.chunk_id == chunks.filter(pl.col("text").str.contains("five seconds"))["chunk_id"].item()
    )


class _NoModel:
    """An embedder that must never be asked for a vector."""

    name, dim, n_embedded = "no-model", 8, 0

    def embed(self, texts):
        raise AssertionError(f"embedded {len(texts)} texts")


def test_the_full_text_index_is_built_once_per_version_without_embedding(tmp_path, monkeypatch):
    _, v1 = build_version("v1", DOCS)
    index = EmbeddingStore(tmp_path, _NoModel()).text_index("v1", v1)
    assert index.embedder is None and index.table.name == "chunks__v1__simple__fts"
    assert [i.index_type for i in index.table.list_indices()] == ["FTS"]
    # Reused by a later run (a fresh store over the same directory): nothing is created again.
    again = EmbeddingStore(tmp_path, _NoModel())
    monkeypatch.setattr(again.db, "create_table", lambda *a, **k: pytest.fail("index rebuilt"))
    assert again.text_index("v1", v1).table.version == index.table.version
    hits = again.text_index("v1", v1).match_any([["five seconds network"]], 5)[0]
    assert [h["chunk_id"] for h in hits] == v1.filter(pl.col("text").str.contains("five seconds"))["chunk_id"].to_list()


def test_without_a_model_the_last_tier_searches_the_same_full_text_table(tmp_path):
    _, v1 = build_version("v1", DOCS)
    store = EmbeddingStore(tmp_path, model=str(tmp_path / "no-such-model"), language="en")
    text = store.text_index("v1", v1)
    with pytest.warns(EmbeddingModelUnavailable):
        assert store.chunk_index("v1", v1).table.name == text.table.name
    assert [n for n in store.db.list_tables().tables if n.startswith("chunks__")] == [text.table.name]


class _BagOfWords:
    """A deterministic embedder: hashed word counts, normalised (same words, same vector)."""

    name, dim, n_embedded = "bag-of-words", 32, 0

    def embed(self, texts):
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, sum(map(ord, word)) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def test_a_large_vector_table_gets_a_vector_index(tmp_path, monkeypatch):
    import citekeeper.search_index as embeddings_module

    monkeypatch.setattr(embeddings_module, "VECTOR_INDEX_MIN_ROWS", 200)
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar".split()
    texts = {f"d{i}.md": f"{words[i % 15]} {words[(i * 7) % 15]} {words[(i * 11) % 15]} number {i}" for i in range(300)}
    docs, chunks = build_version("v1", texts)
    index = EmbeddingStore(tmp_path, _BagOfWords(), language="en").chunk_index("v1", chunks)
    assert {i.index_type for i in index.table.list_indices()} == {"FTS", "IvfSq"}
    cited = chunks.filter(pl.col("text").str.ends_with(" 123")).row(0, named=True)
    reordered = " ".join(reversed(cited["text"].split()))  # the same words: the same vector, no fuzzy match
    found = suggest(Reanchorer(docs, chunks, lambda: index), reordered, [])
    assert found.method == "hybrid" and found.chunk_id == cited["chunk_id"] and found.score == pytest.approx(1.0)


def test_evidence_pieces_hold_content_words_and_cut_chinese_between_characters():
    from changes.reanchor import evidence_pieces

    # Stop words alone would match any chunk: each piece holds two or more words besides them.
    assert evidence_pieces("Retries of the and to a request: the pool is then closed by the client.") == [
        "Retries of the and to a request: the",
        "pool is then closed by the client.",
    ]
    assert evidence_pieces("It is what it is.") == []
    assert evidence_pieces("默认超时时间为五秒钟的网络空闲") == ["默认超时时", "间为五秒钟", "的网络空闲"]
