"""The stale-citation report: one self-contained HTML page.

Sections in order: summary, plots, blast radius, evidence cards per answer (word diff, re-anchoring, repair)
and, from a store, history. All document text is escaped; what a row's visibility level withholds is replaced by
a note (citekeeper.scope): a redacted source shows "title — source_url — summary", an aggregate_only one its status
alone, counted, never named.
"""

from __future__ import annotations

import difflib
import re
from datetime import UTC, datetime
from html import escape
from pathlib import Path

import polars as pl

from changes.statuses import COLORS, LOST, NAMES, NEVER_REPAIRED, STATUSES
from citekeeper.files import atomic_write_text
from citekeeper.outputs import REPORT_MARKER
from citekeeper.scope import AGGREGATE_ONLY, is_withheld, redact_status, strictest
from reports.history import history_section
from reports.plots import report_plots
from reports.terminal import in_words, source_line, unsearched_clause

STATUS_ORDER = {s: i for i, s in enumerate(reversed(NAMES))}  # worst first
WORD = re.compile(r"\s+|\S+")

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#1f2328;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.2rem;border-bottom:1px solid #d0d7de;padding-bottom:.3rem}
table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:.25rem .6rem;text-align:left}
.badge{display:inline-block;border-radius:1em;padding:0 .6em;font-weight:600;color:#fff}
.answer{border:1px solid #d0d7de;border-radius:6px;padding:.5rem 1rem;margin:1rem 0}
.card{border-left:4px solid #d0d7de;margin:.6rem 0;padding:.3rem .8rem;background:#f6f8fa}
.text{white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:12px;background:#fff;padding:.4rem;\
border:1px solid #eaeef2}
del{background:#ffebe9;text-decoration:line-through}ins{background:#dafbe1;text-decoration:none}
.redacted{color:#6e7781;font-style:italic}.loc{color:#57606a;font-size:12px}.source{color:#57606a}
.updated{background:#fff8c5;border:1px solid #d4a72c;border-radius:1em;padding:0 .5em;font-size:12px}
""" + "".join(f".{status}{{background:{color}}}" for status, color in COLORS.items())


def _text(value: str | None) -> str:
    """Escaped text; what citekeeper.scope withheld is shown as withheld."""
    if value is None:
        return ""
    if is_withheld(value):
        return f'<span class="redacted">{escape(value)}</span>'
    return escape(value)


def word_diff(old: str, new: str) -> str:
    """Escaped HTML of `new` against `old` with deleted words in <del> and inserted words in <ins>."""
    a, b = WORD.findall(old), WORD.findall(new)
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(escape("".join(a[i1:i2])))
            continue
        if i2 > i1:
            out.append(f"<del>{escape(''.join(a[i1:i2]))}</del>")
        if j2 > j1:
            out.append(f"<ins>{escape(''.join(b[j1:j2]))}</ins>")
    return "".join(out)


def _locator(source_path, chunk_id, start, end, native: str | None = None) -> str:
    if chunk_id is None:
        return "—"
    where = f"{source_path or '?'} · {native} · " if native else f"{source_path or '?'} · "
    return escape(f"{where}{chunk_id} · chars {start}–{end}")


def _card(row: dict) -> str:
    status = row["status"]
    badge = f'<span class="badge {escape(status)}">{escape(status)}</span>'
    head = f'<div class="card" id="citation-{escape(row["citation_id"])}"><p>{badge} '
    if strictest(s for s in (row["access_scope"], row["new_access_scope"]) if s is not None) == AGGREGATE_ONLY:
        return f"{head}{_text(row['reason'])}</p></div>"  # counted, never named
    updated = ' <span class="updated">updated after retrieval</span>' if row.get("updated_after_retrieval") else ""
    source = source_line(row)
    old = _locator(row["source_path"], row["chunk_id"], row["old_start_char"], row["old_end_char"], row["old_locator"])
    new = _locator(
        row["new_source_path"], row["new_chunk_id"], row["new_start_char"], row["new_end_char"], row["new_locator"]
    )
    parts = [
        f"{head}{_text(row['reason'])}{updated}</p>",
        *([f'<p class="source">{escape(source)}</p>'] if source else []),
        f'<p class="loc">old: {old} ({escape(row["cited_version"])})<br>new: {new}'
        + (f" · similarity {row['similarity']:.3f}" if row["similarity"] is not None else "")
        + "</p>",
    ]
    if row["quote"] is not None:
        parts.append(f"<p>quote: <q>{_text(row['quote'])}</q></p>")
    if row["old_text"] is not None:
        parts.append(f'<div>old text</div><div class="text">{_text(row["old_text"])}</div>')
    if row["new_text"] is not None:
        changed = row["old_text"] is not None and row["new_text"] != row["old_text"]
        body = word_diff(row["old_text"], row["new_text"]) if changed else _text(row["new_text"])
        parts.append(f'<div>new text{" (word diff)" if changed else ""}</div><div class="text">{body}</div>')
    if row["suggested_chunk_id"] is not None:
        suggested = _locator(
            row["suggested_source_path"],
            row["suggested_chunk_id"],
            row["suggested_start_char"],
            row["suggested_end_char"],
        )
        parts.append(
            f"<p>suggested re-anchor ({escape(row['suggested_method'])}, score {row['suggested_score']:.3f}): "
            f'<span class="loc">{suggested}</span></p>'
            f'<div class="text">{_text(row["suggested_text"])}</div>'
        )
    elif row.get("reanchored") is False:
        parts.append("<p>not re-anchored (stale --no-reanchor); citekeeper repair re-anchors it</p>")
    elif status in LOST:
        parts.append("<p>no re-anchoring suggestion found</p>")
    if row.get("repair") not in (None, "kept"):
        parts.append(_repair_line(row))
    parts.append("</div>")
    return "".join(parts)


def _repair_line(row: dict) -> str:
    if row["repair"] in ("unresolved", *NEVER_REPAIRED):
        when = "none possible"
    elif row["repaired_in"] is not None:
        when = f"made: revision {row['repaired_in']}"
    else:
        when = "would be made by citekeeper repair"
    review = " · needs review" if row["needs_review"] else ""
    where = f' → <span class="loc">{escape(row["repair_locator"])}</span>' if row["repair_locator"] else ""
    return (
        f'<p class="repair">repair ({escape(when)}): <b>{escape(row["repair"])}</b>{review}{where}'
        f"<br>{escape(row['repair_reason'])}</p>"
    )


def _summary(status: pl.DataFrame) -> str:
    counts = dict(status.group_by("status").len().iter_rows())
    cells = "".join(
        f'<td title="{escape(s.meaning)}"><span class="badge {s.name}">{s.name}</span> {counts.get(s.name, 0)}</td>'
        for s in STATUSES
    )
    reanchored = status.filter(pl.col("suggested_chunk_id").is_not_null()).height
    lost = status.filter(pl.col("status").is_in(LOST)).height
    return (
        '<section id="summary"><h2>Summary</h2>'
        f"<p>{status.height} citations in {status['answer_id'].n_unique()} answers; "
        f"{reanchored} of {lost} {in_words(LOST)} citations have a re-anchoring suggestion"
        f"{unsearched_clause(status)}.</p>"
        f"<table><tr>{cells}</tr></table></section>"
    )


def _blast_table(blast_radius: pl.DataFrame) -> str:
    columns = ("rank", "document", "change", "answers", "claims", "citations", "citations on it")
    head = "<tr>" + "".join(f"<th>{c}</th>" for c in columns) + "</tr>"
    rows = "".join(
        f"<tr><td>{r['rank']}</td><td>{escape(r['source_path'] or r['doc_id'])}</td><td>{escape(r['change'])}</td>"
        + "".join(f"<td>{r[c]}</td>" for c in ("n_answers", "n_claims", "n_citations", "n_citations_total"))
        + "</tr>"
        for r in blast_radius.sort("rank").iter_rows(named=True)
    )
    return (
        '<section id="blast-radius"><h2>Blast radius</h2>'
        "<p>Changed documents ranked by the citations on them that no longer hold as they were.</p>"
        f"<table>{head}{rows}</table></section>"
    )


def _answers(status: pl.DataFrame, answers: pl.DataFrame, claims: pl.DataFrame) -> str:
    worst = status.group_by("answer_id").agg(
        pl.col("status").replace_strict(STATUS_ORDER, return_dtype=pl.Int32).min().alias("_worst")
    )
    order = answers.join(worst, on="answer_id", how="left").sort(["_worst", "answer_id"], nulls_last=True)
    cards = {k[0]: g.sort("citation_id") for k, g in status.partition_by("claim_id", as_dict=True).items()}
    out = ['<section id="answers"><h2>Answers</h2>']
    for answer in order.iter_rows(named=True):
        out.append(
            f'<article class="answer" id="answer-{escape(answer["answer_id"])}">'
            f'<h3>{escape(answer["answer_id"])} <span class="loc">revision {answer["revision"]}, '
            f"cites {escape(answer['corpus_version'])}</span></h3>"
            f"<p><b>Q:</b> {escape(answer['question'] or '')}</p><p><b>A:</b> {escape(answer['answer'])}</p>"
        )
        for claim in (
            claims.filter(pl.col("answer_id") == answer["answer_id"]).sort("claim_index").iter_rows(named=True)
        ):
            out.append(f"<h4>claim: {escape(claim['text'])}</h4>")
            if claim["status"] == "uncited":
                out.append('<p class="loc">uncited claim: no citation supports it</p>')
            for row in cards.get(claim["claim_id"], pl.DataFrame()).iter_rows(named=True):
                out.append(_card(row))
        out.append("</article>")
    out.append("</section>")
    return "".join(out)


def render_html(
    status: pl.DataFrame,
    blast_radius: pl.DataFrame,
    answers: pl.DataFrame,
    claims: pl.DataFrame,
    target_version: str,
    plots_html: str = "",
    history_html: str = "",
) -> str:
    """The whole report as one self-contained HTML string (no external assets); internal_only text withheld."""
    status = redact_status(status)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    plots = f'<section id="plots"><h2>Plots</h2>{plots_html}</section>' if plots_html else ""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">{REPORT_MARKER}'
        f"<title>citekeeper: citations against {escape(target_version)}</title><style>{STYLE}</style></head><body>"
        f'<h1>Citations against corpus version {escape(target_version)}</h1><p class="loc">generated {generated}</p>'
        f"{_summary(status)}{plots}{_blast_table(blast_radius)}{_answers(status, answers, claims)}{history_html}"
        "</body></html>"
    )


def write_html(path: Path, *args, **kwargs) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, render_html(*args, **kwargs))
    return path


def write_report(
    path: Path,
    target_version: str,
    *,
    status: pl.DataFrame,
    blast_radius: pl.DataFrame,
    answers: pl.DataFrame,
    claims: pl.DataFrame,
    versions: list[str],
    status_counts: pl.DataFrame,
    history: list[dict],
) -> Path:
    """The report of `target_version` from what changes.report_inputs computed: the statuses with their cards'
    repairs, the answers and claims, the status counts of `versions` (the plots) and the history documents."""
    return write_html(
        path,
        status,
        blast_radius,
        answers,
        claims,
        target_version,
        plots_html=report_plots(versions, status_counts, blast_radius),
        history_html=history_section(history),
    )
