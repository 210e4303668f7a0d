"""Re-anchoring on a Chinese corpus: verbatim (exact and normalised), fuzzy and full-text (ngram) tiers."""

import polars as pl
import pytest

import citekeeper.search_index as embeddings_module
from changes.reanchor import Reanchorer
from citekeeper.language import models_for
from citekeeper.search_index import EmbeddingModelUnavailable, EmbeddingStore
from citekeeper.text import normalize_text
from tests.chunk_frames import build_version, doc_id_of
from tests.test_reanchor import doc_text, reanchored_in_place, suggest

DOCS = {
    "超时.md": "HTTPX 默认启用超时。\n\n默认超时时间为五秒钟的网络空闲，超过后抛出“ReadTimeout”异常。",
    "代理.md": "代理通过 proxy 参数配置。\n\n设置 HTTPS_PROXY 环境变量，让所有流量经过代理服务器转发。",
    "认证.md": "基本认证发送用户名和密码。\n\n摘要认证会对凭据进行哈希处理。",
}


@pytest.fixture(scope="module")
def target():
    return build_version("v2", DOCS)


def chunk_with(chunks: pl.DataFrame, text: str) -> str:
    return chunks.filter(pl.col("text").str.contains(text, literal=True))["chunk_id"].item()


def test_a_chinese_quote_moved_to_the_neighbouring_chunk_is_found_exactly_in_its_document():
    old = {"连接池.md": "连接池默认开启。连接会被复用。\n\n连接超时单独配置。"}
    new = {"连接池.md": "连接池始终默认开启。\n\n连接会被复用。连接超时单独配置。"}
    row, text = reanchored_in_place(old, new, "连接池默认开启。连接会被复用。", "连接会被复用。")
    assert row["suggested_method"] == "exact" and row["suggested_score"] == 1.0
    assert text[row["suggested_start_char"] : row["suggested_end_char"]] == "连接会被复用。"
    _, chunks = build_version("v2", new)
    assert row["suggested_chunk_id"] == chunk_with(chunks, "连接会被复用。连接超时")


def test_a_width_quote_and_line_break_variant_is_found_normalised(target):
    docs, chunks = target
    # Full-width Latin and digits, straight instead of curly quotes, and a line break inside the quote.
    quote = '默认超时时间为五秒钟的网络空闲，超过后抛出\n"ＲｅａｄＴｉｍｅｏｕｔ"异常'
    found = suggest(Reanchorer(docs, chunks), quote, [doc_id_of("认证.md")])
    assert found.method == "normalized" and found.score == 1.0
    text = doc_text(docs, doc_id_of("超时.md"))
    span = text[found.start_char : found.end_char]
    assert span == found.text == "默认超时时间为五秒钟的网络空闲，超过后抛出“ReadTimeout”异常"
    assert normalize_text(span) == normalize_text(quote) and span != quote
    assert found.chunk_id == chunk_with(chunks, "五秒钟")


def test_a_normalised_match_prefers_the_own_document_and_an_exact_one_wins():
    sentence = "请求失败时会自动重试3次。"
    texts = {"甲.md": f"甲文档。\n\n{sentence}", "乙.md": f"乙文档的开头长一些。\n\n{sentence}"}
    docs, chunks = build_version("v2", texts)
    for own in ("甲.md", "乙.md"):
        # Nulls and repeats in the preferences (a successor in the cited document) are harmless.
        found = suggest(Reanchorer(docs, chunks), "自动重试３次", [None, doc_id_of(own), doc_id_of(own)])
        assert found.method == "normalized"
        assert found.chunk_id in chunks.filter(pl.col("doc_id") == doc_id_of(own))["chunk_id"]
        assert doc_text(docs, doc_id_of(own))[found.start_char : found.end_char] == "自动重试3次"
    # An exact occurrence anywhere beats a normalised one in the own document.
    docs, chunks = build_version("v2", texts | {"丙.md": "全角写法：自动重试３次。"})
    found = suggest(Reanchorer(docs, chunks), "自动重试３次", [doc_id_of("甲.md")])
    assert found.method == "exact" and found.chunk_id == chunk_with(chunks, "全角写法")


def test_fuzzy_finds_an_edited_chinese_quote_with_code_point_offsets(target):
    docs, chunks = target
    quote = "设置 HTTPS_PROXY 环境变量，让全部流量经过代理服务器转发。"  # 所有 -> 全部
    found = suggest(Reanchorer(docs, chunks), quote, [doc_id_of("超时.md")])
    assert found.method == "fuzzy" and 0.85 <= found.score < 1.0
    text = doc_text(docs, doc_id_of("代理.md"))
    span = text[found.start_char : found.end_char]
    # Offsets count characters, not UTF-8 bytes (each Chinese character is three bytes).
    assert span == found.text and span.startswith("设置 HTTPS_PROXY") and span.endswith("转发。")
    assert found.chunk_id == chunk_with(chunks, "HTTPS_PROXY")


@pytest.fixture
def offline_multilingual(monkeypatch):
    """Embedder loading as here, offline: every model fails like a hub id missing from the local cache.
    Records the models asked for."""
    asked = []

    def unavailable(model=None, **_):
        asked.append(model)
        raise OSError(f"We couldn't connect to 'https://huggingface.co' to load {model}")

    monkeypatch.setattr(embeddings_module, "Embedder", unavailable)
    return asked


def test_a_chinese_corpus_asks_for_the_multilingual_model_and_warns_once(tmp_path, target, offline_multilingual):
    _, chunks = target
    store = EmbeddingStore(tmp_path)
    with pytest.warns(EmbeddingModelUnavailable) as caught:
        first = store.chunk_index("v2", chunks)
        store.chunk_index("v3", chunks)
    model = models_for("zh").embedding
    assert offline_multilingual == [model] and len(caught) == 1
    assert model in str(caught[0].message) and "CITEKEEPER_EMBEDDING_MODEL" in str(caught[0].message)
    assert first.embedder is None and "ngram2-3" in first.table.name and first.table.name.endswith("__fts")


def test_ngram_full_text_search_finds_a_chinese_chunk_without_vectors(tmp_path, target):
    docs, chunks = target
    # A model that cannot load (here: a hub id missing from the offline cache) leaves full-text search.
    store = EmbeddingStore(tmp_path, model=str(tmp_path / "no-such-model"))
    with pytest.warns(EmbeddingModelUnavailable, match="no-such-model"):
        index = store.chunk_index("v2", chunks)
    hits = index.search("客户端的默认超时时间是多少秒")
    assert hits and hits[0].chunk_id == chunk_with(chunks, "五秒钟") and hits[0].method == "fts"
    reanchorer = Reanchorer(docs, chunks, lambda: index)
    found = suggest(reanchorer, "网络空闲五秒后默认会超时", [])  # reworded: fuzzy misses it
    assert found.method == "fts" and found.score >= 0.5 and found.chunk_id == chunk_with(chunks, "五秒钟")
    assert suggest(reanchorer, "斑马石英波尔卡舞曲", []) is None


def test_the_chinese_full_text_index_gives_the_candidates_without_a_model(tmp_path, target):
    """The version's ngram full-text index (no model loaded, nothing embedded) finds a sentence that moved
    verbatim into another document, and an edited one, for the verbatim and fuzzy tiers."""
    docs, chunks = target
    store = EmbeddingStore(tmp_path, model=str(tmp_path / "no-such-model"))
    index = store.text_index("v2", chunks)
    assert index.table.name == "chunks__v2__ngram2-3__fts" and index.embedder is None
    reanchorer = Reanchorer(docs, chunks, text_index_factory=lambda: index)
    moved = suggest(reanchorer, "摘要认证会对凭据进行哈希处理。", [doc_id_of("超时.md")])
    assert moved.method == "exact" and moved.chunk_id == chunk_with(chunks, "摘要认证")
    edited = suggest(reanchorer, "设置 HTTPS_PROXY 环境变量，让全部流量经过代理服务器转发。", [doc_id_of("超时.md")])
    assert edited.method == "fuzzy" and edited.chunk_id == chunk_with(chunks, "HTTPS_PROXY")
