"""`answers add --from FORMAT`: each provider's response, shaped as its docs show it, through import -> stale
(valid at the version it cites) -> an edit -> stale (what the edit dictates) -> repair --apply -> answers export.

The edit moves guide.md to manual/guide.md (same text: its citations are relocated) and changes the sentence
limits.md was cited for (stale). The oracle is that edit, by the document each citation names."""

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from citekeeper.answers.formats import RESPONSE_FORMATS, converter
from citekeeper.answers.records import AnswerInputError
from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from parsers.records import ParseConfig
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
    return {
        guide_path: f"# Guide\n\n{guide}\n\n## Retries\n\nFailed requests are retried three times.\n",
        "limits.md": f"# Limits\n\n{limits}\n",
    }


def run(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


# ---------------------------------------------------------------- responses as each provider documents them

ANTHROPIC = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "stop_reason": "end_turn",
    "content": [
        {
            "type": "text",
            "text": "Connections are kept alive for reuse.",
            "citations": [
                {
                    "type": "char_location",
                    "cited_text": GUIDE.split(". ")[0] + ".",
                    "document_index": 0,
                    "document_title": "Guide",
                    "start_char_index": 9,
                    "end_char_index": 71,
                }
            ],
        },
        {"type": "text", "text": " "},
        {
            "type": "text",
            "text": "The default timeout is five seconds.",
            "citations": [
                {
                    "type": "content_block_location",
                    "cited_text": LIMITS_V1,
                    "document_index": 1,
                    "document_title": "Limits",
                    "start_block_index": 0,
                    "end_block_index": 1,
                }
            ],
        },
    ],
    "usage": {"input_tokens": 410, "output_tokens": 31},
}

OPENAI = {
    "id": "resp_01",
    "object": "response",
    "status": "completed",
    "model": "gpt-4.1",
    "output": [
        {
            "type": "file_search_call",
            "id": "fs_01",
            "status": "completed",
            "queries": ["connection reuse timeout"],
            "results": [
                {"file_id": "file-guide", "filename": "guide.md", "score": 0.91, "text": GUIDE, "attributes": {}},
                {"file_id": "file-limits", "filename": "limits.md", "score": 0.87, "text": LIMITS_V1, "attributes": {}},
            ],
        },
        {
            "type": "message",
            "id": "msg_01",
            "status": "completed",
            "role": "assistant",
            "content": [
                {
                    "type": "output_text",
                    "text": ANSWER,
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

COHERE = {
    "id": "c0ffee",
    "finish_reason": "COMPLETE",
    "message": {
        "role": "assistant",
        "content": [{"type": "text", "text": ANSWER}],
        "citations": [
            {
                "start": 0,
                "end": len(FIRST) - 1,
                "text": FIRST[:-1],
                "type": "TEXT_CONTENT",
                "sources": [
                    {"type": "document", "id": "guide", "document": {"id": "guide", "title": "Guide", "snippet": GUIDE}}
                ],
            },
            {
                "start": len(FIRST) + 1,
                "end": len(ANSWER) - 1,
                "text": ANSWER[len(FIRST) + 1 : -1],
                "type": "TEXT_CONTENT",
                "sources": [{"type": "document", "id": "limits", "document": {"id": "limits", "snippet": LIMITS_V1}}],
            },
        ],
    },
    "usage": {"billed_units": {"input_tokens": 300, "output_tokens": 20}},
}

FIRST_ZH_BYTES = len(FIRST_ZH.encode("utf-8"))
GEMINI_ZH = {
    "candidates": [
        {
            "content": {"role": "model", "parts": [{"text": ANSWER_ZH}]},
            "finishReason": "STOP",
            "groundingMetadata": {
                "groundingChunks": [
                    {
                        "retrievedContext": {
                            "uri": "gs://kb/guide.md",
                            "title": "guide.md",
                            "text": GUIDE_ZH.split("。")[0] + "。",
                        }
                    },
                    {"retrievedContext": {"uri": "gs://kb/limits.md", "title": "limits.md", "text": LIMITS_ZH_V1}},
                ],
                "groundingSupports": [
                    {
                        "segment": {"endIndex": FIRST_ZH_BYTES, "text": FIRST_ZH},
                        "groundingChunkIndices": [0],
                        "confidenceScores": [0.93],
                    },
                    {
                        "segment": {
                            "startIndex": FIRST_ZH_BYTES,
                            "endIndex": len(ANSWER_ZH.encode("utf-8")),
                            "text": ANSWER_ZH[len(FIRST_ZH) :],
                        },
                        "groundingChunkIndices": [1],
                        "confidenceScores": [0.88],
                    },
                ],
                "retrievalQueries": ["默认超时"],
            },
        }
    ],
    "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 24},
    "modelVersion": "gemini-2.5-flash",
}


def node(i: int, node_id: str, path: str, text: str) -> dict:
    return {
        "node": {
            "id_": node_id,
            "text": f"Source {i}:\n{text}\n",
            "metadata": {"file_path": path, "file_name": Path(path).name},
            "relationships": {
                "1": {
                    "node_id": f"doc-{Path(path).stem}",
                    "node_type": "4",
                    "metadata": {},
                    "class_name": "RelatedNodeInfo",
                }
            },
            "start_char_idx": 9,
            "end_char_idx": 9 + len(text),
            "class_name": "TextNode",
        },
        "score": 0.8,
        "class_name": "NodeWithScore",
    }


LLAMAINDEX = {
    "response": "Connections are kept alive for reuse [1]. The default timeout is five seconds [2].",
    "source_nodes": [
        node(1, "n-guide", "/data/kb/guide.md", GUIDE),
        node(2, "n-limits", "/data/kb/limits.md", LIMITS_V1),
    ],
    "metadata": {"n-guide": {"file_path": "/data/kb/guide.md"}, "n-limits": {"file_path": "/data/kb/limits.md"}},
}

LANGCHAIN = {  # the citation tutorial's QuotedAnswer: every quote backs the whole answer
    "answer": ANSWER,
    "citations": [{"source_id": 0, "quote": GUIDE.split(". ")[0] + "."}, {"source_id": 1, "quote": LIMITS_V1}],
}

POSITIONAL = [{"source_path": "guide.md"}, {"source_path": "limits.md"}]
CASES = {
    "anthropic": (ANTHROPIC, POSITIONAL, "en"),
    "openai": (
        OPENAI,
        [{"key": "file-guide", "source_path": "guide.md"}, {"key": "file-limits", "source_path": "limits.md"}],
        "en",
    ),
    "cohere": (
        COHERE,
        [{"key": "guide", "source_path": "guide.md"}, {"key": "limits", "source_path": "limits.md"}],
        "en",
    ),
    "gemini": (
        GEMINI_ZH,
        [
            {"key": "gs://kb/guide.md", "source_path": "guide.md"},
            {"key": "gs://kb/limits.md", "source_path": "limits.md"},
        ],
        "zh",
    ),
    "llamaindex": (
        LLAMAINDEX,
        [{"key": "/data/kb/guide.md", "source_path": "guide.md"}, {"key": "doc-limits", "source_path": "limits.md"}],
        "en",
    ),
    "langchain": (LANGCHAIN, POSITIONAL, "en"),
}
# What each claim cites, by document: the span each provider gives (LangChain's quotes back the whole answer).
EXPECTED_CLAIMS = {fmt: [["guide.md"], ["limits.md"]] for fmt in CASES} | {"langchain": [["guide.md", "limits.md"]] * 2}


def sample(fmt: str) -> tuple[object, list[dict], str]:
    """The sample response of a registered format, its documents and its language: every format has one."""
    assert fmt in CASES, f"--from {fmt} is registered (citekeeper.answers.formats) but has no sample in CASES"
    return CASES[fmt]


@pytest.fixture
def versions(tmp_path, fmt) -> tuple[Path, Path]:
    """A store with v1, and the v2 source tree (the edit) beside it, in the language of `fmt`'s sample."""
    zh = sample(fmt)[2] == "zh"
    guide, v1, v2 = (GUIDE_ZH, LIMITS_ZH_V1, LIMITS_ZH_V2) if zh else (GUIDE, LIMITS_V1, LIMITS_V2)
    store = CorpusStore(tmp_path / "store")
    ingest(write_tree(tmp_path / "v1", corpus(guide, v1)), store, version="v1", config=ParseConfig(workers=1))
    return store.root, write_tree(tmp_path / "v2", corpus(guide, v2, guide_path="manual/guide.md"))


def statuses(store_root: Path, version: str, tmp_path: Path) -> pl.DataFrame:
    out = tmp_path / f"status-{version}.parquet"
    assert run("stale", "--against", version, "--store", store_root, "--out", out).exit_code == 0
    return pl.read_parquet(out)


@pytest.mark.parametrize("fmt", RESPONSE_FORMATS)
def test_each_format_survives_an_edit_and_a_repair(fmt, versions, tmp_path):
    store_root, v2_tree = versions
    response, documents, _ = sample(fmt)
    line = {
        "answer_id": f"{fmt}-1",
        "question": "How are connections and timeouts handled?",
        "corpus_version": "v1",
        "documents": documents,
        "response": response,
    }
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
    expected = {
        "guide.md": "relocated",
        "limits.md": "stale",
    }  # the edit: guide.md moved, the limits sentence rewritten
    assert {(r["source_path"], r["status"]) for r in at_v2.iter_rows(named=True)} == set(expected.items())

    repaired = run("repair", "--against", "v2", "--apply", "--store", store_root)
    assert repaired.exit_code == 0, repaired.output
    assert run("answers", "export", "--out", export, "--store", store_root).exit_code == 0
    after = pl.read_parquet(export)
    assert after["revision"].unique().to_list() == [2]
    assert (
        after["claim_text"].unique(maintain_order=True).to_list()
        == rows["claim_text"].unique(maintain_order=True).to_list()
    )
    assert after.height == rows.height  # every citation kept
    moved = after.filter(pl.col("cited_version") == "v2")
    assert set(moved["source_path"]) >= {"manual/guide.md"}
    assert set(statuses(store_root, "v2", tmp_path).join(moved.select("citation_id"), on="citation_id")["status"]) == {
        "valid"
    }

    from citekeeper.answers.store import AnswerStore

    first, repaired = AnswerStore(store_root).all_answers().sort("revision")["source_record"].to_list()
    assert json.loads(first) == line  # the response, as it came
    assert json.loads(repaired)["given"] == line  # and kept beside the repaired citations


def test_gemini_byte_offsets_are_not_code_points():
    """The second segment starts at byte 39, which is code point 13: read as code points it would fall past the
    first sentence's end in the wrong place."""

    def claims(response) -> list[tuple[str, list[str]]]:
        line = {"answer_id": "g", "corpus_version": "v1", "documents": CASES["gemini"][1], "response": response}
        return [(c.text, [x.document.source_path for x in c.citations]) for c in converter("gemini")(line).claims]

    assert claims(GEMINI_ZH) == [(FIRST_ZH, ["guide.md"]), (ANSWER_ZH[len(FIRST_ZH) :], ["limits.md"])]
    snake = json.loads(
        json.dumps(GEMINI_ZH)
        .replace("groundingMetadata", "grounding_metadata")
        .replace("groundingChunks", "grounding_chunks")
        .replace("retrievedContext", "retrieved_context")
        .replace("groundingSupports", "grounding_supports")
        .replace("endIndex", "end_index")
        .replace("startIndex", "start_index")
        .replace("groundingChunkIndices", "grounding_chunk_indices")
    )
    assert claims(snake) == claims(GEMINI_ZH)  # the Python SDK's snake_case dump reads the same


def test_a_null_grounding_chunk_index_is_an_error_of_its_field():
    """A list keeps its nulls (only fields written as None are dropped): the index is named, not a crash."""
    response = json.loads(json.dumps(GEMINI_ZH))
    response["candidates"][0]["groundingMetadata"]["groundingSupports"][1]["groundingChunkIndices"] = [None]
    line = {"answer_id": "g", "corpus_version": "v1", "documents": CASES["gemini"][1], "response": response}
    with pytest.raises(AnswerInputError) as error:
        converter("gemini")(line)
    field = "response.candidates.0.groundingMetadata.groundingSupports.1.groundingChunkIndices.0"
    assert [str(issue) for issue in error.value.issues] == [f"{field}: should be a non-negative integer, not None"]


# ---------------------------------------------------------------- bad input, and the other documented shapes


@pytest.fixture
def english_store(tmp_path) -> Path:
    store = CorpusStore(tmp_path / "store")
    ingest(write_tree(tmp_path / "v1", corpus(GUIDE, LIMITS_V1)), store, version="v1", config=ParseConfig(workers=1))
    return store.root


def envelope(i: int, response, documents=POSITIONAL) -> str:
    return json.dumps({"answer_id": f"a{i}", "corpus_version": "v1", "documents": documents, "response": response})


def test_bad_lines_are_named_and_the_good_ones_register(english_store, tmp_path):
    missing_key = json.loads(json.dumps(ANTHROPIC))
    missing_key["content"][2]["citations"][0]["document_index"] = 7
    lines = [
        envelope(1, ANTHROPIC),
        envelope(2, {"choices": []}),  # an OpenAI response where an Anthropic one belongs
        envelope(3, missing_key),  # a source `documents` does not map: registered, that citation invalid
        envelope(4, ANTHROPIC, [{"source_path": "guide.md"}, {"source_path": "gone.md"}]),  # not in the version
        "{not json",
    ]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    result = run("answers", "add", tmp_path / "in.jsonl", "--from", "anthropic", "--store", english_store)
    assert result.exit_code == 1
    assert "3 added, 0 revised, 0 unchanged, 2 error(s), 2 citation(s) of missing documents" in result.output
    assert "line 2: response.content: missing" in result.output
    assert (
        "line 3: response.content.2.citations.0: documents has no entry for this source (7, 'Limits')" in result.output
    )
    assert "line 4: claims.1.citations.0: document 'gone.md' is not in cited version 'v1'" in result.output
    assert "line 5: json: not valid JSON" in result.output
    all_statuses = statuses(english_store, "v1", tmp_path)
    for answer_id, reason in [
        ("a3", "documents has no entry for this source (7, 'Limits')"),
        ("a4", "document 'gone.md'"),
    ]:
        status = all_statuses.filter(pl.col("answer_id") == answer_id)
        assert sorted(status["status"]) == ["invalid", "valid"]  # the citation is kept, judged invalid with the reason
        assert (
            f"not anchored at registration: {reason}" in status.filter(pl.col("status") == "invalid")["reason"].item()
        )

    shown = run("answers", "show", "a4", "--store", english_store).output
    assert (
        "anchored by exact" in shown
        and "anchored by unanchored: document 'gone.md' is not in cited version 'v1'" in shown
    )

    unknown = run("answers", "add", tmp_path / "in.jsonl", "--from", "bard", "--store", english_store)
    assert unknown.exit_code == 1
    assert (
        "unknown response format 'bard': use one of anthropic, openai, cohere, gemini, llamaindex, langchain"
        in unknown.output
    )


def test_a_quote_across_chunks_keeps_each_chunk_and_a_fuzzy_one_is_flagged(tmp_path):
    sentences = [f"Sentence {i} of the handbook describes setting number {i} in plain words." for i in range(60)]
    store = CorpusStore(tmp_path / "store")
    ingest(
        write_tree(tmp_path / "v1", {"handbook.md": "# Handbook\n\n" + " ".join(sentences) + "\n"}),
        store,
        version="v1",
        config=ParseConfig(workers=1, max_chunk_chars=800),
    )
    chunks = store.read_chunks("v1", columns=["chunk_id", "start_char", "end_char"]).sort("start_char")
    assert chunks.height >= 2
    text = store.read_documents("v1", columns=["text"])["text"].item()
    boundary = chunks["end_char"][0]
    across = text[boundary - 40 : boundary + 40].strip()
    fuzzy = sentences[3].replace("describes", "describe").replace("plain", "plian")
    records = [
        {
            "answer_id": "x",
            "answer": "Across [1]. Fuzzy [2]. Offsets [3].",
            "corpus_version": "v1",
            "references": [
                {"ref": 1, "source_path": "handbook.md", "quote": across},
                {"ref": 2, "source_path": "handbook.md", "quote": fuzzy},
                {
                    "ref": 3,
                    "source_path": "handbook.md",
                    "start_char": text.index(sentences[7]),
                    "end_char": text.index(sentences[7]) + len(sentences[7]),
                },
            ],
        }
    ]
    from citekeeper.api import answer_citations, register_answers

    assert register_answers(store.root, records).n_registered == 1
    rows = answer_citations(store.root)
    first = rows.filter(pl.col("claim_index") == 0)
    assert first["chunk_id"].to_list() == chunks["chunk_id"][:2].to_list()  # both chunks the quote touches
    assert " ".join(first["quote"]) == " ".join(across.split())  # its two parts, each in its chunk
    assert (first["quote_match"] == "exact").all()
    second = rows.filter(pl.col("claim_index") == 1).row(0, named=True)
    assert (second["anchored_by"], second["needs_review"]) == ("fuzzy", True)
    assert (
        sentences[3].startswith(second["quote"]) and len(second["quote"]) >= len(sentences[3]) - 2
    )  # the span it matched
    assert 0.9 <= second["anchor_score"] < 1
    third = rows.filter(pl.col("claim_index") == 2).row(0, named=True)
    assert (third["anchored_by"], third["needs_review"], third["quote"]) == ("offsets", True, sentences[7])


def test_openai_chat_completions_and_langchain_content_blocks(english_store):
    chat = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": ANSWER,
                    "annotations": [
                        {
                            "type": "url_citation",
                            "url_citation": {
                                "url": "https://kb.example/limits",
                                "title": "Limits",
                                "start_index": len(FIRST) + 1,
                                "end_index": len(ANSWER),
                            },
                        }
                    ],
                },
            }
        ],
    }
    line = {
        "answer_id": "c",
        "corpus_version": "v1",
        "documents": [{"key": "https://kb.example/limits", "source_path": "limits.md"}],
        "response": chat,
    }
    claims = converter("openai")(line).claims
    assert [[c.document.source_path for c in claim.citations] for claim in claims] == [[], ["limits.md"]]

    message = {
        "type": "ai",
        "content": [
            {
                "type": "text",
                "text": ANSWER,
                "annotations": [
                    {
                        "type": "citation",
                        "title": "guide.md",
                        "cited_text": GUIDE.split(". ")[0] + ".",
                        "start_index": 0,
                        "end_index": len(FIRST),
                    },
                    {"type": "non_standard_annotation", "value": {"x": 1}},
                ],
            }
        ],
    }
    line = {
        "answer_id": "l",
        "corpus_version": "v1",
        "documents": [{"key": "guide.md", "source_path": "guide.md"}],
        "response": message,
    }
    claims = converter("langchain")(line).claims
    assert [[(c.document.source_path, c.quote) for c in claim.citations] for claim in claims] == [
        [("guide.md", GUIDE.split(". ")[0] + ".")],
        [],
    ]


def test_the_dagster_answers_flow_takes_the_format_from_its_resource(tmp_path):
    import dagster as dg

    from assets import citations as citation_assets
    from assets import corpus as ingest_assets
    from assets.partitions import corpus_versions
    from tests.dagster_settings import settings

    source = write_tree(tmp_path / "v1", corpus(GUIDE, LIMITS_V1))
    answers = tmp_path / "answers.jsonl"
    answers.write_text(envelope(1, COHERE, CASES["cohere"][1]) + "\n")
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(corpus_versions.name, ["v1"])
    config = settings(
        store_dir=str(tmp_path / "store"), source_dir=str(source), answers_path=str(answers), answers_format="cohere"
    )
    result = dg.materialize(
        [ingest_assets.ingested_corpus, citation_assets.chunk_diff, citation_assets.citation_status],
        instance=instance,
        partition_key="v1",
        resources=config.resources(),
    )
    assert result.success
    status = pl.read_parquet(CorpusStore(tmp_path / "store").layout.citation_status_file("v1"))
    assert status.height == 2 and set(status["status"]) == {"valid"}
    with pytest.raises(ValueError, match="unknown response format 'cohere-v1'"):
        settings(answers_format="cohere-v1")


def test_the_readme_examples_read_as_documented():
    from tests.conftest import REPO

    reference = (REPO / "docs" / "answers.md").read_text(encoding="utf-8")
    block = reference.split("```jsonl\n", 1)[1].split("```", 1)[0]
    lines = [json.loads(line) for line in block.strip().splitlines()]
    assert [line["answer_id"].split("-")[0] for line in lines] == list(RESPONSE_FORMATS)
    for line in lines:
        (claim,) = converter(line["answer_id"].split("-")[0])(line).claims
        assert [(c.document.source_path, c.quote is not None) for c in claim.citations] == [("guide.md", True)]
