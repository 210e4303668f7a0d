"""`answers add --from FORMAT`: each provider's response, shaped as its docs show it, through import -> stale
(valid at the version it cites) -> an edit -> stale (what the edit dictates) -> repair --apply -> answers export.

The edit moves guide.md to manual/guide.md (same text: its citations are relocated) and changes the sentence
limits.md was cited for (stale). The oracle is that edit, by the document each citation names."""
import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from parsers.ingest import ingest
from parsers.model import ParseConfig
from citekeeper.store import CorpusStore
from pipelines.cli import main
from tests.chunk_frames import write_tree

GUIDE = "The client keeps connections alive for reuse across requests. Pooling saves a handshake on every call."
LIMITS_V1 = "The default timeout is five seconds for every network operation."
LIMITS_V2 = "The default timeout is ten seconds, and it applies to every network operation."
ANSWER = "Connections are kept alive for reuse. The default timeout is five seconds."
FIRST = "Connections are kept alive for reuse."

GUIDE_ZH = "客户端会保持连接，以便在请求之间复用。连接池为每次调用节省一次握手。"
LIMITS_ZH_V1 = "每个网络操作的默认超时时间为五秒。"
LIMITS_ZH_V2 = "默认超时时间现在是十秒，适用于所有网络操作。"
ANSWER_ZH = "客户端会保持连接以便复用。默认超时时间为五秒。"
FIRST_ZH = "客户端会保持连接以便复用。"


def corpus(guide: str, limits: str, guide_path: str = "guide.md") -> dict[str, str]:
    return {guide_path: f"# Guide\n\n{guide}\n\n## Retries\n\nFailed requests are retried three times.\n",
            "limits.md": f"# Limits\n\n{limits}\n"}  # fmt: skip


def run(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


# ---------------------------------------------------------------- responses as each provider documents them

ANTHROPIC = {
    "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": "end_turn",
    "content": [
        {"type": "text", "text": "Connections are kept alive for reuse.", "citations": [
            {"type": "char_location", "cited_text": GUIDE.split(". ")[0] + ".", "document_index": 0, "document_title": "Guide",
             "start_char_index": 9, "end_char_index": 71}]},
        {"type": "text", "text": " "},
        {"type": "text", "text": "The default timeout is five seconds.", "citations": [
            {"type": "content_block_location", "cited_text": LIMITS_V1, "document_index": 1, "document_title": "Limits",
             "start_block_index": 0, "end_block_index": 1}]},
    ],
    "usage": {"input_tokens": 410, "output_tokens": 31},
}  # fmt: skip

OPENAI = {
    "id": "resp_01", "object": "response", "status": "completed", "model": "gpt-4.1",
    "output": [
        {"type": "file_search_call", "id": "fs_01", "status": "completed", "queries": ["connection reuse timeout"], "results": [
            {"file_id": "file-guide", "filename": "guide.md", "score": 0.91, "text": GUIDE, "attributes": {}},
            {"file_id": "file-limits", "filename": "limits.md", "score": 0.87, "text": LIMITS_V1, "attributes": {}}]},
        {"type": "message", "id": "msg_01", "status": "completed", "role": "assistant", "content": [
            {"type": "output_text", "text": ANSWER, "annotations": [
                {"type": "file_citation", "index": len(FIRST), "file_id": "file-guide", "filename": "guide.md"},
                {"type": "file_citation", "index": len(ANSWER), "file_id": "file-limits", "filename": "limits.md"}]}]},
    ],
}  # fmt: skip

COHERE = {
    "id": "c0ffee", "finish_reason": "COMPLETE",
    "message": {"role": "assistant", "content": [{"type": "text", "text": ANSWER}], "citations": [
        {"start": 0, "end": len(FIRST) - 1, "text": FIRST[:-1], "type": "TEXT_CONTENT",
         "sources": [{"type": "document", "id": "guide", "document": {"id": "guide", "title": "Guide", "snippet": GUIDE}}]},
        {"start": len(FIRST) + 1, "end": len(ANSWER) - 1, "text": ANSWER[len(FIRST) + 1:-1], "type": "TEXT_CONTENT",
         "sources": [{"type": "document", "id": "limits", "document": {"id": "limits", "snippet": LIMITS_V1}}]}]},
    "usage": {"billed_units": {"input_tokens": 300, "output_tokens": 20}},
}  # fmt: skip

FIRST_ZH_BYTES = len(FIRST_ZH.encode("utf-8"))
GEMINI_ZH = {
    "candidates": [{
        "content": {"role": "model", "parts": [{"text": ANSWER_ZH}]},
        "finishReason": "STOP",
        "groundingMetadata": {
            "groundingChunks": [
                {"retrievedContext": {"uri": "gs://kb/guide.md", "title": "guide.md", "text": GUIDE_ZH.split("。")[0] + "。"}},
                {"retrievedContext": {"uri": "gs://kb/limits.md", "title": "limits.md", "text": LIMITS_ZH_V1}}],
            "groundingSupports": [
                {"segment": {"endIndex": FIRST_ZH_BYTES, "text": FIRST_ZH}, "groundingChunkIndices": [0], "confidenceScores": [0.93]},
                {"segment": {"startIndex": FIRST_ZH_BYTES, "endIndex": len(ANSWER_ZH.encode("utf-8")), "text": ANSWER_ZH[len(FIRST_ZH):]},
                 "groundingChunkIndices": [1], "confidenceScores": [0.88]}],
            "retrievalQueries": ["默认超时"]}}],
    "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 24},
    "modelVersion": "gemini-2.5-flash",
}  # fmt: skip


def node(i: int, node_id: str, path: str, text: str) -> dict:
    return {"node": {"id_": node_id, "text": f"Source {i}:\n{text}\n", "metadata": {"file_path": path, "file_name": Path(path).name},
                     "relationships": {"1": {"node_id": f"doc-{Path(path).stem}", "node_type": "4", "metadata": {}, "class_name": "RelatedNodeInfo"}},
                     "start_char_idx": 9, "end_char_idx": 9 + len(text), "class_name": "TextNode"},
            "score": 0.8, "class_name": "NodeWithScore"}  # fmt: skip


LLAMAINDEX = {
    "response": "Connections are kept alive for reuse [1]. The default timeout is five seconds [2].",
    "source_nodes": [node(1, "n-guide", "/data/kb/guide.md", GUIDE), node(2, "n-limits", "/data/kb/limits.md", LIMITS_V1)],
    "metadata": {"n-guide": {"file_path": "/data/kb/guide.md"}, "n-limits": {"file_path": "/data/kb/limits.md"}},
}  # fmt: skip

LANGCHAIN = {  # the citation tutorial's QuotedAnswer: every quote backs the whole answer
    "answer": ANSWER,
    "citations": [{"source_id": 0, "quote": GUIDE.split(". ")[0] + "."}, {"source_id": 1, "quote": LIMITS_V1}],
}

POSITIONAL = [{"source_path": "guide.md"}, {"source_path": "limits.md"}]
CASES = {
    "anthropic": (ANTHROPIC, POSITIONAL, "en"),
    "openai": (OPENAI, [{"key": "file-guide", "source_path": "guide.md"}, {"key": "file-limits", "source_path": "limits.md"}], "en"),
    "cohere": (COHERE, [{"key": "guide", "source_path": "guide.md"}, {"key": "limits", "source_path": "limits.md"}], "en"),
    "gemini": (GEMINI_ZH, [{"key": "gs://kb/guide.md", "source_path": "guide.md"}, {"key": "gs://kb/limits.md", "source_path": "limits.md"}], "zh"),
    "llamaindex": (LLAMAINDEX, [{"key": "/data/kb/guide.md", "source_path": "guide.md"}, {"key": "doc-limits", "source_path": "limits.md"}], "en"),
    "langchain": (LANGCHAIN, POSITIONAL, "en"),
}  # fmt: skip
# What each claim cites, by document: the span each provider gives (LangChain's quotes back the whole answer).
EXPECTED_CLAIMS = {fmt: [["guide.md"], ["limits.md"]] for fmt in CASES} | {"langchain": [["guide.md", "limits.md"]] * 2}


@pytest.fixture
def versions(tmp_path, request) -> tuple[Path, Path]:
    """A store with v1, and the v2 source tree (the edit) beside it."""
    zh = request.param == "zh"
    guide, v1, v2 = (GUIDE_ZH, LIMITS_ZH_V1, LIMITS_ZH_V2) if zh else (GUIDE, LIMITS_V1, LIMITS_V2)
    store = CorpusStore(tmp_path / "store")
    ingest(write_tree(tmp_path / "v1", corpus(guide, v1)), store, version="v1", config=ParseConfig(workers=1))
    return store.root, write_tree(tmp_path / "v2", corpus(guide, v2, guide_path="manual/guide.md"))


def statuses(store_root: Path, version: str, tmp_path: Path) -> pl.DataFrame:
    out = tmp_path / f"status-{version}.parquet"
    assert run("stale", "--against", version, "--store", store_root, "--out", out).exit_code == 0
    return pl.read_parquet(out)


@pytest.mark.parametrize("fmt,versions", [(fmt, lang) for fmt, (_, _, lang) in CASES.items()], indirect=["versions"])
def test_each_format_survives_an_edit_and_a_repair(fmt, versions, tmp_path):
    store_root, v2_tree = versions
    response, documents, _ = CASES[fmt]
    line = {"answer_id": f"{fmt}-1", "question": "How are connections and timeouts handled?", "corpus_version": "v1",
            "documents": documents, "response": response}  # fmt: skip
    (tmp_path / "in.jsonl").write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
    added = run("answers", "add", tmp_path / "in.jsonl", "--from", fmt, "--store", store_root)
    assert added.exit_code == 0, added.output
    assert "1 added" in added.output

    export = tmp_path / "export.parquet"
    assert run("answers", "export", "--out", export, "--store", store_root).exit_code == 0
    rows = pl.read_parquet(export)
    cited = rows.group_by("claim_index", maintain_order=True).agg(pl.col("source_path").sort())
    assert cited["source_path"].to_list() == EXPECTED_CLAIMS[fmt]
    assert set(rows["anchored_by"]) <= {"exact", "normalized"}  # each quote is verbatim in v1
    assert (rows["quote_match"] == "exact").all()

    at_v1 = statuses(store_root, "v1", tmp_path)
    assert set(at_v1["status"]) == {"valid"}

    ingest(v2_tree, CorpusStore(store_root), version="v2", config=ParseConfig(workers=1))
    at_v2 = statuses(store_root, "v2", tmp_path).join(rows.select("citation_id", "source_path"), on="citation_id")
    expected = {"guide.md": "relocated", "limits.md": "stale"}  # the edit: guide.md moved, the limits sentence rewritten
    assert {(r["source_path"], r["status"]) for r in at_v2.iter_rows(named=True)} == set(expected.items())

    repaired = run("repair", "--against", "v2", "--apply", "--store", store_root)
    assert repaired.exit_code == 0, repaired.output
    assert run("answers", "export", "--out", export, "--store", store_root).exit_code == 0
    after = pl.read_parquet(export)
    assert after["revision"].unique().to_list() == [2]
    assert after["claim_text"].unique(maintain_order=True).to_list() == rows["claim_text"].unique(maintain_order=True).to_list()
    assert after.height == rows.height  # every citation kept
    moved = after.filter(pl.col("cited_version") == "v2")
    assert set(moved["source_path"]) >= {"manual/guide.md"}
    assert set(statuses(store_root, "v2", tmp_path).join(moved.select("citation_id"), on="citation_id")["status"]) == {"valid"}

    from citekeeper.answer_store import AnswerStore

    first, repaired = AnswerStore(store_root).all_answers().sort("revision")["source_record"].to_list()
    assert json.loads(first) == line  # the response, as it came
    assert json.loads(repaired)["given"] == line  # and kept beside the repaired citations


def test_gemini_byte_offsets_are_not_code_points():
    """The second segment starts at byte 39, which is code point 13: read as code points it would fall past the
    first sentence's end in the wrong place."""
    from citekeeper.rag_formats import parse_response

    def claims(response) -> list[tuple[str, list[str]]]:
        line = {"answer_id": "g", "corpus_version": "v1", "documents": CASES["gemini"][1], "response": response}
        return [(c.text, [x.document.source_path for x in c.citations]) for c in parse_response(line, response_format="gemini").claims]

    assert claims(GEMINI_ZH) == [(FIRST_ZH, ["guide.md"]), (ANSWER_ZH[len(FIRST_ZH):], ["limits.md"])]
    snake = json.loads(json.dumps(GEMINI_ZH).replace("groundingMetadata", "grounding_metadata").replace("groundingChunks", "grounding_chunks")
                       .replace("retrievedContext", "retrieved_context").replace("groundingSupports", "grounding_supports")
                       .replace("endIndex", "end_index").replace("startIndex", "start_index").replace("groundingChunkIndices", "grounding_chunk_indices"))  # fmt: skip
    assert claims(snake) == claims(GEMINI_ZH)  # the Python SDK's snake_case dump reads the same
