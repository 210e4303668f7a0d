"""Citation statuses beyond prose (issue #20), each on a real store: a native locator that moves while text and
offsets stay (rows, sheets, slides, pages, a path), repeated paragraphs, lost evidence in verification, and a
status table written without re-anchoring."""

from __future__ import annotations

import json
from pathlib import Path

import openpyxl
import polars as pl
import pptx
import pytest
from fpdf import FPDF

from changes.citation_status import check_citations
from changes.repair import repair_citations
from citekeeper.answers.store import AnswerStore
from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from parsers.records import ParseConfig
from reports.terminal import terminal_summary
from tests.conftest import require_service
from tests.test_formats_ocr import OCR_TOOLS, ocr_installed
from verifiers.verify_store import verify_store

CONFIG = ParseConfig(max_chunk_chars=400, workers=1)
ROWS = [["region", "revenue"], ["north", "120"], ["south", "95"]]


def ingest_tree(store: CorpusStore, src: Path, version: str, config: ParseConfig = CONFIG) -> None:
    result = ingest(src, store, version=version, config=config)
    assert not result.errors, result.errors


def cite_every_chunk(store: CorpusStore, tmp_path: Path, quotes: dict[str, str] | None = None) -> None:
    """One structured answer citing every chunk of v1 (with a quote where `quotes` maps its text to one)."""
    chunks = store.read_chunks("v1", columns=["chunk_id", "text"]).sort("chunk_id")
    claims = [
        {
            "text": f"claim {i}",
            "citations": [{"chunk_id": cid, **({"quote": quotes[t]} if quotes and t in quotes else {})}],
        }
        for i, (cid, t) in enumerate(chunks.iter_rows())
    ]
    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps({"answer_id": "a1", "answer": "...", "corpus_version": "v1", "claims": claims}) + "\n")
    assert AnswerStore(store.root).add(path).n_registered == 1


def statuses(store: CorpusStore) -> pl.DataFrame:
    return check_citations(store, "v2").read_status()


def judged_after(tmp_path: Path, name: str, save, before: dict, after: dict) -> dict:
    """The status row of the one citation of file `name` written by save(path, **before), then by
    save(path, **after)."""
    store, src = CorpusStore(tmp_path / "store"), tmp_path / "src"
    src.mkdir()
    save(src / name, **before)
    ingest_tree(store, src, "v1")
    cite_every_chunk(store, tmp_path)
    save(src / name, **after)
    ingest_tree(store, src, "v2")
    return statuses(store).row(0, named=True)


def save_sheet(path: Path, title: str = "Budget", blank_rows: int = 0) -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = title
    for _ in range(blank_rows):
        sheet.append([])
    for row in ROWS:
        sheet.append(row)
    book.save(path)


@pytest.mark.parametrize(
    "edit, new_locator",
    [({"blank_rows": 2}, "sheet Budget · rows 3–5"), ({"title": "预算"}, "sheet 预算 · rows 1–3")],
    ids=["blank-rows-above", "sheet-renamed"],
)
def test_a_sheet_whose_rows_or_name_change_is_relocated_with_its_new_locator(tmp_path, edit, new_locator):
    row = judged_after(tmp_path, "budget.xlsx", save_sheet, {}, edit)
    assert (row["status"], row["old_locator"], row["new_locator"]) == (
        "relocated",
        "sheet Budget · rows 1–3",
        new_locator,
    )


def save_deck(path: Path, blank_first: bool) -> None:
    deck = pptx.Presentation()
    if blank_first:
        deck.slides.add_slide(deck.slide_layouts[6])
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Release checklist for the quarterly rollout of the client"
    deck.save(path)


def test_a_blank_slide_inserted_before_relocates_to_the_next_slide(tmp_path):
    row = judged_after(tmp_path, "deck.pptx", save_deck, {"blank_first": False}, {"blank_first": True})
    assert (row["status"], row["old_locator"], row["new_locator"]) == ("relocated", "slide 1", "slide 2")


def save_pdf(path: Path, blank_first: bool) -> None:
    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    if blank_first:
        pdf.add_page()
    pdf.add_page()
    pdf.multi_cell(0, 8, "Backups run every night at two and are kept for thirty days.")
    pdf.output(str(path))


def test_a_blank_page_inserted_before_relocates_to_the_next_page(tmp_path):
    require_service(ocr_installed(), OCR_TOOLS)  # a page without a text layer is rendered and OCR'd
    row = judged_after(tmp_path, "ops.pdf", save_pdf, {"blank_first": False}, {"blank_first": True})
    assert (row["status"], row["old_locator"], row["new_locator"]) == ("relocated", "page 1", "page 2")


def test_a_document_with_an_explicit_doc_id_moved_to_a_new_path_is_relocated(tmp_path):
    store, src = CorpusStore(tmp_path / "store"), tmp_path / "src"
    (src / "drafts").mkdir(parents=True)
    text = "Timeouts default to five seconds for every request the client sends."
    (src / "drafts" / "timeouts.md").write_text(text)
    (src / "drafts" / "timeouts.md.citekeeper.json").write_text('{"doc_id": "timeouts"}')
    ingest_tree(store, src, "v1")
    cite_every_chunk(store, tmp_path)
    (src / "guide").mkdir()
    for name in ("timeouts.md", "timeouts.md.citekeeper.json"):
        (src / "drafts" / name).rename(src / "guide" / name)
    ingest_tree(store, src, "v2")
    row = statuses(store).row(0, named=True)
    assert (row["status"], row["source_path"], row["new_source_path"]) == (
        "relocated",
        "drafts/timeouts.md",
        "guide/timeouts.md",
    )
    assert row["new_chunk_id"] == row["chunk_id"]


REPEATED = "Restart the service after every configuration change to apply it."
OTHER = "The configuration lives in one file under the etc directory of the host."


def test_the_surviving_copy_of_a_repeated_paragraph_keeps_its_citation(tmp_path):
    store, src = CorpusStore(tmp_path / "store"), tmp_path / "src"
    src.mkdir()
    (src / "ops.md").write_text(f"{REPEATED}\n\n{OTHER}\n\n{REPEATED}\n")
    ingest_tree(store, src, "v1", ParseConfig(max_chunk_chars=80, workers=1))  # a chunk per paragraph
    chunks = store.read_chunks("v1", columns=["chunk_id", "text", "start_char"]).sort("start_char")
    first, _, second = chunks["chunk_id"]
    cite_every_chunk(store, tmp_path)
    (src / "ops.md").write_text(f"{OTHER}\n\n{REPEATED}\n")  # the first copy goes
    ingest_tree(store, src, "v2", ParseConfig(max_chunk_chars=80, workers=1))
    survivor = store.read_chunks("v2", columns=["chunk_id", "text", "start_char"]).filter(pl.col("text") == REPEATED)
    by_chunk = {r["chunk_id"]: r for r in statuses(store).iter_rows(named=True)}
    assert by_chunk[second]["status"] == "relocated" and by_chunk[second]["new_chunk_id"] == survivor["chunk_id"].item()
    assert by_chunk[first]["status"] == "removed"
    assert (
        by_chunk[first]["suggested_method"] == "exact"
        and by_chunk[first]["suggested_chunk_id"] == survivor["chunk_id"].item()
    )


EDITED_OLD = "Redirects are followed by default for every request the client sends."
EDITED_NEW = "Redirects are never followed unless a request asks for them explicitly."
CLAIM = "Redirects are followed by default for each request."


@pytest.fixture
def lost_citation(tmp_path) -> CorpusStore:
    """A store whose one citation quotes a sentence that v2 rewrote (stale); the claim says what it said."""
    store, src = CorpusStore(tmp_path / "store"), tmp_path / "src"
    src.mkdir()
    (src / "http.md").write_text(f"{OTHER} {EDITED_OLD}\n")
    ingest_tree(store, src, "v1")
    chunk_id = store.read_chunks("v1", columns=["chunk_id"])["chunk_id"].item()
    record = {
        "answer_id": "a1",
        "answer": "...",
        "corpus_version": "v1",
        "claims": [{"text": CLAIM, "citations": [{"chunk_id": chunk_id, "quote": EDITED_OLD}]}],
    }
    (tmp_path / "answers.jsonl").write_text(json.dumps(record) + "\n")
    AnswerStore(store.root).add(tmp_path / "answers.jsonl")
    # The rewritten sentence stays close enough for re-anchoring to suggest it, lexically entailing nothing.
    (src / "http.md").write_text(f"{OTHER} {EDITED_NEW}\n\n{EDITED_OLD.replace('every', 'each')}\n")
    ingest_tree(store, src, "v2")
    return store


def test_lost_evidence_never_supports_its_claim(lost_citation, tmp_path):
    """The suggestion (here the same sentence with one word changed, which the lexical tier would entail) is a
    proposal for repair, not evidence: the claim is unsupported until the repair is applied."""
    store = lost_citation
    row = statuses(store).row(0, named=True)
    assert row["status"] == "stale" and row["suggested_chunk_id"] is not None
    run, _ = verify_store(store.root, tmp_path / "out", version="v2", scorer=None)
    claim = run.claims.row(0, named=True)
    assert claim["status"] == "unsupported" and "stale" in claim["reason"], claim
    repair_citations(store, "v2", min_score=0.8, apply=True)
    check_citations(store, "v2")
    run, _ = verify_store(store.root, tmp_path / "out2", version="v2", scorer=None)
    assert run.claims.row(0, named=True)["status"] == "supported"


def test_a_status_table_without_re_anchoring_says_so_and_repair_re_anchors(lost_citation):
    store = lost_citation
    check = check_citations(store, "v2", suggest=False)
    row = check.read_status().row(0, named=True)
    assert row["status"] == "stale" and row["reanchored"] is False and row["suggested_chunk_id"] is None
    assert "not searched: stale --no-reanchor" in terminal_summary(check.outline, check.blast_radius, "v2")
    repair = repair_citations(store, "v2", min_score=0.8)
    assert repair.repairs["repair"].to_list() == ["repointed_suggestion"]
    assert check_citations(store, "v2").read_status()["reanchored"].to_list() == [True]
