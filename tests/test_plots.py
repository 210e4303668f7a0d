"""Inline SVG plots: one bar segment per (version, status), stale counts per version, escaped labels."""

import re

import polars as pl

from changes.report_inputs import status_counts
from reports import plots

STATUS_ROWS = pl.DataFrame(
    {
        "target_version": ["v1", "v1", "v1", "v2", "v2", "v2", "v2"],
        "status": ["valid", "valid", "invalid", "valid", "stale", "removed", "stale"],
    }
)
BLAST = pl.DataFrame({"document": ["billing.md", "<script>alert(1)</script>.md"], "n_citations": [3, 1]})


def test_statuses_per_version_has_one_segment_per_version_and_status():
    counts = status_counts(STATUS_ROWS)
    svg = plots.statuses_per_version_svg(counts, ["v1", "v2"])
    segments = re.findall(r"<title>(v\d): (\w+) (\d+)</title>", svg)
    assert sorted(segments) == [
        ("v1", "invalid", "1"),
        ("v1", "valid", "2"),
        ("v2", "removed", "1"),
        ("v2", "stale", "2"),
        ("v2", "valid", "1"),
    ]


def test_stale_over_time_counts_citations_that_no_longer_hold():
    svg = plots.stale_over_time_svg(status_counts(STATUS_ROWS), ["v1", "v2"])
    assert re.findall(r"<title>(v\d): (\d+)</title>", svg) == [("v1", "1"), ("v2", "3")]


def test_plots_are_inline_svg_without_script_and_labels_are_escaped():
    html = plots.plots_html(status_counts(STATUS_ROWS), ["v1", "v2"], BLAST)
    assert html.count("<svg") == 3
    assert "<script" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;.md" in html
    bars = re.findall(
        r'<rect x="\d+" y="[\d.]+" width="([\d.]+)" height="\d+" fill="[^"]+"><title>([^<]+)</title>', html
    )
    widths = {label: float(width) for width, label in bars}
    assert widths["billing.md: 3"] == 3 * widths["&lt;script&gt;alert(1)&lt;/script&gt;.md: 1"]
