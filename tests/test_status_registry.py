"""The citation-status registry (changes.statuses): every module of the folder is registered, and every registered
status is documented (its row in docs/answers.md, "Judging citations", and its module in docs/extending.md, "A
citation status") and reached by a real citation judged against a real store (a module-scoped store of two
versions, one citation per status, `check_citations` without re-anchoring)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

from changes import statuses
from changes.citation_status import check_citations
from citekeeper.answers.store import AnswerStore
from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from tests.chunk_frames import write_tree

REPO = Path(__file__).resolve().parent.parent
CONTRACT = {"__init__", "base"}  # the registry and the contract: no status of their own

V1 = {
    "keep.md": "# Keep\n\nThe client keeps connections alive for reuse across requests.\n",
    "before.md": "# Move\n\nEnvironment variables configure proxies for all clients.\n",
    "drift.md": "# Drift\n\nThe default timeout is five seconds. Pools keep connections alive.\n",
    "stale.md": "# Stale\n\nRedirects are followed by default for every request you make.\n",
    "gone.md": "# Gone\n\nThe legacy dispatcher interface was removed in this release entirely.\n",
    "staff.md": "---\naccess_groups: [staff]\n---\n# Staff\n\nPartners get a discount of twenty percent on renewals.\n",
}
V2 = {
    **{path: V1[path] for path in ("keep.md", "staff.md")},
    "after.md": V1["before.md"],
    "drift.md": "# Drift\n\nThe default timeout is five seconds. Pools keep up to ten connections alive.\n",
    "stale.md": "# Stale\n\nRedirects are not followed by default for any request you make.\n",
}
# status -> (the words that find the cited chunk in v1, the citation's quote, the answer's audience)
EXAMPLES = {
    "valid": ("keeps connections", "keeps connections alive", None),
    "relocated": ("configure proxies", "configure proxies", None),
    "drifted": ("five seconds", "The default timeout is five seconds.", None),
    "stale": ("Redirects", "Redirects are followed by default", None),
    "removed": ("legacy dispatcher", "legacy dispatcher", None),
    "invalid": ("keeps connections", "a sentence that is in no chunk", None),
    "out_of_scope": ("twenty percent", "discount of twenty percent", ["public"]),
}


def section(path: Path, title: str) -> str:
    return path.read_text().split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_every_status_module_is_registered():
    modules = {path.stem for path in (REPO / "changes" / "statuses").glob("*.py")} - CONTRACT
    assert sorted(modules) == sorted(statuses.NAMES)
    assert all(getattr(statuses, name).STATUS.name == name for name in statuses.NAMES)


def test_the_registry_derives_the_order_and_subsets():
    assert statuses.NAMES == ("valid", "relocated", "drifted", "stale", "removed", "invalid", "out_of_scope")
    assert [s.name for s in statuses.DECISION_ORDER] == [
        "out_of_scope",
        "invalid",
        "valid",
        "relocated",
        "drifted",
        "stale",
        "removed",
    ]
    assert (statuses.HOLDING, statuses.LOST, statuses.NEVER_REPAIRED) == (
        ("valid", "relocated", "drifted"),
        ("stale", "removed"),
        ("invalid", "out_of_scope"),
    )
    assert set(statuses.HOLDING) | set(statuses.NOT_HOLDING) == set(statuses.NAMES)


@pytest.mark.parametrize("name", statuses.NAMES)
def test_every_status_is_documented(name: str):
    judging = section(REPO / "docs" / "answers.md", "Judging citations")
    assert re.search(rf"^\| `{name}` \| ", judging, flags=re.M), f"docs/answers.md has no row for {name}"
    assert f"`changes/statuses/{name}.py`" in section(REPO / "docs" / "extending.md", "A citation status")


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> dict[str, dict]:
    """Status rows by answer id (the status each answer's citation is meant to reach), judged against v2."""
    base = tmp_path_factory.mktemp("status-registry")
    store = CorpusStore(base / "store")
    for version, tree in (("v1", V1), ("v2", V2)):
        assert not ingest(write_tree(base / version, tree), store, version=version).errors
    chunks = store.read_chunks("v1", columns=["chunk_id", "text"])
    records = []
    for name, (words, quote, audience) in EXAMPLES.items():
        chunk_id = chunks.filter(pl.col("text").str.contains(words, literal=True))["chunk_id"].item()
        citation = {"chunk_id": chunk_id, "quote": quote}
        claim = {"text": "It holds.", "citations": [citation]}
        records.append({"answer_id": name, "answer": "It holds.", "corpus_version": "v1", "claims": [claim]})
        if audience is not None:
            records[-1]["audience"] = audience
    answers = base / "answers.jsonl"
    answers.write_text("".join(json.dumps(record) + "\n" for record in records))
    AnswerStore(store.root).add(answers)
    check = check_citations(store, "v2", suggest=False)
    return {row["answer_id"]: row for row in check.read_status().iter_rows(named=True)}


@pytest.mark.parametrize("name", statuses.NAMES)
def test_every_status_is_reached_by_a_judged_citation(judged, name: str):
    assert name in EXAMPLES, f"add to EXAMPLES a citation that {name} judges"
    row = judged[name]
    assert row["status"] == name, row["reason"]
