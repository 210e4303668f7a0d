"""HTML report: structure, escaping of document text, internal_only redaction, word diff; terminal summary."""

import re

import polars as pl

from changes.citation_status import CHUNK_COLUMNS, blast_radius, judge
from changes.reanchor import Reanchorer, reanchor
from citekeeper.answers.records import answer_rows, parse_answer
from citekeeper.identity import text_hash
from citekeeper.schema import ANSWERS, CITATION_STATUS, CITATIONS, CLAIMS
from citekeeper.scope import REDACTED
from citekeeper.tables import conform, from_rows
from reports.html import render_html, word_diff
from reports.terminal import terminal_summary
from tests.chunk_frames import build_version, diff_frames

SCRIPT_OLD = 'Use <script>alert("pwned")</script> tags with care & escape them.'
SCRIPT_NEW = 'Use <script>alert("pwned")</script> tags with great care & escape them.'
SECRET_OLD = "The failover password rotates every Tuesday at noon sharp."
MOVED = "This sentence leaves the public page for another one."

OLD = {"public.md": f"{SCRIPT_OLD}\n\n{MOVED}", "runbook.md": SECRET_OLD}
NEW = {"public.md": SCRIPT_NEW, "other.md": f"Intro.\n\n{MOVED} And grows."}


def report(plots_html: str = ""):
    old_docs, old_chunks = build_version("v1", OLD, internal=frozenset({"runbook.md"}))
    new_docs, new_chunks = build_version("v2", NEW)
    diff = diff_frames("v1", "v2", old_docs, new_docs, old_chunks, new_chunks)
    chunk_of = dict(zip(old_chunks["text_hash"], old_chunks["chunk_id"]))
    record = {
        "answer_id": "ans<1>",
        "question": "How do I <b>escape</b>?",
        "answer": "Carefully [1]. Passwords rotate [2]. It moved [3]. Uncited sentence.",
        "corpus_version": "v1",
        "references": [
            {"ref": 1, "chunk_id": chunk_of[text_hash(SCRIPT_OLD)], "quote": "care & escape them."},
            {"ref": 2, "chunk_id": chunk_of[text_hash(SECRET_OLD)], "quote": "rotates every Tuesday"},
            {"ref": 3, "chunk_id": chunk_of[text_hash(MOVED)], "quote": MOVED},
        ],
    }
    rows = answer_rows(parse_answer(record), 1, None, None)
    status = judge(
        from_rows(rows["citations"], CITATIONS),
        old_chunks.select(CHUNK_COLUMNS),
        diff,
        new_chunks.select(CHUNK_COLUMNS),
        "v2",
    )
    lost = status.filter(pl.col("status").is_in(["stale", "removed"]))
    status = status.drop("suggested_chunk_id", strict=False).join(
        reanchor(lost, Reanchorer(new_docs, new_chunks)), on="citation_id", how="left"
    )
    status = conform(status, CITATION_STATUS)
    radius = blast_radius(status, [diff.docs], "v2")
    html = render_html(
        status, radius, from_rows(rows["answers"], ANSWERS), from_rows(rows["claims"], CLAIMS), "v2", plots_html
    )
    return status, radius, html


def test_sections_and_counts():
    status, _, html = report(plots_html="<svg id='plot-hook'></svg>")
    positions = [html.index(f'id="{section}"') for section in ("summary", "plots", "blast-radius", "answers")]
    assert positions == sorted(positions)
    assert "<svg id='plot-hook'></svg>" in html
    assert dict(status.group_by("status").len().iter_rows()) == {"drifted": 1, "removed": 2}
    summary = html[html.index('id="summary"') : html.index('id="plots"')]
    for name, count in (("drifted", 1), ("stale", 0), ("removed", 2), ("valid", 0)):
        assert f'<span class="badge {name}">{name}</span> {count}' in summary
    assert "uncited claim" in html
    assert 'id="answer-ans&lt;1&gt;"' in html


def test_document_text_is_escaped_never_executable():
    _, _, html = report()
    assert "<script>" not in html
    assert "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;" in html
    assert "How do I &lt;b&gt;escape&lt;/b&gt;?" in html


def test_internal_only_text_is_redacted_but_locator_kept():
    status, _, html = report()
    secret = status.filter(pl.col("access_scope") == "internal_only").row(0, named=True)
    assert secret["status"] == "removed"
    assert "Tuesday" not in html and "failover password" not in html
    start = html.index(f'id="citation-{secret["citation_id"]}"')
    card = html[start : html.index('<div class="card"', start)]
    assert "runbook.md" in card and secret["chunk_id"] in card and REDACTED in card


def test_word_diff_marks_changed_words_and_reanchor_shown():
    status, _radius, html = report()
    assert re.search(r"<ins>\s?great\s?</ins>", html)
    moved = status.filter(pl.col("quote") == MOVED).row(0, named=True)
    assert moved["suggested_method"] == "exact"
    assert (
        f'suggested re-anchor (exact, score 1.000): <span class="loc">other.md · {moved["suggested_chunk_id"]}' in html
    )
    assert word_diff("a <b> c", "a <x> c") == "a <del>&lt;b&gt;</del><ins>&lt;x&gt;</ins> c"
    table = html[html.index('id="blast-radius"') : html.index('id="answers"')]
    assert re.search(r"<td>1</td><td>public.md</td><td>modified</td>", table)


def test_terminal_summary():
    status, radius, _ = report()
    text = terminal_summary(status, radius, "v2")
    assert "valid 0  relocated 0  drifted 1  stale 0  removed 2  invalid 0" in text
    assert "re-anchored 1 of 2 stale/removed (exact 1)" in text
    assert "1. public.md (modified): 2 citations, 1 answers" in text


def test_cards_show_format_native_locators():
    """Each card says where the old and new chunk sit the way their format does (page, slide, sheet)."""
    old_docs, old_chunks = build_version("v1", OLD, internal=frozenset({"runbook.md"}))
    new_docs, new_chunks = build_version("v2", NEW)
    old_chunks = old_chunks.with_columns(slide_number=pl.lit(2, pl.Int32), ocr=pl.lit(True))
    new_chunks = new_chunks.with_columns(
        sheet_name=pl.lit("Q3"), row_start=pl.lit(5, pl.Int32), row_end=pl.lit(9, pl.Int32)
    )
    diff = diff_frames("v1", "v2", old_docs, new_docs, old_chunks, new_chunks)
    chunk_of = dict(zip(old_chunks["text_hash"], old_chunks["chunk_id"]))
    record = {
        "answer_id": "a",
        "answer": "Carefully [1].",
        "corpus_version": "v1",
        "references": [{"ref": 1, "chunk_id": chunk_of[text_hash(SCRIPT_OLD)], "quote": "care & escape them."}],
    }
    rows = answer_rows(parse_answer(record), 1, None, None)
    status = conform(
        judge(
            from_rows(rows["citations"], CITATIONS),
            old_chunks.select(CHUNK_COLUMNS),
            diff,
            new_chunks.select(CHUNK_COLUMNS),
            "v2",
        ),
        CITATION_STATUS,
    )
    assert status.select("old_locator", "new_locator").row(0) == ("slide 2 · OCR", "sheet Q3 · rows 5–9")
    html = render_html(
        status,
        blast_radius(status, [diff.docs], "v2"),
        from_rows(rows["answers"], ANSWERS),
        from_rows(rows["claims"], CLAIMS),
        "v2",
    )
    assert "public.md · slide 2 · OCR · " in html and "public.md · sheet Q3 · rows 5–9 · " in html
