"""Real Chinese data: the Vue.js docs (zh-CN) at three dates, through ingest, marker-form answers and
`citekeeper stale`.

One store holds the three revisions as versions named by date. Answers are built from sentences of the
oldest revision in marker form (Chinese sentences, [n] and 【n】 markers) and judged against the newest.
"""

from __future__ import annotations

import json
from collections import defaultdict

import polars as pl
import pytest
from click.testing import CliRunner

from citekeeper.answers.records import parse_answer
from citekeeper.answers.store import AnswerStore
from citekeeper.schema import CITATION_STATUS
from citekeeper.store import CorpusStore
from citekeeper.text import is_cjk, normalize_text, sentence_spans, split_sentences
from parsers.records import ParseConfig
from pipelines.cli import main
from tests.conftest import VUE_DOCS_ZH, require_eval

DATES = (
    sorted(p.name for p in VUE_DOCS_ZH.iterdir() if p.is_dir() and p.name[:1].isdigit()) if VUE_DOCS_ZH.is_dir() else []
)
OLDEST, NEWEST = (DATES[0], DATES[-1]) if DATES else (None, None)
MAX_CHARS = ParseConfig().max_chunk_chars
MIN_SENTENCE_CHARS = 12  # shorter sentences (headings, "示例：") are too ambiguous to cite


@pytest.fixture(scope="module")
def vue_store(tmp_path_factory) -> CorpusStore:
    from parsers.ingest import ingest

    require_eval(VUE_DOCS_ZH)
    assert len(DATES) == 3, f"vue-docs-zh (three dated folders) missing under {VUE_DOCS_ZH}"
    store = CorpusStore(tmp_path_factory.mktemp("vue") / "store")
    for date in DATES:
        result = ingest(VUE_DOCS_ZH / date, store, version=date)
        assert result.created and all(e.error_type == "NoText" for e in result.errors), result.errors
    return store


def chinese(sentence: str) -> bool:
    return sum(map(is_cjk, sentence)) >= len(sentence) // 3


def test_every_chunk_offset_reproduces_its_text(vue_store):
    for date in DATES:
        docs = dict(vue_store.read_documents(date, columns=["doc_id", "text"]).iter_rows())
        chunks = vue_store.read_chunks(date, columns=["doc_id", "text", "start_char", "end_char"])
        assert chunks.height > 1000
        for doc_id, text, start, end in chunks.iter_rows():
            assert docs[doc_id][start:end] == text, (date, doc_id, start)


def copies(chunks: pl.DataFrame) -> pl.DataFrame:
    """Chunks with their text's whitespace runs as one space (`spaced`) and which copy of it in its document they
    are, in document order (`copy`)."""
    spaced = pl.col("text").str.replace_all(r"\s+", " ").str.strip_chars()
    return (
        chunks.sort("doc_id", "start_char")
        .with_columns(spaced=spaced)
        .with_columns(copy=pl.int_range(pl.len()).over("doc_id", "spaced"))
    )


def test_unchanged_chunks_keep_their_ids_across_both_revisions(vue_store):
    # The middle revision is the English upstream text the translation repo carried at that commit (11 Han
    # characters in all), so the consecutive pairs share few chunks; oldest -> newest is Chinese to Chinese.
    least_kept = {(DATES[0], DATES[1]): 50, (DATES[1], DATES[2]): 5, (OLDEST, NEWEST): 500}
    for (old, new), minimum in least_kept.items():
        columns = ["doc_id", "text", "chunk_id", "start_char"]
        before, after = vue_store.read_chunks(old, columns=columns), vue_store.read_chunks(new, columns=columns)
        kept = after.join(before, on=["doc_id", "text"], suffix="_old")
        # The k-th copy of a text in a document (whitespace runs counted as one space, as ids count copies) keeps
        # the id of its k-th copy before; copies beyond the old count are new.
        before, after = (copies(frame) for frame in (before, after))
        changed_id = after.join(before, on=["doc_id", "spaced", "copy"], suffix="_old").filter(
            pl.col("chunk_id") != pl.col("chunk_id_old")
        )
        assert changed_id.is_empty(), (old, new, changed_id.head(3).to_dicts())
        assert kept["chunk_id"].n_unique() >= minimum, (old, new)
    assert (kept["start_char"] != kept["start_char_old"]).sum() >= 100  # ids survive edits before them


def test_no_chunk_is_cut_mid_sentence(vue_store):
    """Every chunk starts and ends at a sentence boundary of its document, unless that sentence alone is
    longer than the maximum chunk size."""
    for date in DATES:
        docs = dict(vue_store.read_documents(date, columns=["doc_id", "text"]).iter_rows())
        chunks = vue_store.read_chunks(date, columns=["doc_id", "start_char", "end_char"])
        cut_inside_long = 0
        for (doc_id,), group in chunks.group_by("doc_id"):
            spans = sentence_spans(docs[doc_id])
            starts, ends = {s for s, _ in spans}, {e for _, e in spans}
            for _, start, end in group.iter_rows():
                for position, allowed in ((start, starts), (end, ends)):
                    if position in allowed:
                        continue
                    inside = next(((s, e) for s, e in spans if s < position < e), None)
                    assert inside is not None and inside[1] - inside[0] > MAX_CHARS, (date, doc_id, position)
                    cut_inside_long += 1
        assert cut_inside_long < chunks.height // 20  # overlong sentences (code, tables) are the exception


def marker_answers(store: CorpusStore, version: str) -> list[dict]:
    """One marker-form answer per chunk with Chinese sentences: up to three sentences of one paragraph,
    each followed by a marker citing the chunk with the sentence as its quote."""
    answers = []
    for chunk_id, text in store.read_chunks(version, columns=["chunk_id", "text"]).iter_rows():
        paragraph = max(text.split("\n\n"), key=len)
        # prose sentences: a run of spaces (a code comment) is not kept as written in a claim
        sentences = [
            s
            for s in split_sentences(paragraph)
            if len(s) >= MIN_SENTENCE_CHARS and "\n" not in s and "  " not in s and chinese(s)
        ]
        if not sentences or not all(s in paragraph for s in sentences):
            continue
        sentences = sentences[:3]
        styles = ("[{}]", "【{}】", " [{}]")
        answer = "".join(sentence + styles[i % 3].format(i + 1) for i, sentence in enumerate(sentences))
        answers.append(
            {
                "answer_id": f"zh-{chunk_id}",
                "question": "这是什么？",
                "answer": answer,
                "corpus_version": version,
                "references": [{"ref": i + 1, "chunk_id": chunk_id, "quote": s} for i, s in enumerate(sentences)],
                "sentences": sentences,
            }
        )
    return answers


@pytest.fixture(scope="module")
def stale_run(vue_store, tmp_path_factory):
    answers = marker_answers(vue_store, OLDEST)
    path = tmp_path_factory.mktemp("answers") / "answers.jsonl"
    path.write_text(
        "\n".join(json.dumps({k: v for k, v in a.items() if k != "sentences"}, ensure_ascii=False) for a in answers)
    )
    runner = CliRunner()
    store = ["--store", str(vue_store.root)]
    added = runner.invoke(main, ["answers", "add", str(path), *store])
    assert added.exit_code == 0, added.output
    out = path.parent / "status.parquet"
    stale = runner.invoke(main, ["stale", "--against", NEWEST, "--out", str(out), *store])
    assert stale.exit_code == 0, (stale.output, stale.exception)
    return answers, pl.read_parquet(out)


def test_marker_answers_give_one_claim_per_sentence(stale_run, vue_store):
    answers, _ = stale_run
    assert len(answers) >= 300
    for answer in answers:
        claims = parse_answer(answer).claims
        assert [c.text for c in claims] == answer["sentences"], answer["answer"]
        assert [len(c.citations) for c in claims] == [1] * len(claims)
    stored = AnswerStore(vue_store.root).claims()
    assert stored.height == sum(len(a["sentences"]) for a in answers)


def test_stale_against_the_newest_revision_matches_the_text(stale_run, vue_store):
    """Each quote's expected status follows from the text itself, and every sentence that survives
    anywhere in the newest revision is located exactly."""
    _, status = stale_run
    assert status.columns == CITATION_STATUS.names
    new_docs = vue_store.read_documents(NEWEST, columns=["doc_id", "source_path", "text"])
    text_by_id = dict(zip(new_docs["doc_id"], new_docs["text"]))
    text_by_path = dict(zip(new_docs["source_path"], new_docs["text"]))
    seen = defaultdict(int)
    normalised = 0
    for row in status.to_dicts():
        quote = row["quote"]
        in_same_doc = quote in text_by_path.get(row["source_path"], "")
        anywhere = in_same_doc or any(quote in text for text in text_by_id.values())
        seen[(row["status"], anywhere)] += 1
        assert row["status"] != "invalid" and row["quote_match"] == "exact", row["reason"]
        if row["status"] in ("valid", "relocated", "drifted"):
            span = text_by_id[row["new_doc_id"]][row["new_start_char"] : row["new_end_char"]]
            # An edit that only touched forms ("（CI/CD）" -> " (CI/CD) ") still holds, as a normalised match.
            assert (
                span == quote
                if row["new_match"] == "exact"
                else normalize_text(span, loose=True) == normalize_text(quote, loose=True)
            ), (span, quote)
            normalised += row["new_match"] == "normalized"
        elif anywhere:
            assert row["suggested_method"] == "exact", row
            suggested = text_by_path[row["suggested_source_path"]]
            assert suggested[row["suggested_start_char"] : row["suggested_end_char"]] == quote
            if in_same_doc:
                assert row["suggested_source_path"] == row["source_path"]
        else:
            assert row["status"] in ("stale", "removed") and row["suggested_method"] != "exact"
    assert normalised >= 1  # the real revisions include form-only edits
    assert seen[("valid", True)] >= 100 and seen[("relocated", True)] + seen[("drifted", True)] >= 10
    assert sum(n for (s, anywhere), n in seen.items() if s in ("stale", "removed") and anywhere) >= 3, (
        seen
    )  # re-anchored
    assert sum(n for (_, anywhere), n in seen.items() if not anywhere) >= 5, seen  # truly gone


def test_repair_of_chinese_marker_answers_closes_the_loop(stale_run, vue_store):
    """`repair --apply` against the newest revision, then `stale` again: every citation re-pointed at a verbatim
    span is valid, no answer lost a sentence, a marker or a reference (runs last: it writes revision 2)."""
    from tests.repair_checks import repair_and_recheck

    repairs, _ = repair_and_recheck(vue_store, NEWEST)
    kinds = dict(repairs.group_by("repair").len().iter_rows())
    assert kinds.get("repointed_successor", 0) >= 10 and kinds.get("repointed_exact", 0) >= 3, kinds
    assert kinds.get("unresolved", 0) >= 1 and "invalid" not in kinds, kinds
    exact = repairs.filter(pl.col("repair") == "repointed_exact")
    assert (exact["new_quote"] == exact["old_quote"]).all() and exact["new_quote"].map_elements(
        chinese, return_dtype=pl.Boolean
    ).all()
