"""The stale-citation summary printed by `citekeeper stale`, the demo and the stale_report asset."""

from __future__ import annotations

import polars as pl

from changes.statuses import LOST, NAMES, NOT_HOLDING
from citekeeper.scope import is_withheld
from citekeeper.text import printable


def in_words(statuses: tuple[str, ...]) -> str:
    """Status names as a sentence lists them: "stale, removed, invalid or out of scope"."""
    words = [status.replace("_", " ") for status in statuses]
    return " or ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


def unsearched_clause(status: pl.DataFrame) -> str:
    """How many lost citations a `stale --no-reanchor` left without a search, as a clause ("" when none)."""
    n = status.filter(pl.col("reanchored").eq(False)).height
    return f" ({n} not searched: stale --no-reanchor; repair re-anchors them)" if n else ""


def source_line(row: dict) -> str:
    """What a row shows of its source, as "title — source_url — summary" (the parts it has, none withheld): all a
    redacted source shows instead of its text; "" when it has none."""
    parts = [row.get(key) for key in ("title", "source_url", "summary")]
    return " — ".join(part for part in parts if part and not is_withheld(part))


def terminal_summary(status: pl.DataFrame, blast_radius: pl.DataFrame, target_version: str, top: int = 5) -> str:
    counts = dict(status.group_by("status").len().iter_rows())
    methods = dict(
        status.filter(pl.col("suggested_method").is_not_null()).group_by("suggested_method").len().iter_rows()
    )
    lost = sum(counts.get(s, 0) for s in LOST)
    lines = [
        f"citations against {target_version}: {status.height} in {status['answer_id'].n_unique()} answers",
        "  " + "  ".join(f"{s} {counts.get(s, 0)}" for s in NAMES),
        f"  re-anchored {sum(methods.values())} of {lost} {'/'.join(LOST)}"
        + (" (" + ", ".join(f"{m} {n}" for m, n in sorted(methods.items())) + ")" if methods else "")
        + unsearched_clause(status),
    ]
    hit = blast_radius.filter(pl.col("n_citations") > 0).sort("rank").head(top)
    if hit.height:
        lines.append("  most affected documents:")
        lines += [
            f"    {r['rank']}. {printable(r['source_path'] or r['doc_id'])} ({r['change']}): "
            f"{r['n_citations']} citations, {r['n_answers']} answers"
            for r in hit.iter_rows(named=True)
        ]
    failing = sum(counts.get(s, 0) for s in NOT_HOLDING)
    lines.append(f"  {failing} citation(s) {in_words(NOT_HOLDING)}")
    updated = status["updated_after_retrieval"].sum()
    if updated:
        lines.append(f"  {updated} citation(s) rest on a document updated after the answer retrieved it")
    return "\n".join(lines)
