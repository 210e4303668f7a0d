"""`answers add --from FORMAT` on responses as each provider's Python SDK dumps them (pydantic `model_dump()` /
`to_dict()` in JSON mode): every optional field the SDK's model declares is written, as None when unset. Written
by hand from each SDK's documented model fields (the SDKs are not installed). Also the shapes the provider tests
of tests/test_rag_formats.py leave out: Chat Completions `url_citation`, Anthropic `page_location`,
`content_block_location` and `search_result_location` with their documents, Cohere's chat_stream events, and one
unmappable source among good ones. Each runs through the CLI on a real store and asserts on the stored rows and
the statuses `stale` gives."""

import json
from pathlib import Path

import polars as pl
import pytest
from fpdf import FPDF

from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from parsers.records import ParseConfig
from tests.chunk_frames import write_tree
from tests.test_rag_formats import (
    ANSWER,
    ANSWER_ZH,
    COHERE,
    FIRST,
    FIRST_ZH,
    GEMINI_ZH,
    GUIDE,
    GUIDE_ZH,
    LIMITS_V1,
    LIMITS_ZH_V1,
    corpus,
    run,
    statuses,
)

GUIDE_FIRST = GUIDE.split(". ")[0] + "."
GUIDE_SECOND = GUIDE.split(". ")[1]
RETRIES = "Failed requests are retried three times."
SECOND = ANSWER[len(FIRST) + 1 :]


def store_of(tmp_path: Path, files: dict[str, str] | None = None, zh: bool = False) -> Path:
    files = files or (corpus(GUIDE_ZH, LIMITS_ZH_V1) if zh else corpus(GUIDE, LIMITS_V1))
    store = CorpusStore(tmp_path / "store")
    ingest(write_tree(tmp_path / "v1", files), store, version="v1", config=ParseConfig(workers=1))
    return store.root


def add(store_root: Path, tmp_path: Path, fmt: str, response, documents: list[dict], answer_id: str = "a1"):
    line = {"answer_id": answer_id, "corpus_version": "v1", "documents": documents, "response": response}
    path = tmp_path / f"{answer_id}.jsonl"
    path.write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
    return run("answers", "add", path, "--from", fmt, "--store", store_root)


def exported(store_root: Path, tmp_path: Path) -> pl.DataFrame:
    out = tmp_path / "export.parquet"
    assert run("answers", "export", "--out", out, "--store", store_root).exit_code == 0
    return pl.read_parquet(out)


def cited_paths(rows: pl.DataFrame) -> list[list[str]]:
    return (
        rows.group_by("claim_index", maintain_order=True)
        .agg(pl.col("source_path").unique().sort())["source_path"]
        .to_list()
    )


# ---------------------------------------------------------------- each SDK's dump, None where it writes None

ANTHROPIC_DUMP = {  # anthropic.types.Message.model_dump(mode="json")
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "container": None,
    "content": [
        {
            "type": "text",
            "text": FIRST,
            "citations": [
                {
                    "type": "char_location",
                    "cited_text": GUIDE_FIRST,
                    "document_index": 0,
                    "document_title": None,
                    "file_id": None,
                    "start_char_index": 0,
                    "end_char_index": len(GUIDE_FIRST),
                }
            ],
        },
        {"type": "text", "text": " ", "citations": None},
        {
            "type": "text",
            "text": SECOND,
            "citations": [
                {
                    "type": "content_block_location",
                    "cited_text": LIMITS_V1,
                    "document_index": 1,
                    "document_title": None,
                    "file_id": None,
                    "start_block_index": 0,
                    "end_block_index": 1,
                }
            ],
        },
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "cache_creation": None,
        "cache_creation_input_tokens": None,
        "cache_read_input_tokens": None,
        "input_tokens": 410,
        "output_tokens": 31,
        "server_tool_use": None,
        "service_tier": None,
    },
}

OPENAI_DUMP = {  # openai.types.responses.Response.model_dump(mode="json"), include=["file_search_call.results"]
    "id": "resp_01",
    "object": "response",
    "created_at": 1750000000.0,
    "model": "gpt-4.1",
    "status": "completed",
    "error": None,
    "incomplete_details": None,
    "instructions": None,
    "metadata": {},
    "parallel_tool_calls": True,
    "temperature": None,
    "tool_choice": "auto",
    "tools": [],
    "top_p": None,
    "background": None,
    "max_output_tokens": None,
    "previous_response_id": None,
    "prompt": None,
    "reasoning": None,
    "service_tier": None,
    "text": None,
    "truncation": None,
    "usage": None,
    "user": None,
    "output": [
        {
            "id": "fs_01",
            "type": "file_search_call",
            "status": "completed",
            "queries": ["connection reuse timeout"],
            "results": [
                {"attributes": None, "file_id": "file-guide", "filename": "guide.md", "score": 0.91, "text": GUIDE},
                {"attributes": None, "file_id": "file-limits", "filename": "limits.md", "score": 0.87, "text": None},
            ],
        },
        {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [
                {
                    "type": "output_text",
                    "text": ANSWER,
                    "logprobs": None,
                    "annotations": [
                        {"type": "file_citation", "index": len(FIRST), "file_id": "file-guide", "filename": "guide.md"},
                        {
                            "type": "file_citation",
                            "index": len(ANSWER),
                            "file_id": "file-limits",
                            "filename": "limits.md",
                        },
                    ],
                }
            ],
        },
    ],
}

COHERE_DUMP = {  # cohere.ChatResponse (v2).model_dump(mode="json")
    "id": "c0ffee",
    "finish_reason": "COMPLETE",
    "prompt": None,
    "logprobs": None,
    "message": {
        "role": "assistant",
        "tool_calls": None,
        "tool_plan": None,
        "content": [{"type": "text", "text": ANSWER}],
        "citations": [
            {
                "start": 0,
                "end": len(FIRST) - 1,
                "text": FIRST[:-1],
                "type": "TEXT_CONTENT",
                "content_index": None,
                "sources": [
                    {"type": "document", "id": "guide", "document": {"id": "guide", "snippet": GUIDE, "title": None}}
                ],
            },
            {
                "start": len(FIRST) + 1,
                "end": len(ANSWER) - 1,
                "text": SECOND[:-1],
                "type": "TEXT_CONTENT",
                "content_index": None,
                "sources": [
                    {
                        "type": "document",
                        "id": "limits",
                        "document": {"id": "limits", "snippet": LIMITS_V1, "title": None},
                    }
                ],
            },
        ],
    },
    "usage": {
        "billed_units": {"input_tokens": 300, "output_tokens": 20, "search_units": None, "classifications": None},
        "tokens": {"input_tokens": 900, "output_tokens": 20},
        "cached_tokens": None,
    },
}

_PART_NONES = dict.fromkeys(
    (
        "video_metadata",
        "thought",
        "inline_data",
        "file_data",
        "thought_signature",
        "code_execution_result",
        "executable_code",
        "function_call",
        "function_response",
    )
)


def gemini_dump(supports: list[dict], chunks: list[dict] | None = None) -> dict:
    """google.genai.types.GenerateContentResponse.model_dump(mode="json") of ANSWER_ZH grounded on `chunks`."""
    chunks = (
        chunks
        if chunks is not None
        else [
            {
                "maps": None,
                "web": None,
                "retrieved_context": {
                    "document_name": None,
                    "rag_chunk": None,
                    "uri": "gs://kb/guide.md",
                    "title": "guide.md",
                    "text": GUIDE_ZH.split("。")[0] + "。",
                },
            },
            {
                "maps": None,
                "web": None,
                "retrieved_context": {
                    "document_name": None,
                    "rag_chunk": None,
                    "uri": "gs://kb/limits.md",
                    "title": "limits.md",
                    "text": LIMITS_ZH_V1,
                },
            },
        ]
    )
    return {
        "sdk_http_response": None,
        "create_time": None,
        "response_id": None,
        "model_version": "gemini-2.5-flash",
        "prompt_feedback": None,
        "automatic_function_calling_history": None,
        "parsed": None,
        "usage_metadata": {"prompt_token_count": 120, "candidates_token_count": 24, "cached_content_token_count": None},
        "candidates": [
            {
                "content": {"role": "model", "parts": [{**_PART_NONES, "text": ANSWER_ZH}]},
                "citation_metadata": None,
                "finish_message": None,
                "token_count": None,
                "finish_reason": "STOP",
                "url_context_metadata": None,
                "avg_logprobs": None,
                "index": None,
                "logprobs_result": None,
                "safety_ratings": None,
                "grounding_metadata": {
                    "google_maps_widget_context_token": None,
                    "retrieval_metadata": None,
                    "retrieval_queries": ["默认超时"],
                    "search_entry_point": None,
                    "web_search_queries": None,
                    "grounding_chunks": chunks,
                    "grounding_supports": supports,
                },
            }
        ],
    }


FIRST_ZH_BYTES = len(FIRST_ZH.encode("utf-8"))


def segment(start: int | None, end: int, text: str, part_index: int | None = None) -> dict:
    return {"start_index": start, "end_index": end, "part_index": part_index, "text": text}


GEMINI_DUMP = gemini_dump(
    [
        {
            "segment": segment(None, FIRST_ZH_BYTES, FIRST_ZH),
            "grounding_chunk_indices": [0],
            "confidence_scores": [0.93],
        },
        {
            "segment": segment(FIRST_ZH_BYTES, len(ANSWER_ZH.encode("utf-8")), ANSWER_ZH[len(FIRST_ZH) :]),
            "grounding_chunk_indices": [1],
            "confidence_scores": None,
        },
    ]
)


def text_node(i: int, node_id: str, path: str, text: str) -> dict:
    """llama_index NodeWithScore.model_dump(mode="json") as CitationQueryEngine returns it."""
    return {
        "score": None,
        "class_name": "NodeWithScore",
        "node": {
            "id_": node_id,
            "embedding": None,
            "metadata": {"file_path": path, "file_name": Path(path).name},
            "excluded_embed_metadata_keys": [],
            "excluded_llm_metadata_keys": [],
            "metadata_template": "{key}: {value}",
            "metadata_separator": "\n",
            "metadata_seperator": "\n",
            "text_template": "{metadata_str}\n\n{content}",
            "relationships": {
                "1": {
                    "node_id": f"doc-{Path(path).stem}",
                    "node_type": "4",
                    "metadata": {},
                    "hash": None,
                    "class_name": "RelatedNodeInfo",
                }
            },
            "text": f"Source {i}:\n{text}\n",
            "mimetype": "text/plain",
            "start_char_idx": None,
            "end_char_idx": None,
            "class_name": "TextNode",
        },
    }


LLAMAINDEX_DUMP = {  # Response: response, source_nodes (each model_dump()), metadata
    "response": "Connections are kept alive for reuse [1]. The default timeout is five seconds [2].",
    "source_nodes": [
        text_node(1, "n-guide", "/data/kb/guide.md", GUIDE),
        text_node(2, "n-limits", "/data/kb/limits.md", LIMITS_V1),
    ],
    "metadata": None,
}


def citation_block(text: str, title: str, cited: str) -> dict:
    return {
        "type": "text",
        "text": text,
        "id": None,
        "index": None,
        "extras": None,
        "annotations": [
            {
                "type": "citation",
                "id": None,
                "url": None,
                "title": title,
                "start_index": None,
                "end_index": None,
                "cited_text": cited,
                "extras": None,
            }
        ],
    }


LANGCHAIN_DUMP = {  # langchain_core AIMessage.model_dump(): standard content blocks, citation annotations
    "type": "ai",
    "name": None,
    "id": None,
    "example": False,
    "additional_kwargs": {},
    "response_metadata": {},
    "tool_calls": [],
    "invalid_tool_calls": [],
    "usage_metadata": None,
    "content": [citation_block(FIRST, "guide.md", GUIDE_FIRST), citation_block(" " + SECOND, "limits.md", LIMITS_V1)],
}

BY_TITLE = [{"key": "guide.md", "source_path": "guide.md"}, {"key": "limits.md", "source_path": "limits.md"}]
DUMPS = {
    "anthropic": (ANTHROPIC_DUMP, [{"source_path": "guide.md"}, {"source_path": "limits.md"}]),
    "openai": (
        OPENAI_DUMP,
        [{"key": "file-guide", "source_path": "guide.md"}, {"key": "file-limits", "source_path": "limits.md"}],
    ),
    "cohere": (
        COHERE_DUMP,
        [{"key": "guide", "source_path": "guide.md"}, {"key": "limits", "source_path": "limits.md"}],
    ),
    "gemini": (
        GEMINI_DUMP,
        [
            {"key": "gs://kb/guide.md", "source_path": "guide.md"},
            {"key": "gs://kb/limits.md", "source_path": "limits.md"},
        ],
    ),
    "llamaindex": (
        LLAMAINDEX_DUMP,
        [{"key": "/data/kb/guide.md", "source_path": "guide.md"}, {"key": "doc-limits", "source_path": "limits.md"}],
    ),
    "langchain": (LANGCHAIN_DUMP, BY_TITLE),
}


@pytest.mark.parametrize("fmt", DUMPS)
def test_each_sdk_dump_registers_with_its_none_fields_read_as_absent(fmt, tmp_path):
    store_root = store_of(tmp_path, zh=fmt == "gemini")
    response, documents = DUMPS[fmt]
    added = add(store_root, tmp_path, fmt, response, documents)
    assert added.exit_code == 0, added.output
    assert "1 added" in added.output
    rows = exported(store_root, tmp_path)
    assert cited_paths(rows) == [["guide.md"], ["limits.md"]]
    assert rows["anchor_note"].is_null().all()
    assert set(statuses(store_root, "v1", tmp_path)["status"]) == {"valid"}


# ---------------------------------------------------------------- one unmappable source among good ones


def test_an_unmappable_source_is_invalid_and_the_good_citations_register(tmp_path):
    store_root = store_of(tmp_path)
    appendix = {
        "type": "page_location",
        "cited_text": "Timeouts are listed in the appendix.",
        "document_index": 7,
        "document_title": "Appendix",
        "file_id": None,
        "start_page_number": 3,
        "end_page_number": 4,
    }
    response = json.loads(json.dumps(ANTHROPIC_DUMP))
    response["content"][0]["citations"].append({**response["content"][0]["citations"][0], "cited_text": GUIDE_SECOND})
    response["content"][2]["citations"] += [{**response["content"][0]["citations"][0], "cited_text": RETRIES}, appendix]
    result = add(store_root, tmp_path, "anthropic", response, DUMPS["anthropic"][1])
    assert result.exit_code == 1
    assert "1 added, 0 revised, 0 unchanged, 0 error(s), 1 citation(s) of missing documents" in result.output
    assert (
        "line 1: response.content.2.citations.2: documents has no entry for this source (7, 'Appendix')"
        in result.output
    )

    rows = exported(store_root, tmp_path)
    assert rows["claim_text"].unique(maintain_order=True).to_list() == [FIRST, SECOND]
    assert rows.height == 5
    good = rows.filter(pl.col("anchored_by") == "exact")
    assert good["quote"].to_list() == [GUIDE_FIRST, GUIDE_SECOND, LIMITS_V1, RETRIES]
    (bad,) = rows.filter(pl.col("anchored_by") == "unanchored").iter_rows(named=True)
    assert (bad["claim_index"], bad["chunk_id"], bad["quote"]) == (1, None, "Timeouts are listed in the appendix.")
    assert bad["anchor_note"] == "documents has no entry for this source (7, 'Appendix')"

    status = statuses(store_root, "v1", tmp_path)
    assert sorted(status["status"]) == ["invalid"] + ["valid"] * 4
    reason = status.filter(pl.col("status") == "invalid")["reason"].item()
    assert reason == "not anchored at registration: documents has no entry for this source (7, 'Appendix')"


# ---------------------------------------------------------------- Gemini: paths as the input spells them


def expect_errors(store_root: Path, tmp_path: Path, cases: dict[str, tuple[dict, str]], documents: list[dict]) -> None:
    """Each response of `cases` is refused with its error line, and registers nothing."""
    for name, (response, message) in cases.items():
        result = add(store_root, tmp_path, "gemini", response, documents, answer_id=name)
        assert result.exit_code == 1
        assert f"line 1: {message}" in result.output, result.output
        assert "0 added" in result.output


def test_gemini_sdk_errors_name_fields_as_the_dump_spells_them(tmp_path):
    store_root = store_of(tmp_path, zh=True)
    result = add(store_root, tmp_path, "gemini", GEMINI_DUMP, DUMPS["gemini"][1][:1])  # limits.md (chunk 1) unmapped
    assert result.exit_code == 1
    field = "response.candidates.0.grounding_metadata.grounding_supports.1.grounding_chunk_indices.0"
    assert (
        f"line 1: {field}: documents has no entry for this source ('gs://kb/limits.md', 'limits.md', 1)"
        in result.output
    )
    assert exported(store_root, tmp_path).select("source_path", "anchored_by").rows() == [
        ("guide.md", "exact"),
        (None, "unanchored"),
    ]

    first = GEMINI_DUMP["candidates"][0]["grounding_metadata"]["grounding_supports"][0]
    support = "response.candidates.0.grounding_metadata.grounding_supports.0"
    n_bytes = len(ANSWER_ZH.encode("utf-8"))
    expect_errors(
        store_root,
        tmp_path,
        {
            "past": (
                gemini_dump([{**first, "segment": segment(None, 999, FIRST_ZH)}]),
                f"{support}.segment.end_index: bytes 0-999 are not inside the part's {n_bytes} UTF-8 bytes",
            ),
            "part": (
                gemini_dump([{**first, "segment": segment(None, FIRST_ZH_BYTES, FIRST_ZH, part_index=2)}]),
                f"{support}.segment.part_index: names part 2, which holds no text (1 part(s))",
            ),
            "chunk": (
                gemini_dump([{**first, "grounding_chunk_indices": [0, 5]}]),
                f"{support}.grounding_chunk_indices.1: names grounding chunk 5, of 2",
            ),
        },
        DUMPS["gemini"][1],
    )


def test_gemini_errors_name_the_position_in_grounding_chunk_indices_not_the_chunk(tmp_path):
    store_root = store_of(tmp_path, zh=True)
    supports = "response.candidates.0.groundingMetadata.groundingSupports"
    result = add(store_root, tmp_path, "gemini", GEMINI_ZH, DUMPS["gemini"][1][:1])  # chunk 1 (limits.md) unmapped
    assert result.exit_code == 1
    assert f"line 1: {supports}.1.groundingChunkIndices.0: documents has no entry for this source" in result.output

    no_chunk_1 = json.loads(json.dumps(GEMINI_ZH))
    del no_chunk_1["candidates"][0]["groundingMetadata"]["groundingChunks"][1]
    expect_errors(
        store_root,
        tmp_path,
        {"no-chunk": (no_chunk_1, f"{supports}.1.groundingChunkIndices.0: names grounding chunk 1, of 1")},
        DUMPS["gemini"][1],
    )


# ---------------------------------------------------------------- shapes not covered elsewhere


def test_openai_chat_completions_url_citations(tmp_path):
    store_root = store_of(tmp_path)
    chat = {  # openai.types.chat.ChatCompletion.model_dump(mode="json")
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1750000000,
        "model": "gpt-4o-search-preview",
        "service_tier": None,
        "system_fingerprint": None,
        "usage": None,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": None,
                "message": {
                    "role": "assistant",
                    "content": ANSWER,
                    "refusal": None,
                    "audio": None,
                    "function_call": None,
                    "tool_calls": None,
                    "annotations": [
                        {
                            "type": "url_citation",
                            "url_citation": {
                                "url": "https://kb.example/guide",
                                "title": "Guide",
                                "start_index": 0,
                                "end_index": len(FIRST),
                            },
                        },
                        {
                            "type": "url_citation",
                            "url_citation": {
                                "url": "https://kb.example/limits",
                                "title": "Limits",
                                "start_index": len(FIRST) + 1,
                                "end_index": len(ANSWER),
                            },
                        },
                    ],
                },
            }
        ],
    }
    documents = [
        {"key": "https://kb.example/guide", "source_path": "guide.md"},
        {"key": "https://kb.example/limits", "source_path": "limits.md"},
    ]
    result = add(store_root, tmp_path, "openai", chat, documents)
    assert result.exit_code == 0, result.output
    rows = exported(store_root, tmp_path)
    assert cited_paths(rows) == [["guide.md"], ["limits.md"]]
    assert set(rows["anchored_by"]) == {"document"}  # a URL citation gives no passage: the whole document backs it
    assert set(statuses(store_root, "v1", tmp_path)["status"]) == {"valid"}


def two_page_pdf(path: Path, pages: list[str]) -> None:
    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    pdf.output(str(path))


def test_anthropic_page_content_block_and_search_result_locations(tmp_path):
    backups, restores = (
        "Backups run every night at two and are kept for thirty days.",
        "Restores take about one hour for each terabyte.",
    )
    files = corpus(GUIDE, LIMITS_V1)
    write_tree(tmp_path / "v1", files)
    two_page_pdf(tmp_path / "v1" / "ops.pdf", [backups, restores])
    store = CorpusStore(tmp_path / "store")
    ingest(tmp_path / "v1", store, version="v1", config=ParseConfig(workers=1))

    answer = [
        "Restores take an hour per terabyte.",
        " ",
        "The timeout is five seconds.",
        " ",
        "Connections are reused.",
    ]
    citations = [
        [
            {
                "type": "page_location",
                "cited_text": restores,
                "document_index": 0,
                "document_title": "ops.pdf",
                "file_id": None,
                "start_page_number": 2,
                "end_page_number": 3,
            }
        ],
        [],
        [
            {
                "type": "content_block_location",
                "cited_text": LIMITS_V1,
                "document_index": 1,
                "document_title": None,
                "file_id": None,
                "start_block_index": 0,
                "end_block_index": 1,
            }
        ],
        [],
        [
            {
                "type": "search_result_location",
                "cited_text": GUIDE_FIRST,
                "source": "https://kb.example/guide",
                "title": None,
                "search_result_index": 0,
                "start_block_index": 0,
                "end_block_index": 1,
            }
        ],
    ]
    response = {
        "type": "message",
        "role": "assistant",
        "stop_sequence": None,
        "content": [
            {"type": "text", "text": text, "citations": cites or None} for text, cites in zip(answer, citations)
        ],
    }
    # The request's documents: a PDF (base64 source), a custom-content document, then a search_result block.
    documents = [
        {"source_path": "ops.pdf"},
        {"source_path": "limits.md"},
        {"key": "https://kb.example/guide", "source_path": "guide.md"},
    ]
    result = add(store.root, tmp_path, "anthropic", response, documents)
    assert result.exit_code == 0, result.output
    rows = exported(store.root, tmp_path)
    assert rows.select("claim_index", "source_path", "anchored_by", "quote").rows() == [
        (0, "ops.pdf", "exact", restores),
        (1, "limits.md", "exact", LIMITS_V1),
        (2, "guide.md", "exact", GUIDE_FIRST),
    ]
    pdf_text = (
        store.read_documents("v1", columns=["source_path", "text"])
        .filter(pl.col("source_path") == "ops.pdf")["text"]
        .item()
    )
    assert rows["start_char"][0] == pdf_text.index(restores) > pdf_text.index(backups)  # on the page the citation names
    assert set(statuses(store.root, "v1", tmp_path)["status"]) == {"valid"}


def stream_events(text_pieces: list[str], citations: list[dict]) -> list[dict]:
    """cohere ClientV2.chat_stream's events, each model_dump(mode="json")-ed, in the order the docs show."""
    message = {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}
    events = [
        {"type": "message-start", "id": "c0ffee", "delta": {"message": message}},
        {"type": "content-start", "index": 0, "delta": {"message": {"content": {"type": "text", "text": ""}}}},
    ]
    events += [
        {"type": "content-delta", "index": 0, "logprobs": None, "delta": {"message": {"content": {"text": piece}}}}
        for piece in text_pieces
    ]
    for i, citation in enumerate(citations):
        events += [
            {"type": "citation-start", "index": i, "delta": {"message": {"citations": citation}}},
            {"type": "citation-end", "index": i},
        ]
    return [
        *events,
        {"type": "content-end", "index": 0},
        {
            "type": "message-end",
            "id": None,
            "delta": {
                "finish_reason": "COMPLETE",
                "error": None,
                "usage": {"billed_units": {"input_tokens": 300, "output_tokens": 20}},
            },
        },
    ]


def test_cohere_stream_events_assemble_into_one_response(tmp_path):
    store_root = store_of(tmp_path)
    documents = DUMPS["cohere"][1]
    assert add(store_root, tmp_path, "cohere", COHERE, documents, answer_id="whole").exit_code == 0
    pieces = [ANSWER[i : i + 7] for i in range(0, len(ANSWER), 7)]
    streamed = stream_events(pieces, COHERE_DUMP["message"]["citations"])
    result = add(store_root, tmp_path, "cohere", streamed, documents, answer_id="streamed")
    assert result.exit_code == 0, result.output

    columns = ["claim_index", "claim_text", "chunk_id", "quote", "anchored_by"]
    rows = exported(store_root, tmp_path)
    whole, stream = (rows.filter(pl.col("answer_id") == name).select(columns) for name in ("whole", "streamed"))
    assert stream.height == 2 and stream.equals(whole)
    assert set(statuses(store_root, "v1", tmp_path)["status"]) == {"valid"}

    unmapped = stream_events(
        pieces,
        [
            COHERE_DUMP["message"]["citations"][0],
            {
                **COHERE_DUMP["message"]["citations"][1],
                "sources": [{"type": "document", "id": "doc:9", "document": {"id": "doc:9", "snippet": LIMITS_V1}}],
            },
        ],
    )
    result = add(store_root, tmp_path, "cohere", unmapped, documents, answer_id="unmapped")
    assert result.exit_code == 1
    at = next(i for i, event in enumerate(unmapped) if event["type"] == "citation-start" and event["index"] == 1)
    assert (
        f"line 1: response.{at}.delta.message.citations.sources.0: "
        "documents has no entry for this source ('doc:9', 'doc:9', 9)" in result.output
    )


def test_repair_keeps_an_unmappable_citation_invalid_beside_the_repaired_ones(tmp_path):
    """An unanchored citation (no chunk, no document) is a normal row: repair --apply re-points the moved ones
    and carries it into the new revision, still invalid with its reason (#30: repair died casting null chunk ids)."""
    store_root = store_of(tmp_path)
    appendix = {
        "type": "page_location",
        "cited_text": "Timeouts are listed in the appendix.",
        "document_index": 7,
        "document_title": "Appendix",
        "file_id": None,
        "start_page_number": 3,
        "end_page_number": 4,
    }
    response = json.loads(json.dumps(ANTHROPIC_DUMP))
    response["content"][2]["citations"].append(appendix)
    assert add(store_root, tmp_path, "anthropic", response, DUMPS["anthropic"][1]).exit_code == 1
    ingest(
        write_tree(tmp_path / "v2", corpus(GUIDE, LIMITS_V1, guide_path="manual/guide.md")),
        CorpusStore(store_root),
        version="v2",
        config=ParseConfig(workers=1),
    )
    report = tmp_path / "report.html"
    assert run("stale", "--against", "v2", "--store", store_root, "--report", report).exit_code == 0

    repaired = run("repair", "--against", "v2", "--apply", "--store", store_root)
    assert repaired.exit_code == 0, repaired.output
    rows = exported(store_root, tmp_path)
    assert rows["revision"].unique().to_list() == [2]
    assert sorted(rows.filter(pl.col("chunk_id").is_not_null())["source_path"]) == ["limits.md", "manual/guide.md"]
    (bad,) = rows.filter(pl.col("chunk_id").is_null()).iter_rows(named=True)
    assert (bad["anchored_by"], bad["quote"]) == ("unanchored", "Timeouts are listed in the appendix.")
    assert bad["anchor_note"] == "documents has no entry for this source (7, 'Appendix')"
    status = statuses(store_root, "v2", tmp_path)
    assert sorted(status["status"]) == ["invalid", "valid", "valid"]
    assert (
        status.filter(pl.col("status") == "invalid")["reason"]
        .item()
        .endswith("documents has no entry for this source (7, 'Appendix')")
    )
