"""What the stale report of a store's target version shows, read and computed here so that reports/ renders it
without reading the store: the statuses with the repair each card shows, the answers and claims, the status counts
of every version judged up to the target, and the history of the answers whose status changed, as shared."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from changes.history import answer_history, shared_history
from changes.repair import card_repairs
from citekeeper.answers.store import AnswerStore


@dataclass(frozen=True)
class ReportInputs:
    status: pl.DataFrame  # CITATION_STATUS rows, each with its card's repair (changes.repair.card_repairs)
    answers: pl.DataFrame  # the registered answers (ANSWERS) and their claims (CLAIMS), of one commit
    claims: pl.DataFrame
    versions: list[str]  # the versions up to the target with stored statuses, oldest first
    status_counts: pl.DataFrame  # (target_version, status, n) of those versions
    history: list[dict]  # History.documents of the answers whose status changed up to the target, as shared


def status_counts(citation_status: pl.DataFrame) -> pl.DataFrame:
    """(target_version, status, n) from citation-status rows of one or more target versions."""
    return (
        citation_status.group_by("target_version", "status").agg(pl.len().alias("n")).sort("target_version", "status")
    )


def report_inputs(store, target_version: str, status: pl.DataFrame) -> ReportInputs:
    """What the report of `target_version` in a CorpusStore shows, `status` being its CITATION_STATUS rows."""
    answers = AnswerStore(store.root).snapshot()  # answers and claims of one commit
    versions, counts = _counts_until(store, target_version)
    history = shared_history(answer_history(store, until=target_version), store)
    return ReportInputs(
        status=status.join(card_repairs(store, target_version, status), on="citation_id", how="left"),
        answers=answers.answers(),
        claims=answers.claims(),
        versions=versions,
        status_counts=counts,
        history=history.documents(history.changed_answers()),
    )


def _counts_until(store, target_version: str) -> tuple[list[str], pl.DataFrame]:
    """The versions up to `target_version` whose citation_status.parquet is written, and their status counts."""
    names = [m.name for m in store.versions()]
    shown = names[: names.index(target_version) + 1] if target_version in names else [target_version]
    paths = [store.layout.citation_status_file(v) for v in shown]
    frames = [pl.read_parquet(p, columns=["target_version", "status"]) for p in paths if p.is_file()]
    if not frames:
        return [], pl.DataFrame(schema={"target_version": pl.String, "status": pl.String, "n": pl.UInt32})
    counts = status_counts(pl.concat(frames))
    return [v for v in shown if v in set(counts["target_version"].to_list())], counts
