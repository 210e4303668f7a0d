"""Real data: answers in both forms built from httpx-docs 0.23.0, repaired against 0.28.1 with --apply, then judged
again (the Chinese marker-form case is in tests/test_vue_zh.py)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from citekeeper.answers.store import AnswerStore
from citekeeper.store import CorpusStore
from citekeeper.text import split_sentences
from tests.conftest import HTTPX_DOCS, require_eval
from tests.repair_checks import repair_and_recheck

OLD_TAG, NEW_TAG = "0.23.0", "0.28.1"


def httpx_answers(store: CorpusStore) -> list[dict]:
    """Per old chunk with two citable sentences: a structured answer (even chunks) or a marker-form one (odd
    chunks; a whole-chunk reference beside the quotes, and a reference no marker uses)."""
    answers = []
    chunks = store.read_chunks(OLD_TAG, columns=["chunk_id", "text", "text_hash"])
    for i, chunk in enumerate(chunks.iter_rows(named=True)):
        sentences = [s for s in split_sentences(chunk["text"]) if len(s) >= 40 and "\n" not in s][:2]
        if len(sentences) < 2:
            continue
        base = {"answer_id": f"a{i}", "question": "What do the docs say?", "corpus_version": OLD_TAG}
        quoted = [{"chunk_id": chunk["chunk_id"], "quote": s} for s in sentences]
        if i % 3 == 0:
            quoted[0]["text_hash"] = chunk["text_hash"]
        if i % 2 == 0:
            claims = [
                {"claim_id": f"c{n}", "text": s, "citations": [q]} for n, (s, q) in enumerate(zip(sentences, quoted))
            ]
            answers.append(base | {"answer": " ".join(sentences), "claims": claims})
        else:
            references = [{"ref": n + 1, **q} for n, q in enumerate(quoted)]
            references += [{"ref": 3, "chunk_id": chunk["chunk_id"]}, {"ref": 9, "chunk_id": chunk["chunk_id"]}]
            answers.append(base | {"answer": f"{sentences[0]} [1] {sentences[1]} [2][3]", "references": references})
    return answers


@pytest.fixture(scope="module")
def httpx_store(tmp_path_factory) -> CorpusStore:
    from parsers.ingest import ingest

    require_eval(HTTPX_DOCS)
    store = CorpusStore(tmp_path_factory.mktemp("httpx-repair") / "store")
    for tag in (OLD_TAG, NEW_TAG):
        ingest(HTTPX_DOCS / tag, store, version=tag)
    answers = httpx_answers(store)
    path = store.root.parent / "answers.jsonl"
    path.write_text("\n".join(json.dumps(a) for a in answers) + "\n")
    assert AnswerStore(store.root).add(path).n_registered == len(answers) >= 100
    return store


def test_repair_against_a_newer_tag_closes_the_loop(httpx_store):
    repairs, rechecked = repair_and_recheck(httpx_store, NEW_TAG)
    kinds = dict(repairs.group_by("repair").len().iter_rows())
    # The tags exercise re-pointing at successors, at verbatim spans elsewhere, and leaving lost ones alone.
    assert kinds.get("repointed_successor", 0) >= 10 and kinds.get("repointed_exact", 0) >= 3, kinds
    assert kinds.get("unresolved", 0) >= 1 and kinds.get("kept", 0) >= 10, kinds
    assert "invalid" not in kinds
    forms = AnswerStore(httpx_store.root).answers().filter(pl.col("revision") == 2)["input_form"]
    assert set(forms) == {"structured", "marker"}
    # Whole-chunk references were re-pointed too (and hold: repair_and_recheck checked every re-pointed one).
    whole = rechecked.filter(pl.col("repair").str.starts_with("repointed_") & pl.col("quote").is_null())
    assert whole.height >= 1 and (whole["status"] == "valid").all()
