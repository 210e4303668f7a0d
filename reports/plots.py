"""Inline SVG plots for the HTML report: hand-written SVG, no JavaScript, every label escaped.

Inputs are small aggregated polars frames (one row per version x status, or per document), so the
report stays self-contained and renders the same in any browser or mail client.
"""

from __future__ import annotations

from html import escape

import polars as pl

from changes.statuses import COLORS, NAMES, NOT_HOLDING, stale
from reports.terminal import in_words

OTHER_COLOR = "#9e9e9e"  # a status no longer registered
NOT_HOLDING_COLOR = stale.STATUS.color  # the lines and bars that count citations no longer holding

WIDTH = 640
BAR_AREA_HEIGHT = 180
MARGIN_LEFT = 48
MARGIN_TOP = 16
AXIS_LABEL_HEIGHT = 44


def _svg(height: int, title: str, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">'
        f"<title>{escape(title)}</title>{''.join(body)}</svg>"
    )


def _color(status: str) -> str:
    return COLORS.get(status, OTHER_COLOR)


def _y_axis(max_value: int) -> list[str]:
    """Baseline and a top tick labelled with the maximum."""
    bottom = MARGIN_TOP + BAR_AREA_HEIGHT
    return [
        f'<line x1="{MARGIN_LEFT}" y1="{bottom}" x2="{WIDTH - 8}" y2="{bottom}" stroke="#555"/>',
        f'<line x1="{MARGIN_LEFT}" y1="{MARGIN_TOP}" x2="{MARGIN_LEFT}" y2="{bottom}" stroke="#555"/>',
        f'<text x="{MARGIN_LEFT - 4}" y="{MARGIN_TOP + 4}" text-anchor="end">{max_value}</text>',
        f'<text x="{MARGIN_LEFT - 4}" y="{bottom}" text-anchor="end">0</text>',
    ]


def _x_label(x: float, text: str) -> str:
    y = MARGIN_TOP + BAR_AREA_HEIGHT + 12
    return f'<text x="{x:.1f}" y="{y}" text-anchor="end" transform="rotate(-30 {x:.1f} {y})">{escape(text)}</text>'


def _legend(statuses: list[str], y: int) -> list[str]:
    parts = []
    for i, status in enumerate(statuses):
        x = MARGIN_LEFT + i * 90
        parts.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{_color(status)}"/>')
        parts.append(f'<text x="{x + 14}" y="{y}">{escape(status)}</text>')
    return parts


def statuses_per_version_svg(counts: pl.DataFrame, versions: list[str]) -> str:
    """Stacked bars: citation statuses per target version, in the given version order."""
    statuses = [s for s in NAMES if s in set(counts["status"].to_list())]
    statuses += sorted(set(counts["status"].to_list()) - set(statuses))
    totals = counts.group_by("target_version").agg(pl.col("n").sum())
    max_total = max([1, *totals["n"].to_list()])
    slot = (WIDTH - MARGIN_LEFT - 16) / max(len(versions), 1)
    bar_width = min(slot * 0.7, 60)
    by_key = {(r["target_version"], r["status"]): r["n"] for r in counts.iter_rows(named=True)}
    body = _y_axis(max_total)
    for i, version in enumerate(versions):
        x = MARGIN_LEFT + 8 + i * slot
        y = MARGIN_TOP + BAR_AREA_HEIGHT
        for status in statuses:
            n = by_key.get((version, status), 0)
            if not n:
                continue
            h = BAR_AREA_HEIGHT * n / max_total
            y -= h
            body.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_width:.1f}" height="{h:.1f}" '
                f'fill="{_color(status)}"><title>{escape(version)}: {escape(status)} {n}</title></rect>'
            )
        body.append(_x_label(x + bar_width / 2, version))
    height = MARGIN_TOP + BAR_AREA_HEIGHT + AXIS_LABEL_HEIGHT + 20
    body += _legend(statuses, height - 6)
    return _svg(height, "Citation statuses per corpus version", body)


def stale_over_time_svg(counts: pl.DataFrame, versions: list[str]) -> str:
    """Line: citations that no longer hold (changes.statuses.NOT_HOLDING) per version, oldest first."""
    not_valid = counts.filter(pl.col("status").is_in(NOT_HOLDING)).group_by("target_version").agg(pl.col("n").sum())
    per_version = dict(zip(not_valid["target_version"].to_list(), not_valid["n"].to_list()))
    values = [per_version.get(v, 0) for v in versions]
    max_value = max(max(values, default=0), 1)
    step = (WIDTH - MARGIN_LEFT - 40) / max(len(versions) - 1, 1)
    points = [
        (MARGIN_LEFT + 16 + i * step, MARGIN_TOP + BAR_AREA_HEIGHT * (1 - v / max_value)) for i, v in enumerate(values)
    ]
    body = _y_axis(max_value)
    if len(points) > 1:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        body.append(f'<polyline points="{path}" fill="none" stroke="{NOT_HOLDING_COLOR}" stroke-width="2"/>')
    for (x, y), version, value in zip(points, versions, values):
        body.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{NOT_HOLDING_COLOR}">'
            f"<title>{escape(version)}: {value}</title></circle>"
        )
        body.append(f'<text x="{x:.1f}" y="{y - 8:.1f}" text-anchor="middle">{value}</text>')
        body.append(_x_label(x, version))
    height = MARGIN_TOP + BAR_AREA_HEIGHT + AXIS_LABEL_HEIGHT
    return _svg(height, f"{in_words(NOT_HOLDING).capitalize()} citations per corpus version", body)


def blast_radius_svg(
    blast: pl.DataFrame, value_column: str = "n_citations", label_column: str = "document", top: int = 10
) -> str:
    """Horizontal bars: the documents whose change affects the most citations."""
    rows = blast.sort(value_column, descending=True).head(top).select(label_column, value_column).rows()
    max_value = max(max((v for _, v in rows), default=0), 1)
    row_height = 22
    label_width = 220
    bar_space = WIDTH - label_width - 60
    body = []
    for i, (label, value) in enumerate(rows):
        y = MARGIN_TOP + i * row_height
        w = bar_space * value / max_value
        shown = label if len(label) <= 34 else label[:33] + "…"
        body.append(f'<text x="{label_width - 6}" y="{y + 14}" text-anchor="end">{escape(shown)}</text>')
        body.append(
            f'<rect x="{label_width}" y="{y + 3}" width="{w:.1f}" height="{row_height - 6}" '
            f'fill="{NOT_HOLDING_COLOR}"><title>{escape(label)}: {value}</title></rect>'
        )
        body.append(f'<text x="{label_width + w + 4:.1f}" y="{y + 14}">{value}</text>')
    if not rows:
        body.append(f'<text x="{MARGIN_LEFT}" y="{MARGIN_TOP + 14}">no changed document broke a citation</text>')
    height = MARGIN_TOP + max(len(rows), 1) * row_height + 12
    return _svg(height, "Documents whose change broke the most citations", body)


def plots_html(counts: pl.DataFrame, versions: list[str], blast: pl.DataFrame) -> str:
    """The report's plots section: three figures, inline SVG."""
    figures = [
        ("Citation statuses per version", statuses_per_version_svg(counts, versions)),
        ("Stale citations over time", stale_over_time_svg(counts, versions)),
        ("Top blast-radius documents", blast_radius_svg(blast)),
    ]
    return "".join(
        f'<figure class="plot"><figcaption>{escape(caption)}</figcaption>{svg}</figure>' for caption, svg in figures
    )


def report_plots(versions: list[str], counts: pl.DataFrame, blast_radius: pl.DataFrame) -> str:
    """Plots for the report of a target version: the status counts (changes.report_inputs.status_counts) of
    `versions`, oldest first, and the target's blast radius; none when no version has stored statuses."""
    if not versions:
        return ""
    blast = blast_radius.filter(pl.col("n_citations") > 0).with_columns(
        pl.coalesce("source_path", "doc_id").alias("document")
    )
    return plots_html(counts, versions, blast.select("document", "n_citations"))
