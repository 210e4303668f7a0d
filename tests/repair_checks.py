"""What every real-data repair test asserts: `repair --apply`, then `stale` again against the same version."""

from __future__ import annotations

import json

import polars as pl
from click.testing import CliRunner

from citekeeper.answers.store import AnswerStore
from citekeeper.text import marker_ids
from pipelines.cli import main

HOLDING_AFTER_REPAIR = ("repointed_successor", "repointed_exact", "repointed_normalised", "repointed_suggestion")


def repair_and_recheck(store, target: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Run `repair --apply` and then `stale` against `target`; assert the loop closed. Returns (repairs, status
    after), the status joined to the repair of the same claim and citation index."""
    runner = CliRunner()
    where = ["--store", str(store.root)]
    before = AnswerStore(store.root).snapshot()
    repaired = runner.invoke(main, ["repair", "--against", target, "--apply", "--json", *where], catch_exceptions=False)
    assert repaired.exit_code == 0, repaired.output
    summary = json.loads(repaired.stdout)
    repairs = pl.read_parquet(store.layout.repairs_file(target))
    repaired_ids = set(repairs.filter(pl.col("to_revision").is_not_null())["answer_id"])
    assert summary["n_answers_repaired"] == len(repaired_ids) > 0

    after = AnswerStore(store.root).snapshot()
    revisions = dict(after.answers().select("answer_id", "revision").iter_rows())
    assert {revisions[a] for a in repaired_ids} == {2}  # the repaired revision is revision 2
    assert {r for a, r in revisions.items() if a not in repaired_ids} <= {1}
    _assert_nothing_lost(before, after, repaired_ids)

    stale = runner.invoke(main, ["stale", "--against", target, "--no-reanchor", *where], catch_exceptions=False)
    assert stale.exit_code == 0, stale.output
    status = pl.read_parquet(store.layout.citation_status_file(target))
    positions = after.citations().select("citation_id", "claim_id", "citation_index")
    rechecked = status.join(positions, on="citation_id").join(
        repairs.select("answer_id", "claim_id", "citation_index", "repair"),
        on=["answer_id", "claim_id", "citation_index"],
    )
    assert rechecked.height == status.height == repairs.height
    exact = rechecked.filter(pl.col("repair").is_in(["repointed_exact", "repointed_normalised"]))
    assert (exact["status"] == "valid").all(), exact.filter(pl.col("status") != "valid").to_dicts()[:3]
    holding = rechecked.filter(pl.col("repair").is_in(HOLDING_AFTER_REPAIR))
    assert (holding["status"] == "valid").all(), holding.filter(pl.col("status") != "valid").to_dicts()[:3]
    left = rechecked.filter(pl.col("repair") == "unresolved")
    assert left["status"].is_in(["stale", "removed"]).all()  # still judged from the version they cite, not invalid
    return repairs, rechecked


def _assert_nothing_lost(before, after, answer_ids: set[str]) -> None:
    """No repaired answer lost a claim, a marker or a reference number."""
    old_answers = before.answers().filter(pl.col("answer_id").is_in(answer_ids)).sort("answer_id")
    new_answers = after.answers().filter(pl.col("answer_id").is_in(answer_ids)).sort("answer_id")
    for old, new in zip(old_answers.iter_rows(named=True), new_answers.iter_rows(named=True)):
        assert new["answer"] == old["answer"] and marker_ids(new["answer"]) == marker_ids(old["answer"])
        old_record, new_record = json.loads(old["source_record"]), json.loads(new["source_record"])
        refs = [[r["ref"] for r in record.get("references") or []] for record in (old_record, new_record)]
        assert refs[0] == refs[1], old["answer_id"]
        texts = [[c["text"] for c in record.get("claims") or []] for record in (old_record, new_record)]
        assert texts[0] == texts[1], old["answer_id"]
    count = ["answer_id"]
    old_claims = before.claims().filter(pl.col("answer_id").is_in(answer_ids)).group_by(count).len().sort(count)
    new_claims = after.claims().filter(pl.col("answer_id").is_in(answer_ids)).group_by(count).len().sort(count)
    assert old_claims.equals(new_claims)
    same_text = (
        before.claims()
        .select("claim_id", "text")
        .join(after.claims().select("claim_id", "text"), on=["claim_id", "text"])
    )
    assert same_text.height == before.claims().height  # every claim kept its id and text
