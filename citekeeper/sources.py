"""The source model's vocabulary (issue 31): the ordered authority levels and what a level is worth in the
conflict ranking. Ingest validates a document's `authority` against the configured levels; verification ranks
evidence by the same levels (docs/answers.md, "Sources")."""
from __future__ import annotations

# The design's order, most authoritative first; a deployment may configure its own (same order rule).
DEFAULT_AUTHORITY_LEVELS = (
    "official_spec",  # official specification or API docs
    "official_source",  # official source code and tests
    "runtime_observation",
    "official_example",
    "certified_internal",  # certified internal docs
    "community",  # community articles
)


def authority_weight(authority: str | None, levels: tuple[str, ...] = DEFAULT_AUTHORITY_LEVELS) -> float:
    """A(e) in [0, 1]: 1 for the first level, 0 for the last, evenly between; 0 for none or an unknown one."""
    if authority not in levels:
        return 0.0
    if len(levels) == 1:
        return 1.0
    return (len(levels) - 1 - levels.index(authority)) / (len(levels) - 1)
