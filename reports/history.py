"""Claim histories for people: a text timeline (`citekeeper history`) and the HTML report's `#history` section.

Both show paths, statuses and reasons, never document text, so the report's redaction of text holds; the paths,
doc_ids and reasons of aggregate_only documents are withheld before they come here
(changes.history.shared_history).
"""

from __future__ import annotations

from html import escape


def describe_cause(cause: dict) -> str:
    """One line: what caused a transition."""
    if cause["kind"] == "revision":
        return f"revision {cause['revision']} registered, citing {cause['cited_version']}"
    if cause["change"] is None:
        return "no change found to the document it rested on"
    if cause["change"] == "renamed":
        line = f"{cause['old_source_path']} renamed to {cause['new_source_path']}"
    else:
        line = f"{cause['old_source_path']} {cause['change']}"
    similarity = f" (similarity {cause['similarity']:.3f})" if cause["chunk_change"] == "modified" else ""
    return f"{line}; chunk {cause['chunk_change']}{similarity}"


def format_history(document: dict) -> str:
    """A readable per-claim timeline: version, revision, worst status [each citation's], verification, causes."""
    revisions = "; ".join(f"revision {r['revision']} cites {r['corpus_version']}" for r in document["revisions"])
    lines = [
        f"answer {document['answer_id']}: {revisions}",
        "statuses: "
        + ", ".join(f"{v['version']} {v['statuses_from'] or 'none (no citations)'}" for v in document["versions"]),
    ]
    for claim in document["claims"]:
        lines.append(f"claim {claim['claim_id']}: {claim['text']}")
        for state in claim["versions"]:
            statuses = f"{state['status']} [{', '.join(state['statuses'])}]" if state["statuses"] else "uncited"
            verification = state["verification"] or "none"
            lines.append(
                f"  {state['version']}  revision {state['revision']}  {statuses}  verification: {verification}"
            )
            lines += [
                f"      citation {t['citation_index']}: {t['from_status']} -> {t['to_status']}: "
                + describe_cause(t["cause"])
                for t in claim["transitions"]
                if t["to_version"] == state["version"]
            ]
    return "\n".join(lines)


def history_section(documents: list[dict]) -> str:
    """The report's `#history` section (escaped HTML): each claim's timeline, from the history documents
    (changes.history.History.documents) of the answers whose citation statuses changed across versions."""
    intro = (
        "<p>Answers whose citation status changed across corpus versions: each claim's statuses per version, "
        "its verification, and the change that caused each transition.</p>"
        if documents
        else "<p>No citation changed status across corpus versions.</p>"
    )
    return f'<section id="history"><h2>History</h2>{intro}{"".join(map(_answer_html, documents))}</section>'


def _answer_html(document: dict) -> str:
    answer_id = escape(document["answer_id"])
    revisions = ", ".join(
        f"revision {r['revision']} cites {escape(r['corpus_version'])}" for r in document["revisions"]
    )
    parts = [
        f'<article class="answer" id="history-{answer_id}"><h3>{answer_id} <span class="loc">{revisions}</span></h3>'
    ]
    for claim in document["claims"]:
        head = "<tr><th>version</th><th>revision</th><th>citations</th><th>verification</th><th>transitions</th></tr>"
        rows = "".join(_version_row(state, claim["transitions"]) for state in claim["versions"])
        parts.append(f"<h4>claim: {escape(claim['text'])}</h4><table>{head}{rows}</table>")
    parts.append("</article>")
    return "".join(parts)


def _version_row(state: dict, transitions: list[dict]) -> str:
    badges = " ".join(f'<span class="badge {escape(s)}">{escape(s)}</span>' for s in state["statuses"]) or "uncited"
    causes = "<br>".join(
        escape(f"citation {t['citation_index']}: {t['from_status']} → {t['to_status']}: {describe_cause(t['cause'])}")
        for t in transitions
        if t["to_version"] == state["version"]
    )
    return (
        f"<tr><td>{escape(state['version'])}</td><td>{state['revision']}</td><td>{badges}</td>"
        f"<td>{escape(state['verification'] or '—')}</td><td>{causes}</td></tr>"
    )
