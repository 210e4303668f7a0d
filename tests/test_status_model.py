"""Model-based test of the whole citation-status logic (issue #20).

Hypothesis draws small corpora (1-3 documents: Markdown with repeated paragraphs, a workbook, a multi-page PDF,
a deck; English and Chinese), citations of them in both answer forms (with and without quotes), citations by
document that registration cannot anchor (a document v1 lacks, a quote in none of its text), and a random
edit script (insert, delete, move, duplicate and edit paragraphs; blank rows, pages and slides; renamed sheets;
moved files, with and without an explicit doc_id; a document's access_groups set or cleared), answers with and
without an audience, documents open to every audience or to some access groups. The product ingests both
versions, registers the answers and judges every citation against v2; the oracle (tests/status_model.py, which
imports nothing of the product) says from the script alone what every status row must hold: status, old and new
locator (chunk, offsets, native-locator line, source path) and, for stale and removed citations, the
re-anchoring span when the evidence is still verbatim somewhere; an edited citation whose evidence left its chunk
but stands verbatim elsewhere is relocated there (and repair re-points it there); an unanchored citation is
invalid, "not anchored at registration"; a citation of a document closed to its answer's audience (in v1, in v2,
or the one its paragraph moved into) is out_of_scope, its reason naming the document, its groups and the
audience, and never repaired; a lost citation is never re-anchored into a document closed to its audience. Then
`repair --apply` runs; every unanchored citation must be in its answer's current revision as it was given.

Knobs (environment):
  CITEKEEPER_STATUS_MODEL_EXAMPLES=N  examples to run (default 200; e.g. 20 while developing)
  CITEKEEPER_STATUS_MODEL_SHRINK=...  how a failing example is made small before it is reported: `model` (default:
                                      the model's own reductions: one citation, fewer operations, documents and
                                      paragraphs, as long as it fails the same way; about a minute), `hypothesis`
                                      (hypothesis' shrinker first, up to 5 more minutes, then the model's) or `0`
                                      (as drawn)
  CITEKEEPER_STATUS_MODEL_SURVEY=1    run every example, collect every mismatch, then fail once with a summary
                                      of each kind of mismatch and its smallest example (no shrinking)
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, fields
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, Phase, event, given, settings

from changes.citation_status import check_citations
from changes.repair import repair_citations
from citekeeper.answers.store import AnswerStore
from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from parsers.records import ParseConfig
from tests.status_model import (
    MAX_CHUNK_CHARS,
    NOT_ANCHORED,
    Corpus,
    DocCite,
    EditScript,
    Expected,
    answer_record,
    edit_scripts,
    expected_rows,
    named_document,
    quote_text,
    reductions,
    scenarios,
    write_corpus,
)

EXAMPLES = int(os.environ.get("CITEKEEPER_STATUS_MODEL_EXAMPLES", "200"))
SHRINK = os.environ.get("CITEKEEPER_STATUS_MODEL_SHRINK", "model")  # model | hypothesis | 0
MINIMISE_RUNS = 80  # product runs the model's reductions may take
SURVEY = os.environ.get("CITEKEEPER_STATUS_MODEL_SURVEY", "0") == "1"

# Serial parse (no process pool); small chunks, so every paragraph of the model is exactly one chunk; English OCR
# only (a blank PDF page is OCR'd and must come out empty).
CONFIG = ParseConfig(max_chunk_chars=MAX_CHUNK_CHARS, workers=1, ocr_languages=("eng",))
NATIVE = ["page_start", "page_end", "slide_number", "sheet_name", "row_start", "row_end"]
COMPARED = [  # the status row's columns the oracle predicts, as they are named in CITATION_STATUS
    "status",
    "doc_id",
    "source_path",
    "old_start_char",
    "old_end_char",
    "old_locator",
    "new_doc_id",
    "new_start_char",
    "new_end_char",
    "new_locator",
    "new_source_path",
    "new_text",
]
KIND = {  # how a mismatching column is reported
    **dict.fromkeys(
        ["doc_id", "source_path", "old_locator", "new_doc_id", "new_chunk_id", "new_locator", "new_source_path"],
        "locator",
    ),
    **dict.fromkeys(["old_start_char", "old_end_char", "new_start_char", "new_end_char"], "span"),
    "status": "status",
    "new_text": "text",
    "suggestion": "suggestion",
    "reason": "reason",
    "repair": "repair",
}


class ModelAssumptionBroken(AssertionError):
    """The parser did not turn the model's documents into the model's chunks: the test itself must change."""


# ---------------------------------------------------------------------------------------------------- product


def ingest_version(store: CorpusStore, corpus: Corpus, root: Path, version: str) -> str:
    """Write and ingest `corpus`; check it parsed into exactly the model's text and chunks. Returns the version
    the tree is (an unchanged tree makes no new version: the one it equals)."""
    write_corpus(corpus, root)
    result = ingest(root, store, version=version, config=CONFIG)
    if result.errors:
        raise ModelAssumptionBroken(
            f"{version}: quarantined {[(e.source_path, e.error_type, e.reason) for e in result.errors]}"
        )
    name = result.manifest.name
    check_model(store, name, corpus)
    return name


def check_model(store: CorpusStore, version: str, corpus: Corpus) -> None:
    docs = {
        row["doc_id"]: row
        for row in store.read_documents(version, columns=["doc_id", "text", "source_path"]).iter_rows(named=True)
    }
    chunks = store.read_chunks(
        version, columns=["doc_id", "text", "start_char", "end_char", "source_path", "element_types", *NATIVE]
    )
    wrong = []
    if set(docs) != {d.doc_id for d in corpus}:
        wrong.append(f"documents {sorted(docs)}, model {sorted(d.doc_id for d in corpus)}")
    for doc in corpus:
        row = docs.get(doc.doc_id)
        if row is None:
            continue
        if row["text"] != doc.text or row["source_path"] != doc.path:
            wrong.append(
                f"{doc.doc_id}: text/path {row['source_path']!r} {row['text']!r}\n   model {doc.path!r} {doc.text!r}"
            )
        mine = chunks.filter(pl.col("doc_id") == doc.doc_id).sort("start_char").to_dicts()
        if len(mine) != len(doc.placed):
            wrong.append(
                f"{doc.doc_id}: {len(mine)} chunks for {len(doc.placed)} paragraphs (one chunk per paragraph broken)"
            )
            continue
        for chunk, placed in zip(mine, doc.placed):
            got = (chunk["text"], chunk["start_char"], chunk["end_char"], {k: chunk[k] for k in NATIVE})
            want = (placed.para.text, placed.start, placed.end, placed.native)
            if got != want or "Title" in (chunk["element_types"] or []):
                wrong.append(f"{doc.doc_id}: chunk {got} {chunk['element_types']}\n   model {want}")
    if wrong:
        raise ModelAssumptionBroken(f"{version} does not parse as modelled:\n" + "\n".join(wrong))


def chunk_table(store: CorpusStore, version: str) -> dict[tuple[str, int], str]:
    """(doc_id, start_char) -> chunk_id: the model names chunks by where their paragraph starts."""
    chunks = store.read_chunks(version, columns=["chunk_id", "doc_id", "start_char"])
    return {(d, s): c for c, d, s in chunks.iter_rows()}


@dataclass(frozen=True)
class ProductRun:
    chunk_ids: dict  # uid -> v1 chunk_id of every v1 paragraph
    new_chunks: dict  # v2 chunk table (chunk_table)
    status: list[dict]  # the status rows against v2
    repairs: list[dict]  # what `repair --apply` decided, one row per citation (REPAIRS)
    repaired: list[dict]  # the current revisions' citation rows after `repair --apply` against v2


def run_product(script: EditScript, tmp: Path) -> ProductRun:
    """Ingest v1, register the answers, ingest v2, judge, repair (what `repair --apply` runs)."""
    store = CorpusStore(tmp / "store", docs_per_part=1)  # v2's commit rewrites the export parts of what changed
    v1 = ingest_version(store, script.old, tmp / "v1", "v1")
    old_chunks = chunk_table(store, v1)
    chunk_ids = {p.para.uid: old_chunks[(doc.doc_id, p.start)] for doc in script.old for p in doc.placed}
    path = tmp / "answers.jsonl"
    path.write_text(
        "".join(
            json.dumps(answer_record(a, script.old, chunk_ids, v1), ensure_ascii=False) + "\n" for a in script.answers
        )
    )
    added = AnswerStore(store.root).add(path)
    missing = [c for _, c in script.cites if isinstance(c, DocCite) and named_document(script.old, c) is None]
    assert not added.errors and added.n_registered == len(script.answers), added.summary()
    assert len(added.unanchored) == len(missing), (added.unanchored, missing)  # each reported, none refused
    v2 = ingest_version(store, script.new, tmp / "v2", "v2")
    for table, read in (("chunks", store.read_chunks), ("documents", store.read_documents)):
        assert store.read_export(table, v2).equals(read(v2)), table  # check_model held the LanceDB rows to the model
    status = check_citations(store, v2).read_status().to_dicts()
    repairs = repair_citations(store, v2, apply=True).repairs.to_dicts()
    repaired = AnswerStore(store.root).snapshot().citations().to_dicts()
    return ProductRun(chunk_ids, chunk_table(store, v2), status, repairs, repaired)


# ---------------------------------------------------------------------------------------------------- compare


def compare(script: EditScript, run: ProductRun) -> list[dict]:
    """One entry per citation whose row differs from the oracle's: key, expected, actual row, differing columns."""
    expected = expected_rows(script)
    chunk_ids, new_chunks, status = run.chunk_ids, run.new_chunks, run.status
    actual = {(r["answer_id"], r["chunk_id"], r["quote"]): r for r in status}
    repairs = {r["citation_id"]: r for r in run.repairs}
    out = []
    if len(status) != len(expected):
        out.append(
            {
                "key": "*",
                "expected": f"{len(expected)} rows",
                "actual": f"{len(status)} rows",
                "diff": {"rows": (len(expected), len(status))},
            }
        )
    for (answer_id, uid, quote), want in expected.items():
        row = actual.get((answer_id, chunk_ids.get(uid), quote))  # an unanchored citation has no chunk
        if row is None:
            out.append(
                {"key": (answer_id, uid, quote), "expected": want, "actual": None, "diff": {"row": ("a row", None)}}
            )
            continue
        diffs = [
            row_diff(option, row, new_chunks, repairs.get(row["citation_id"])) for option in (want, *want.alternatives)
        ]
        if all(diffs):  # none of the places it may stand at: reported against the first
            out.append({"key": (answer_id, uid, quote), "expected": want, "actual": row, "diff": diffs[0]})
    return out + repair_mismatches(script, run.repaired)


def row_diff(want: Expected, row: dict, new_chunks: dict, repair: dict | None) -> dict:
    """The columns of the status row (and of its repair, where the oracle says one) that differ from `want`."""
    diff = {name: (getattr(want, name), row[name]) for name in COMPARED if getattr(want, name) != row[name]}
    want_chunk = None if want.new_chunk is None else new_chunks.get(want.new_chunk)
    if want_chunk != row["new_chunk_id"]:
        diff["new_chunk_id"] = (want_chunk, row["new_chunk_id"])
    problem = suggestion_problem(want, row, new_chunks)
    if problem:
        diff["suggestion"] = problem
    if want.unanchored_name is not None and not unanchored_reason(row["reason"], want.unanchored_name):
        diff["reason"] = (f"{NOT_ANCHORED}: ... {want.unanchored_name!r} ...", row["reason"])
    if any(name not in row["reason"] for name in want.reason_names):
        diff["reason"] = (f"... {' ... '.join(want.reason_names)} ...", row["reason"])
    if want.status == "relocated" and want.suggestions and (place := found_at(want)) not in row["reason"]:
        diff["reason"] = (f"... evidence found verbatim (exact) at {place}", row["reason"])
    if want.repair is not None:
        got = (
            None
            if repair is None
            else (repair["repair"], repair["new_chunk_id"], repair["new_start_char"], repair["new_end_char"])
        )
        if got != (wanted := (want.repair, want_chunk, want.new_start_char, want.new_end_char)):
            diff["repair"] = (wanted, got)
    return diff


def found_at(want: Expected) -> str:
    """Where a row relocated to a verbatim place says the evidence now stands."""
    return f"{want.new_source_path} chars {want.new_start_char}–{want.new_end_char}"


def unanchored_reason(reason: str, name: str) -> bool:
    return reason.startswith(NOT_ANCHORED) and name in reason


def repair_mismatches(script: EditScript, repaired: list[dict]) -> list[dict]:
    """Repair never repairs an invalid citation: each unanchored one is in its answer's current revision as given
    (its quote, the document it names, its version v1), still unanchored."""
    out = []
    for answer, cite in script.cites:
        if not isinstance(cite, DocCite):
            continue
        rows = [
            r
            for r in repaired
            if r["answer_id"] == answer.answer_id and r["chunk_id"] is None and r["quote"] == cite.quote
        ]
        got = [(r["anchored_by"], r[f"cited_{cite.by}"], r["corpus_version"]) for r in rows]
        want = [("unanchored", cite.name, "v1")]
        if got != want:
            key = (answer.answer_id, cite.uid, cite.quote)
            out.append(
                {"key": key, "expected": expected_rows(script)[key], "actual": rows, "diff": {"repair": (want, got)}}
            )
    return out


def suggestion_problem(want: Expected, row: dict, new_chunks: dict) -> tuple | None:
    """Stale and removed citations whose evidence is verbatim somewhere, and citations relocated to where it was
    found verbatim, get that place (method exact); the others get no exact or normalized suggestion; the other
    valid, relocated and drifted citations get none."""
    got = (row["suggested_method"], row["suggested_start_char"], row["suggested_end_char"], row["suggested_chunk_id"])
    if want.status not in ("stale", "removed") and not want.suggestions:
        return None if row["suggested_method"] is None else ("no suggestion", got)
    if not want.suggestions:
        return None if row["suggested_method"] not in ("exact", "normalized") else ("no verbatim place exists", got)
    places = {("exact", start, end, new_chunks.get(chunk)) for _, start, end, chunk in want.suggestions}
    return None if got in places else (sorted(places, key=str), got)


def signature(mismatch: dict) -> str:
    """The kind of a mismatch, e.g. "status relocated->valid" or "locator new_locator (relocated)"."""
    diff = mismatch["diff"]
    if "status" in diff:
        return f"status {diff['status'][0]}->{diff['status'][1]}"
    want = mismatch["expected"]
    status = want.status if isinstance(want, Expected) else "?"
    return " + ".join(f"{KIND.get(name, name)} {name}" for name in sorted(diff)) + f" ({status})"


def report(script: EditScript, mismatches: list[dict]) -> str:
    lines = [f"{len(mismatches)} citation(s) differ from the model", repr(script), "documents (canonical text):"]
    for version, corpus in (("v1", script.old), ("v2", script.new)):
        lines += [f"  {version} {doc.doc_id} ({doc.path}): {doc.text!r}" for doc in corpus]
    for m in mismatches:
        lines.append(f"\ncitation {m['key']}: {signature(m)}")
        want, row = m["expected"], m["actual"]
        if isinstance(want, Expected):
            lines.append(f"  model:   {want.reason}")
        if isinstance(row, dict):
            lines.append(f"  product: {row.get('reason')}")
        for name, (expected, actual) in m["diff"].items():
            lines.append(f"  {name}:\n    expected {expected!r}\n    actual   {actual!r}")
        if isinstance(want, Expected) and isinstance(row, dict):  # a status row (a repair mismatch: citation rows)
            lines.append(
                "  expected row: "
                + ", ".join(
                    f"{f.name}={getattr(want, f.name)!r}"
                    for f in fields(want)
                    if f.name not in ("new_text", "reason", "alternatives")
                )
            )
            lines += [f"    or at: {found_at(other)}" for other in want.alternatives]
            lines.append(
                "  actual row:   "
                + ", ".join(
                    f"{k}={row[k]!r}"
                    for k in [
                        *COMPARED,
                        "new_chunk_id",
                        "suggested_method",
                        "suggested_start_char",
                        "suggested_end_char",
                        "suggested_chunk_id",
                    ]
                    if k != "new_text"
                )
            )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- the tests


def mismatches_of(script: EditScript) -> list[dict]:
    """Run the product on `script` and compare every status row, and what repair kept, with the oracle's."""
    with tempfile.TemporaryDirectory(prefix="status-model-") as tmp:
        run = run_product(script, Path(tmp))
    return compare(script, run)


def minimise(script: EditScript, mismatches: list[dict]) -> tuple[EditScript, list[dict]]:
    """The smallest script the model's reductions reach that still fails as the first mismatch does."""
    mismatches = [m for m in mismatches if isinstance(m["key"], tuple)] or mismatches
    if not isinstance(mismatches[0]["key"], tuple):  # a missing or extra row: nothing to follow
        return script, mismatches
    want, runs = signature(mismatches[0]), 0

    def kept(found: list[dict]) -> list:
        answer_id, uid, quote = found[0]["key"]
        return [
            (
                answer_id,
                next(
                    c
                    for a, c in script.cites
                    if a.answer_id == answer_id and c.uid == uid and quote_text(script.old, c) == quote
                ),
            )
        ]

    improved = True
    while improved and runs < MINIMISE_RUNS:
        improved = False
        for candidate in reductions(script, kept(mismatches)):
            if candidate is None:
                continue
            runs += 1
            try:
                found = [m for m in mismatches_of(candidate) if signature(m) == want]
            except ModelAssumptionBroken:
                found = []
            if found:
                script, mismatches, improved = candidate, found, True
                break
            if runs >= MINIMISE_RUNS:
                break
    return script, mismatches


SCENARIOS = scenarios()


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(name):
    """The situations issue #20 names, written out, so each runs whatever hypothesis draws."""
    script = SCENARIOS[name]
    mismatches = mismatches_of(script)
    assert not mismatches, f"{name}\n" + report(script, mismatches)


SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # the same examples on every run (CI is reproducible)
    database=None,
    print_blob=False,
    phases=[Phase.explicit, Phase.generate, *([Phase.shrink] if SHRINK == "hypothesis" and not SURVEY else [])],
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.large_base_example,
    ],
)


def test_citation_statuses_follow_the_model():
    started, examples = time.perf_counter(), [0]
    survey: dict[str, list] = defaultdict(list)  # signature -> [(size, report)]
    failed: list = []  # the last failing (script, mismatches): hypothesis replays the one it reports last

    @SETTINGS
    @given(script=edit_scripts())
    def check(script: EditScript) -> None:
        examples[0] += 1
        for op in script.ops:  # shown by --hypothesis-show-statistics
            event(f"op {type(op).__name__}")
        for want in expected_rows(script).values():
            event(f"expected {want.status}" + (", to where its evidence was found verbatim" if want.repair else ""))
        mismatches = mismatches_of(script)
        if not mismatches:
            return
        if SURVEY:
            for m in mismatches:
                survey[signature(m)].append((len(repr(script)), report(script, [m])))
            return
        failed[:] = [script, mismatches]
        raise AssertionError(report(script, mismatches))

    try:
        check()
    except AssertionError as drawn:
        if not failed or SHRINK == "0":
            raise
        script, mismatches = minimise(*failed)
        notes = "\n".join(getattr(drawn, "__notes__", []))
        raise AssertionError(
            f"{report(script, mismatches)}\n\n(reduced by the model from hypothesis' example: {notes}\n{drawn})"
        ) from None
    elapsed = time.perf_counter() - started
    print(f"\nstatus model: {examples[0]} examples in {elapsed:.1f} s")
    if survey:
        summary = [
            f"{sum(len(v) for v in survey.values())} mismatching citations in {examples[0]} examples ({elapsed:.0f} s):"
        ]
        summary += [f"  {len(v):4d}  {kind}" for kind, v in sorted(survey.items(), key=lambda kv: -len(kv[1]))]
        for kind, found in sorted(survey.items(), key=lambda kv: -len(kv[1])):
            summary.append(f"\n======== {kind}: smallest of {len(found)}\n{min(found, key=lambda f: f[0])[1]}")
        raise AssertionError("\n".join(summary))
