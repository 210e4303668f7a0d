"""The citation-status vocabulary: one module per status (its meaning, colour, what repair and the reports do with it,
and the rule that decides it; the contract: changes.statuses.base), registered here one line each. Everything else
reads the names, subsets, colours and decision order derived below; adding a status is its module plus its line."""

from __future__ import annotations

from changes.statuses import drifted, invalid, out_of_scope, relocated, removed, stale, valid
from changes.statuses.base import Judging, Status

# Every status, in severity order (best first): counts, summaries and a claim's worst status follow it.
STATUSES: tuple[Status, ...] = (
    valid.STATUS,
    relocated.STATUS,
    drifted.STATUS,
    stale.STATUS,
    removed.STATUS,
    invalid.STATUS,
    out_of_scope.STATUS,
)

NAMES = tuple(s.name for s in STATUSES)
SEVERITY = {name: rank for rank, name in enumerate(NAMES)}  # higher is worse
COLORS = {s.name: s.color for s in STATUSES}
# Citations whose evidence is still verbatim at a locator of the target version; the rest do not hold.
HOLDING = tuple(s.name for s in STATUSES if s.holds)
NOT_HOLDING = tuple(s.name for s in STATUSES if not s.holds)
# Citations whose evidence is gone from where it was: re-anchoring searches the target version for it.
LOST = tuple(s.name for s in STATUSES if s.lost)
REPAIRABLE = tuple(s.name for s in STATUSES if s.repairable)
AS_CITED = tuple(s.name for s in STATUSES if s.holds and not s.repairable)  # hold where cited: nothing to repair
NEVER_REPAIRED = tuple(s.name for s in STATUSES if not s.holds and not s.repairable)
WITH_SUCCESSOR = tuple(s.name for s in STATUSES if s.successor)
# The order the rules are tried in, the first that applies deciding: the overriding statuses worst first, then the
# rest best first (the last, removed, applies to every citation left).
DECISION_ORDER: tuple[Status, ...] = (
    *reversed([s for s in STATUSES if s.overrides]),
    *(s for s in STATUSES if not s.overrides),
)

__all__ = [
    "AS_CITED",
    "COLORS",
    "DECISION_ORDER",
    "HOLDING",
    "LOST",
    "NAMES",
    "NEVER_REPAIRED",
    "NOT_HOLDING",
    "REPAIRABLE",
    "SEVERITY",
    "STATUSES",
    "WITH_SUCCESSOR",
    "Judging",
    "Status",
]
