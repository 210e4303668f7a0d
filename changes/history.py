"""Each claim's history across corpus versions: its citations' statuses, its verification, and the change that
caused every transition (what `citekeeper history` shows: docs/answers.md)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import polars as pl

from changes.citation_status import judge_citations
from changes.diff import diff_versions
from changes.statuses import SEVERITY
from citekeeper.answers.store import AnswerStore, UnknownAnswer
from citekeeper.layout import latest_run_dir, run_table_files
from citekeeper.schema import CHUNK_DIFF, CITATION_STATUS, CITATIONS, DOC_DIFF, NLI_CLAIMS
from citekeeper.scope import aggregate_documents, withhold_documents
from citekeeper.tables import empty, read_parquet

IN_USE = ["answer_id", "revision"]
LINEAGE_KEY = ["answer_id", "claim_id", "citation_index"]  # one citation across its answer's revisions
STATUS_COLUMNS = ["status", "reason", "doc_id", "source_path", "new_chunk_id", "new_doc_id", "new_source_path"]
# History.citations columns named apart from what they are: the document a citation rested on at the previous
# version, and that document's path at the previous and at this version.
_RESTED = {"rested_doc": "old_doc_id", "doc_old_path": "old_source_path", "doc_new_path": "new_source_path"}
VERIFICATION_SCHEMA = {
    "answer_id": pl.String,
    "revision": pl.Int32,
    "claim_id": pl.String,
    "verification": pl.String,
    "version": pl.String,
}


@dataclass(frozen=True)
class History:
    revisions: pl.DataFrame  # answer_id, revision, corpus_version
    versions: pl.DataFrame  # answer_id, version, position, revision: the revision in use at each version
    claims: pl.DataFrame  # per answer, version and claim in use: text, statuses, status (the worst), verification
    citations: pl.DataFrame  # per answer, version and citation in use: status, where it rests, the change, cause

    def transitions(self) -> pl.DataFrame:
        return self.citations.filter(pl.col("cause").is_not_null())

    def changed_answers(self) -> list[str]:
        return self.transitions()["answer_id"].unique().sort().to_list()

    def documents(self, answer_ids: Iterable[str] | None = None) -> list[dict]:
        """One JSON-ready document per answer (default: every answer of this history), in answer_id order."""
        wanted = sorted(set(self.revisions["answer_id"]) if answer_ids is None else set(answer_ids))
        frames = [self.revisions, self.versions, self.claims, self.citations]
        by_answer = [_by(frame, "answer_id") for frame in frames]
        return [
            _document(answer_id, *(parts.get(answer_id, frame.clear()) for parts, frame in zip(by_answer, frames)))
            for answer_id in wanted
        ]


def answer_history(store, answer_ids: Iterable[str] | None = None, until: str | None = None) -> History:
    """The history of `answer_ids` (default: every registered answer) over the versions up to `until` (default:
    the latest). UnknownAnswer names the ids the answer store does not hold; UnknownVersion an unknown `until`.

    A citation is followed by (claim_id, citation_index). A change of its status between consecutive versions is
    caused by a new revision, else by the change of the document it rested on at the earlier version (its
    successor's document, else the cited one)."""
    snapshot = AnswerStore(store.root).snapshot()  # revisions, claims and citations of one commit
    revisions = _revisions(snapshot.all_answers(), answer_ids)
    versions = _versions_in_use(revisions, _positions(store), _until_position(store, until))
    citations = snapshot.read("citations").join(versions, on=IN_USE)
    timeline = _with_causes(store, _with_statuses(store, versions, citations))
    claims = _claim_states(snapshot.read("claims").join(versions, on=IN_USE), timeline, _verification(store, versions))
    return History(revisions, versions, claims, timeline)


def shared_history(history: History, store) -> History:
    """`history` as shared outputs show it: every mention of an aggregate_only document of `store` withheld."""
    documents = aggregate_documents(store)
    return replace(history, citations=withhold_documents(history.citations, documents, _RESTED))


def _revisions(answers: pl.DataFrame, answer_ids: Iterable[str] | None) -> pl.DataFrame:
    revisions = answers.select("answer_id", "revision", "corpus_version").sort("answer_id", "revision")
    if answer_ids is None:
        return revisions
    wanted = list(dict.fromkeys(answer_ids))
    unknown = sorted(set(wanted) - set(revisions["answer_id"]))
    if unknown:
        raise UnknownAnswer(f"unknown answer id {', '.join(map(repr, unknown))}: not registered in the answer store")
    return revisions.filter(pl.col("answer_id").is_in(wanted))


def _positions(store) -> pl.DataFrame:
    names = [manifest.name for manifest in store.versions()]
    return pl.DataFrame(
        {"version": names, "position": range(len(names))}, schema={"version": pl.String, "position": pl.Int64}
    )


def _until_position(store, until: str | None) -> int | None:
    if until is None:
        return None
    name = store.manifest(until).name  # UnknownVersion lists the known ones
    return [manifest.name for manifest in store.versions()].index(name)


def _versions_in_use(revisions: pl.DataFrame, positions: pl.DataFrame, until: int | None) -> pl.DataFrame:
    """(answer_id, version, position, revision): from the version the first revision cites on, the latest revision
    citing a version at or before each one."""
    cited = revisions.join(
        positions.select(corpus_version="version", cited_position="position"), on="corpus_version", how="left"
    ).with_columns(pl.col("cited_position").fill_null(0))  # a version the store lacks: judged (invalid) from the first
    start = cited.group_by("answer_id").agg(start=pl.col("cited_position").sort_by("revision").first())
    in_range = (pl.col("position") >= pl.col("cited_position")) & (pl.col("position") >= pl.col("start"))
    if until is not None:
        in_range &= pl.col("position") <= until
    return (
        cited.join(positions, how="cross")
        .join(start, on="answer_id")
        .filter(in_range)
        .group_by("answer_id", "version", "position")
        .agg(pl.col("revision").max())
        .sort("answer_id", "position")
    )


def _with_statuses(store, versions: pl.DataFrame, citations: pl.DataFrame) -> pl.DataFrame:
    """Each citation in use at each version with its status there, and where that status came from."""
    # Typed even when no version is in range.
    parts = [empty(CITATION_STATUS).with_columns(statuses_from=pl.lit(None, pl.String))]
    for (version,), in_use in versions.partition_by("version", as_dict=True).items():
        stored = read_parquet(store.layout.citation_status_file(version), CITATION_STATUS).join(
            in_use.select(IN_USE), on=IN_USE, how="semi"
        )
        parts.append(stored.with_columns(statuses_from=pl.lit("stored")))
        missing = citations.filter(pl.col("version") == version).join(
            stored.select(IN_USE).unique(), on=IN_USE, how="anti"
        )
        if missing.height:
            judged, _ = judge_citations(store, missing.select(CITATIONS.names), version)
            parts.append(judged.with_columns(statuses_from=pl.lit("computed")))
    statuses = pl.concat(parts).select(
        *IN_USE, "claim_id", "citation_id", pl.col("target_version").alias("version"), *STATUS_COLUMNS, "statuses_from"
    )
    return citations.join(statuses, on=[*IN_USE, "claim_id", "citation_id", "version"], how="left")


def _with_causes(store, timeline: pl.DataFrame) -> pl.DataFrame:
    """The timeline with, per citation and version, the change since the previous version of the document (and
    chunk) it rested on there, and the cause of a status transition: `revision` or `document`."""
    followed = timeline.sort([*LINEAGE_KEY, "position"]).with_columns(
        pl.col("version", "status", "revision", "citation_id", "corpus_version")
        .shift()
        .over(LINEAGE_KEY)
        .name.prefix("prev_"),
        rested_doc=pl.coalesce("new_doc_id", "doc_id").shift().over(LINEAGE_KEY),
        rested_chunk=pl.coalesce("new_chunk_id", "chunk_id").shift().over(LINEAGE_KEY),
    )
    docs, chunks = _changes(store, followed.select("prev_version", "version").drop_nulls().unique())
    transition = pl.col("prev_status").is_not_null() & (pl.col("status") != pl.col("prev_status"))
    citation_changed = (pl.col("revision") != pl.col("prev_revision")) & (
        (pl.col("citation_id") != pl.col("prev_citation_id"))
        | (pl.col("corpus_version") != pl.col("prev_corpus_version"))
    )
    return (
        followed.join(docs, on=["prev_version", "version", "rested_doc"], how="left")
        .join(chunks, on=["prev_version", "version", "rested_chunk"], how="left")
        .with_columns(
            # Chunks of untouched documents are not in the chunk diff.
            chunk_change=pl.coalesce(
                "chunk_change", pl.when(pl.col("doc_change").is_not_null()).then(pl.lit("unchanged"))
            ),
            cause=pl.when(transition & citation_changed)
            .then(pl.lit("revision"))
            .when(transition)
            .then(pl.lit("document")),
        )
        .sort("answer_id", "position", "claim_id", "citation_index")
    )


def _changes(store, pairs: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Document and chunk changes between each (prev_version, version) pair, keyed by the old doc / chunk."""
    diffs = [diff_versions(store, old, new) for old, new in pairs.iter_rows()]
    docs = pl.concat([diff.docs for diff in diffs]) if diffs else empty(DOC_DIFF)
    chunks = pl.concat([diff.chunks for diff in diffs]) if diffs else empty(CHUNK_DIFF)
    return (
        docs.filter(pl.col("old_doc_id").is_not_null()).select(
            prev_version="old_version",
            version="new_version",
            rested_doc="old_doc_id",
            doc_change="change",
            doc_old_path="old_source_path",
            doc_new_path="new_source_path",
        ),
        chunks.filter(pl.col("old_chunk_id").is_not_null()).select(
            prev_version="old_version",
            version="new_version",
            rested_chunk="old_chunk_id",
            chunk_change="change",
            chunk_similarity="similarity",
        ),
    )


def _verification(store, versions: pl.DataFrame) -> pl.DataFrame:
    """Claim statuses of the latest verification run of each version in range (VERIFICATION_SCHEMA)."""
    frames = [pl.DataFrame(schema=VERIFICATION_SCHEMA)]
    for version in versions["version"].unique().sort():
        run = latest_run_dir(store.layout.runs_dir, version)
        for path in run_table_files(run, "claims") if run is not None else []:
            claims = read_parquet(path, NLI_CLAIMS)
            frames.append(claims.select(*IN_USE, "claim_id", verification="status", version=pl.lit(version)))
    return pl.concat(frames)


def _claim_states(claims: pl.DataFrame, timeline: pl.DataFrame, verification: pl.DataFrame) -> pl.DataFrame:
    """Each claim in use at each version: its citations' statuses in citation order, the worst, its verification."""
    states = (
        timeline.sort("citation_index")
        .group_by("answer_id", "version", "claim_id")
        .agg(
            statuses=pl.col("status"),
            status=pl.col("status").sort_by(pl.col("status").replace_strict(SEVERITY)).last(),
        )
    )
    return (
        claims.select("answer_id", "version", "position", "revision", "claim_id", "claim_index", "text")
        .join(states, on=["answer_id", "version", "claim_id"], how="left")
        .join(verification, on=[*IN_USE, "claim_id", "version"], how="left")
        .sort("answer_id", "position", "claim_index")
    )


# ---------------------------------------------------------------- the document: JSON, text, HTML


def _by(frame: pl.DataFrame, key: str) -> dict[str, pl.DataFrame]:
    return {value: group for (value,), group in frame.partition_by(key, as_dict=True, maintain_order=True).items()}


def _document(answer_id: str, revisions, versions, claims, citations) -> dict:
    sources = dict(citations.group_by("version").agg(pl.col("statuses_from").drop_nulls().first()).iter_rows())
    by_claim = _by(citations, "claim_id")
    return {
        "answer_id": answer_id,
        "revisions": revisions.select("revision", "corpus_version").to_dicts(),
        "versions": [
            {"version": row["version"], "revision": row["revision"], "statuses_from": sources.get(row["version"])}
            for row in versions.iter_rows(named=True)
        ],
        "claims": [
            _claim(states, by_claim.get(claim_id, citations.clear()))
            for claim_id, states in _by(claims, "claim_id").items()
        ],
    }


def _claim(states: pl.DataFrame, citations: pl.DataFrame) -> dict:
    at_version = _by(citations, "version")
    return {
        "claim_id": states["claim_id"][0],
        "text": states["text"][0],
        "versions": [
            {
                "version": state["version"],
                "revision": state["revision"],
                "status": state["status"],
                "statuses": state["statuses"] or [],
                "verification": state["verification"],
                "citations": [_citation(row) for row in at_version.get(state["version"], citations.clear()).to_dicts()],
            }
            for state in states.iter_rows(named=True)
        ],
        "transitions": [
            {
                "citation_index": row["citation_index"],
                "from_version": row["prev_version"],
                "to_version": row["version"],
                "from_status": row["prev_status"],
                "to_status": row["status"],
                "cause": _cause(row),
            }
            for row in citations.filter(pl.col("cause").is_not_null()).to_dicts()
        ],
    }


def _citation(row: dict) -> dict:
    return {
        "citation_index": row["citation_index"],
        "citation_id": row["citation_id"],
        "chunk_id": row["chunk_id"],
        "cited_version": row["corpus_version"],
        "status": row["status"],
        "reason": row["reason"],
        "source_path": row["new_source_path"] or row["source_path"],  # where the evidence rests at this version
        "doc_change": _doc_change(row) if row["doc_change"] not in (None, "unchanged") else None,
    }


def _doc_change(row: dict) -> dict:
    return {
        "change": row["doc_change"],
        "old_source_path": row["doc_old_path"],
        "new_source_path": row["doc_new_path"],
        "chunk_change": row["chunk_change"],
        "similarity": row["chunk_similarity"],
    }


def _cause(row: dict) -> dict:
    if row["cause"] == "revision":
        return {"kind": "revision", "revision": row["revision"], "cited_version": row["corpus_version"]}
    return {"kind": "document", **(_doc_change(row) if row["doc_change"] is not None else {"change": None})}
