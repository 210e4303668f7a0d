"""Judge every registered citation against a target corpus version: one status each (valid, relocated, drifted,
stale, removed, invalid, out_of_scope; their meaning: docs/answers.md, "Judging citations"), re-anchoring
suggestions for the stale and removed ones (never into a document outside the answer's audience), the cited
document's source fields on every row, and the blast radius per changed document."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from changes.diff import VersionDiff, diff_versions
from changes.reanchor import Reanchorer, reanchor
from changes.statuses import AS_CITED, DECISION_ORDER, LOST, NAMES, WITH_SUCCESSOR, Judging, relocated
from citekeeper.answers.store import AnswerSnapshot, AnswerStore
from citekeeper.locate import locate_quotes
from citekeeper.native_locator import LOCATOR_COLUMNS, native_locator
from citekeeper.schema import (
    BLAST_RADIUS,
    CITATION_STATUS,
    DOC_DIFF,
    DOCUMENTS,
    SOURCE_ROW_FIELDS,
)
from citekeeper.scope import (
    ACCESS_SCOPES,
    USER_VISIBLE,
    aggregate_documents,
    outside_audience,
    visible_from,
    withhold_documents,
)
from citekeeper.store import reading_store
from citekeeper.tables import ParquetStream, conform, counts_of, empty, read_parquet, write_parquet

CITATION_BATCH = 50_000  # citations judged at a time by check_citations
EVIDENCE = pl.coalesce("quote", "old_text")  # what a citation says: its quote, else its whole chunk
CHUNK_COLUMNS = [
    "chunk_id",
    "doc_id",
    "text",
    "text_hash",
    "start_char",
    "end_char",
    "source_path",
    "access_scope",
    *LOCATOR_COLUMNS,
]
# What a status row shows of its document, and the groups it is open to (the audience check).
SHOWN_SOURCE = ["title", "summary", *(f.name for f in SOURCE_ROW_FIELDS)]
SOURCE_COLUMNS = ["doc_id", "source_path", *SHOWN_SOURCE, "access_groups"]


@dataclass(frozen=True)
class DocumentSources:
    """SOURCE_COLUMNS of the documents a group of citations of one cited version may rest on, at the cited version
    and at the target: the cited documents (a citation registration could not anchor: the one it names) and the
    target chunks' documents (where a successor is)."""

    cited: pl.DataFrame
    target: pl.DataFrame

    @classmethod
    def read(
        cls,
        store,
        citations: pl.DataFrame,
        cited: pl.DataFrame | None,
        target_chunks: pl.DataFrame,
        cited_version: str,
        target_version: str,
    ) -> DocumentSources:
        named = citations.filter(pl.col("chunk_id").is_null())
        by_path = named["cited_source_path"].drop_nulls().unique()
        wanted = pl.concat([named["cited_doc_id"].drop_nulls(), *([] if cited is None else [cited["doc_id"]])])
        versions = [v for v in dict.fromkeys([cited_version, target_version]) if store.has_version(v)]
        if by_path.len():  # a source_path names its document in either version
            for version in versions:
                paths = store.read_documents(version, columns=["doc_id", "source_path"])
                wanted = pl.concat([wanted, paths.filter(pl.col("source_path").is_in(by_path.implode()))["doc_id"]])
        wanted = wanted.unique()

        def read(version: str, doc_ids: pl.Series) -> pl.DataFrame:
            if version not in versions:
                return pl.DataFrame(schema=empty_sources().schema)
            return store.read_documents(version, columns=SOURCE_COLUMNS, doc_ids=doc_ids.to_list())

        return cls(
            read(cited_version, wanted), read(target_version, pl.concat([wanted, target_chunks["doc_id"]]).unique())
        )


def empty_sources() -> pl.DataFrame:
    return empty(DOCUMENTS).select(SOURCE_COLUMNS)


def with_audience(store, rows: pl.DataFrame, answers: AnswerSnapshot | None = None) -> pl.DataFrame:
    """`rows` (of citations or their statuses) with their answer revision's `audience` (ANSWERS.audience), read for
    their answers only; as they are when they have it."""
    if "audience" in rows.columns:
        return rows
    keys = rows.select("answer_id", "revision").unique()
    answers = answers or AnswerStore(store.root).snapshot()
    audiences = (
        answers.scan("answers")
        .select("answer_id", "revision", "audience")
        .join(keys.lazy(), on=["answer_id", "revision"], how="semi")
    )
    return rows.join(audiences.collect(), on=["answer_id", "revision"], how="left")


def judge(
    citations: pl.DataFrame,
    cited_chunks: pl.DataFrame | None,
    diff: VersionDiff | None,
    target_chunks: pl.DataFrame,
    target_version: str,
    sources: DocumentSources | None = None,
) -> pl.DataFrame:
    """Status rows (CITATION_STATUS columns, no suggestions yet) for citations of ONE cited version.

    cited_chunks is None when the cited version is not in the store; diff is None when the cited
    version is the target itself. With `sources` (and an `audience` column: the answer's), each row carries its
    document's source fields, and a citation of a document closed to its answer's audience is out_of_scope.
    """
    cited_version = citations["corpus_version"][0]
    version_known = cited_chunks is not None
    if cited_chunks is None:  # every citation of an unknown version is invalid; keep the columns
        cited_chunks = target_chunks.clear()
    old = cited_chunks.select(CHUNK_COLUMNS)
    frame = citations.join(
        old.rename({c: f"old_{c}" for c in CHUNK_COLUMNS if c != "chunk_id"}), on="chunk_id", how="left"
    ).with_columns(evidence=EVIDENCE)
    changes = (
        diff.chunks.select(pl.col("old_chunk_id").alias("chunk_id"), "change", "new_chunk_id", "similarity")
        if diff is not None
        else pl.DataFrame(
            schema={"chunk_id": pl.String, "change": pl.String, "new_chunk_id": pl.String, "similarity": pl.Float64}
        )
    )
    new = target_chunks.select(CHUNK_COLUMNS).rename({c: f"new_{c}" for c in CHUNK_COLUMNS})
    frame = (
        frame.join(changes, on="chunk_id", how="left")
        .with_columns(
            # Chunks of untouched documents are not in the diff: same id, same everything.
            change=pl.col("change").fill_null("unchanged"),
            new_chunk_id=pl.when(pl.col("change").is_null()).then("chunk_id").otherwise("new_chunk_id"),
            similarity=pl.when(pl.col("change").is_null()).then(1.0).otherwise("similarity"),
            _untouched=pl.col("change").is_null(),
        )
        .join(new, on="new_chunk_id", how="left")
        .pipe(locate_quotes, "old_text", "evidence", prefix="old_evidence")
        # In an untouched chunk the evidence is where it was: only the successors of changed chunks are searched.
        .with_columns(_changed_text=pl.when(~pl.col("_untouched")).then("new_text"))
        .pipe(locate_quotes, "_changed_text", "evidence", prefix="_changed_evidence")
        .with_columns(
            pl.when("_untouched")
            .then(f"old_evidence_{part}")
            .otherwise(f"_changed_evidence_{part}")
            .alias(f"new_evidence_{part}")
            for part in ("start", "end", "match")
        )
        .with_columns(
            quote_match=pl.when(pl.col("quote").is_not_null()).then("old_evidence_match"),
            new_match=pl.col("new_evidence_match"),
            evidence_in_new=pl.col("new_evidence_match").is_not_null(),
        )
    )
    return (
        frame.pipe(_with_sources, sources, cited_version, target_version)
        .with_columns(_status_and_reason(cited_version, version_known))
        .pipe(_locators, target_version, cited_version)
    )


def _with_sources(
    frame: pl.DataFrame, sources: DocumentSources | None, cited_version: str, target_version: str
) -> pl.DataFrame:
    """The rows with their document's SHOWN_SOURCE fields (as of the target version where it is there, else the
    cited one), updated_after_retrieval, and `_outside_reason`: why the citation is out_of_scope, null when it is
    not. Fail closed: its document closed to the answer's audience at the cited version or at the target, or the
    document its successor is in, makes it so."""
    if sources is None or "audience" not in frame.columns:
        return frame.with_columns(_outside_reason=pl.lit(None, pl.String))
    by_path = sources.target.select("source_path", _path_doc="doc_id").unique("source_path")
    by_path = pl.concat([sources.cited.select("source_path", _path_doc="doc_id"), by_path]).unique(
        "source_path", keep="first"
    )
    frame = frame.join(by_path, left_on="cited_source_path", right_on="source_path", how="left").with_columns(
        _doc=pl.coalesce("old_doc_id", "cited_doc_id", "_path_doc")
    )
    shown = {"cited": sources.cited, "target": sources.target}
    for side, rows in shown.items():
        frame = frame.join(
            rows.rename({c: f"_{side}_{c}" for c in rows.columns}),
            left_on="_doc",
            right_on=f"_{side}_doc_id",
            how="left",
            coalesce=False,
        )
    successor = sources.target.select(_new_groups="access_groups", _new_doc="doc_id", _new_path="source_path")
    frame = frame.join(successor, left_on="new_doc_id", right_on="_new_doc", how="left")
    in_target = pl.col("_target_doc_id").is_not_null()
    frame = frame.with_columns(
        pl.when(in_target).then(f"_target_{c}").otherwise(f"_cited_{c}").alias(c) for c in SHOWN_SOURCE
    ).with_columns(updated_after_retrieval=pl.col("updated_at") > pl.col("retrieved_at"))
    places = [  # (groups, path, version) of each place the citation rests on, in the order a reason names them
        ("_cited_access_groups", "_cited_source_path", cited_version),
        ("_target_access_groups", "_target_source_path", target_version),
        ("_new_groups", "_new_path", target_version),
    ]
    audience = pl.format("[{}]", pl.col("audience").list.join(", "))
    reason = pl.coalesce(
        pl.when(outside_audience(groups, "audience")).then(
            pl.format(
                "{} (in {}) is open only to access_groups [{}], none of them in the answer's audience {}",
                path,
                pl.lit(version),
                pl.col(groups).list.join(", "),
                audience,
            )
        )
        for groups, path, version in places
    )
    return frame.with_columns(_outside_reason=reason)


def _status_and_reason(cited_version: str, version_known: bool) -> list[pl.Expr]:
    """The status and reason of each row: the first status in DECISION_ORDER whose rule applies."""
    judging = Judging(cited_version, version_known)
    status, reason = pl.lit(None, pl.String), pl.lit(None, pl.String)
    for entry in reversed(DECISION_ORDER):  # built from the last: each rule is tried before those after it
        applies = entry.applies(judging)
        status = pl.when(applies).then(pl.lit(entry.name)).otherwise(status)
        reason = pl.when(applies).then(entry.reason(judging)).otherwise(reason)
    return [status.alias("status"), reason.alias("reason")]


def _locators(frame: pl.DataFrame, target_version: str, cited_version: str) -> pl.DataFrame:
    """Old and new locators: the evidence span where the evidence is found, else the chunk's span."""
    quote_in_old = pl.col("old_evidence_start").is_not_null()
    old_start, old_end = (pl.col("old_start_char") + pl.col(f"old_evidence_{end}") for end in ("start", "end"))
    new_start, new_end = (pl.col("new_start_char") + pl.col(f"new_evidence_{end}") for end in ("start", "end"))
    has_successor = pl.col("status").is_in(WITH_SUCCESSOR)

    def successor(expr: pl.Expr) -> pl.Expr:
        return pl.when(has_successor).then(expr).otherwise(None)

    return frame.with_columns(
        target_version=pl.lit(target_version),
        cited_version=pl.lit(cited_version),
        doc_id=pl.col("old_doc_id"),
        source_path=pl.col("old_source_path"),
        access_scope=pl.coalesce("old_access_scope", "quote_access_scope"),  # an unanchored quote of internal text
        old_locator=native_locator("old_"),
        new_locator=successor(native_locator("new_")),
        old_start_char=pl.when(quote_in_old).then(old_start).otherwise("old_start_char"),
        old_end_char=pl.when(quote_in_old).then(old_end).otherwise("old_end_char"),
        new_start_char=successor(pl.when(pl.col("evidence_in_new")).then(new_start).otherwise("new_start_char")),
        new_end_char=successor(pl.when(pl.col("evidence_in_new")).then(new_end).otherwise("new_end_char")),
        **{
            name: successor(pl.col(name))
            for name in (
                "new_chunk_id",
                "new_match",
                "new_doc_id",
                "new_source_path",
                "new_access_scope",
                "new_text",
                "new_text_hash",
                "similarity",
            )
        },
    )


# ---------------------------------------------------------------- blast radius


def blast_radius(status: pl.DataFrame, doc_diffs: list[pl.DataFrame], target_version: str) -> pl.DataFrame:
    """Per changed document: answers, claims and citations that no longer hold as they were, ranked."""
    changed = (
        (pl.concat(doc_diffs) if doc_diffs else empty(DOC_DIFF))
        .filter(pl.col("change") != "unchanged")
        .select(
            pl.coalesce("old_doc_id", "new_doc_id").alias("doc_id"),
            pl.coalesce("old_source_path", "new_source_path").alias("source_path"),
            "change",
        )
        .unique("doc_id", keep="first")
    )
    resting = status.filter(pl.col("doc_id").is_not_null())
    changed_status = ~pl.col("status").is_in(AS_CITED)
    counts = resting.group_by("doc_id").agg(
        n_answers=pl.col("answer_id").filter(changed_status).n_unique(),
        n_claims=pl.col("claim_id").filter(changed_status).n_unique(),
        n_citations=changed_status.sum().cast(pl.Int64),
        n_citations_total=pl.len().cast(pl.Int64),
    )
    ranked = (
        changed.join(counts, on="doc_id", how="left")
        .with_columns(pl.col("n_answers", "n_claims", "n_citations", "n_citations_total").fill_null(0).cast(pl.Int64))
        .sort(["n_citations", "n_answers", "n_claims", "source_path"], descending=[True, True, True, False])
        .with_columns(rank=pl.int_range(1, pl.len() + 1, dtype=pl.Int32), target_version=pl.lit(target_version))
    )
    return conform(ranked, BLAST_RADIUS)


# ---------------------------------------------------------------- against a store


# The CITATION_STATUS columns a check keeps in memory (no texts): counts, summaries, blast radius.
OUTLINE_COLUMNS = [
    "answer_id",
    "claim_id",
    "citation_id",
    "doc_id",
    "status",
    "suggested_chunk_id",
    "suggested_method",
    "reanchored",
    "updated_after_retrieval",
]


@dataclass(frozen=True)
class CitationCheck:
    target_version: str
    outline: pl.DataFrame  # OUTLINE_COLUMNS of every current citation's status; the whole rows are at status_path
    blast_radius: pl.DataFrame  # BLAST_RADIUS
    status_path: Path
    blast_radius_path: Path

    def counts(self) -> dict[str, int]:
        return counts_of(self.outline, "status", NAMES)

    def read_status(self) -> pl.DataFrame:
        """Every CITATION_STATUS row (texts included): for a report or a repair, not for a million citations."""
        return read_parquet(self.status_path, CITATION_STATUS)


Audience = tuple[str, ...] | None  # an answer's (None: not given, every document open to it)


class Suggester:
    """Re-anchoring suggestions for the stale and removed citations of one target version, each searched only in
    the scopes its cited document may be re-pointed into (citekeeper.scope.visible_from) and in the documents open
    to its answer's audience. The target's chunks, documents and indexes are read on the first lost citation, once
    for all the batches of a check."""

    def __init__(self, store, target_version: str, embedding_store=None):
        self.store, self.target_version, self._embedding_store = store, target_version, embedding_store
        self._target: tuple[pl.DataFrame, pl.DataFrame] | None = None
        self._reanchorers: dict[tuple[tuple[str, ...], Audience], Reanchorer] = {}

    def __call__(self, status: pl.DataFrame) -> pl.DataFrame:
        """`status` with suggestions for its lost citations that were not re-anchored yet."""
        pending = pl.col("status").is_in(LOST) & ~pl.col("reanchored").fill_null(False)
        lost = with_audience(self.store, status.filter(pending)).with_columns(evidence=EVIDENCE)
        if lost.is_empty():
            return status
        groups = lost.with_columns(
            pl.col("access_scope").fill_null(USER_VISIBLE),
            _audience=pl.when(pl.col("audience").is_not_null()).then(
                pl.format("[{}]", pl.col("audience").list.join("\x1f"))
            ),
        ).partition_by("access_scope", "_audience", as_dict=True, maintain_order=True)
        suggestions = pl.concat(
            self._suggest(group, scope, None if group["audience"][0] is None else tuple(group["audience"][0]))
            for (scope, _), group in groups.items()
        )
        missing = [pl.lit(None, dtype).alias(c) for c, dtype in suggestions.schema.items() if c not in status.columns]
        suggested = (
            status.with_columns(missing)
            .update(suggestions, on="citation_id")
            .with_columns(reanchored=pl.when(pending).then(True).otherwise("reanchored"))
        )
        return self._relocated_when_verbatim(suggested)

    def _relocated_when_verbatim(self, status: pl.DataFrame) -> pl.DataFrame:
        """Stale citations whose evidence re-anchoring found verbatim elsewhere in the target
        (changes.statuses.relocated.found_verbatim): relocated, to where it stands now (its chunk, span and locator),
        with why; a removed chunk keeps `removed` and that exact suggestion."""
        verbatim = relocated.found_verbatim()
        found = status.filter(verbatim)
        if found.is_empty():
            return status
        chunk_columns = [f"new_{c}" for c in CHUNK_COLUMNS]
        target = self._target_frames()[1].select(CHUNK_COLUMNS).rename(lambda c: f"new_{c}")
        moved = (
            found.drop([c for c in chunk_columns if c in found.columns])
            .join(target, left_on="suggested_chunk_id", right_on="new_chunk_id", how="left", coalesce=False)
            .with_columns(
                status=pl.lit(relocated.STATUS.name),
                reason=relocated.found_verbatim_reason(),
                new_match=pl.col("suggested_method"),
                new_start_char=pl.col("suggested_start_char"),
                new_end_char=pl.col("suggested_end_char"),
                new_locator=native_locator("new_"),
            )
        )
        return pl.concat([status.filter(~verbatim), moved], how="diagonal_relaxed")

    def _suggest(self, lost: pl.DataFrame, scope: str, audience: Audience) -> pl.DataFrame:
        """Suggestions from the scopes `scope` may be re-pointed into, in documents open to `audience`;
        `evidence_internal` marks the citations whose evidence only text of a stricter level still holds (searched
        again, the finding itself discarded)."""
        visible = visible_from(scope)
        found = reanchor(lost, self._reanchorer(visible, audience)).with_columns(evidence_internal=pl.lit(False))
        if visible == ACCESS_SCOPES or not self._has_text_beyond(visible):
            return found
        unfound = lost.join(found.filter(pl.col("suggested_chunk_id").is_not_null()), on="citation_id", how="anti")
        if unfound.is_empty():
            return found
        hidden = reanchor(unfound, self._reanchorer(ACCESS_SCOPES, audience)).filter(
            pl.col("suggested_chunk_id").is_not_null()
        )
        return found.with_columns(evidence_internal=pl.col("citation_id").is_in(hidden["citation_id"].implode()))

    def _has_text_beyond(self, visible: tuple[str, ...]) -> bool:
        """Whether the target holds text at a level other than `visible` (where evidence may have gone)."""
        return bool((~self._target_frames()[1]["access_scope"].is_in(visible)).any())

    def _target_frames(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The target's documents (doc_id, text, access_groups) and chunks, read once."""
        if self._target is None:
            version = self.target_version
            self._target = (
                self.store.read_documents(version, columns=["doc_id", "text", "access_groups"]),
                self.store.read_chunks(version, columns=CHUNK_COLUMNS),
            )
        return self._target

    def _embeddings(self):
        if self._embedding_store is None:
            from citekeeper.search_index import EmbeddingStore

            self._embedding_store = EmbeddingStore(self.store.root)
        return self._embedding_store

    def _closed_to(self, audience: Audience) -> frozenset[str]:
        """The target's documents outside `audience` (citekeeper.scope.outside_audience)."""
        if audience is None:
            return frozenset()
        docs = self._target_frames()[0].select("doc_id", "access_groups")
        closed = docs.with_columns(audience=pl.lit(list(audience), dtype=pl.List(pl.String))).filter(outside_audience())
        return frozenset(closed["doc_id"].to_list())

    def _reanchorer(self, visible: tuple[str, ...], audience: Audience = None) -> Reanchorer:
        # Candidates come from the version's full-text index (built once per version, no vectors); the vector
        # index is built only if a citation reaches the hybrid tier.
        key = (visible, audience)
        if key not in self._reanchorers:
            version = self.target_version
            docs, chunks = self._target_frames()
            self._reanchorers[key] = Reanchorer(
                docs,
                chunks,
                index_factory=lambda: self._embeddings().chunk_index(version, chunks),
                text_index_factory=lambda: self._embeddings().text_index(version, chunks),
                visible=visible,
                excluded_docs=self._closed_to(audience),
            )
        return self._reanchorers[key]


def judge_citations(
    store, citations: pl.DataFrame, target_version: str, suggester: Suggester | None = None, diffs: dict | None = None
) -> tuple[pl.DataFrame, dict[str, pl.DataFrame]]:
    """CITATION_STATUS rows of `citations` (CITATIONS rows) judged against `target_version`, with re-anchoring
    suggestions from `suggester`, and per cited version the doc diff (cited version -> target) they were judged
    on. Writes nothing but the cached diffs. `diffs` (cited version -> ChangedChunks) keeps what was read of each
    cited version for the next batch of the same check."""
    store.manifest(target_version)  # UnknownVersion with the known versions listed
    parts, doc_diffs, diffs = [], {}, {} if diffs is None else diffs
    citations = with_audience(store, citations)
    for (cited_version,), group in citations.partition_by("corpus_version", as_dict=True).items():
        known = store.has_version(cited_version)
        if known and cited_version != target_version and cited_version not in diffs:
            diffs[cited_version] = ChangedChunks.read(store, cited_version, target_version)
        changed = diffs.get(cited_version)
        # Only the cited chunks are read from the target, and the diff's chunks once per check: not versions whole.
        cited_ids = group["chunk_id"].drop_nulls().unique()
        in_target = store.read_chunks(target_version, columns=CHUNK_COLUMNS, chunk_ids=cited_ids.to_list())
        if changed is None:
            target_chunks, cited_chunks = in_target, (in_target if known else None)
        else:
            doc_diffs[cited_version] = changed.diff.docs
            target_chunks = pl.concat([in_target, changed.new_chunks]).unique("chunk_id", keep="first")
            cited_chunks = changed.cited_chunks(cited_ids, in_target)
        sources = DocumentSources.read(store, group, cited_chunks, target_chunks, cited_version, target_version)
        parts.append(
            judge(group, cited_chunks, changed.diff if changed else None, target_chunks, target_version, sources)
        )
    status = pl.concat(parts, how="diagonal_relaxed") if parts else empty(CITATION_STATUS)
    status = status.with_columns(reanchored=pl.when(pl.col("status").is_in(LOST)).then(False))
    if suggester is not None and status.height:
        status = suggester(status)
    return conform(status, CITATION_STATUS).sort("answer_id", "claim_id", "citation_id"), doc_diffs


@dataclass(frozen=True)
class ChangedChunks:
    """A cited version's diff to the target, and the chunks the diff lists at both ends (the change's size, not the
    corpus's): read once per check."""

    diff: VersionDiff
    listed_ids: pl.Series  # the old and new chunk ids of the diff
    old_chunks: pl.DataFrame  # CHUNK_COLUMNS of the diff's old chunks, as of the cited version
    new_chunks: pl.DataFrame  # ... of its new chunks (the successors), as of the target

    @classmethod
    def read(cls, store, cited_version: str, target_version: str) -> ChangedChunks:
        diff = diff_versions(store, cited_version, target_version)
        old_ids, new_ids = (diff.chunks[side].drop_nulls().unique() for side in ("old_chunk_id", "new_chunk_id"))
        return cls(
            diff,
            pl.concat([old_ids, new_ids]).unique(),
            store.read_chunks(cited_version, columns=CHUNK_COLUMNS, chunk_ids=old_ids.to_list()),
            store.read_chunks(target_version, columns=CHUNK_COLUMNS, chunk_ids=new_ids.to_list()),
        )

    def cited_chunks(self, cited_ids: pl.Series, target_chunks: pl.DataFrame) -> pl.DataFrame:
        """The cited chunks as of the cited version. A chunk the diff does not list belongs to a document the change
        left untouched: its row is the same in the target (already read)."""
        listed = self.listed_ids.implode()
        untouched = target_chunks.filter(
            pl.col("chunk_id").is_in(cited_ids.implode()) & ~pl.col("chunk_id").is_in(listed)
        )
        return pl.concat([untouched, self.old_chunks.filter(pl.col("chunk_id").is_in(cited_ids.implode()))])


@reading_store  # gc waits until it has read the versions and written its outputs
def check_citations(
    store, target_version: str, suggest: bool = True, embedding_store=None, citations_per_batch: int = CITATION_BATCH
) -> CitationCheck:
    """Judge every current citation of the answer store against `target_version`, re-anchor what went
    stale or was removed, and write citation_status.parquet and blast_radius.parquet under
    <store.root>/citations/target_version=<v>/.

    The citations are judged `citations_per_batch` at a time, in the order their chunks have in the target, and
    each batch's rows are written as it is judged: memory holds the citations and the outline, plus one batch of
    texts; each batch reads one stretch of the target's chunks, so the check reads each chunk page once."""
    store.manifest(target_version)
    suggester = Suggester(store, target_version, embedding_store) if suggest else None
    answers = AnswerStore(store.root).snapshot()
    citations = with_audience(store, answers.citations(), answers)
    in_chunk_order = citations.join(store.chunk_offsets(target_version), on="chunk_id", how="left").sort(
        "offset", nulls_last=True
    )
    outlines: list[pl.DataFrame] = []
    doc_diffs: dict[str, pl.DataFrame] = {}
    diffs: dict[str, ChangedChunks] = {}
    with ParquetStream(store.layout.citation_status_file(target_version), CITATION_STATUS) as out:
        for batch in in_chunk_order.drop("offset").iter_slices(citations_per_batch):
            status, judged_on = judge_citations(store, batch, target_version, suggester, diffs)
            out.write(status)
            outlines.append(status.select(OUTLINE_COLUMNS))
            doc_diffs.update(judged_on)
    outline = pl.concat(outlines) if outlines else empty(CITATION_STATUS).select(OUTLINE_COLUMNS)
    # stored for reports only: aggregate_only documents counted, never named
    withheld = aggregate_documents(store, [target_version, *doc_diffs])
    radius = withhold_documents(blast_radius(outline, list(doc_diffs.values()), target_version), withheld)
    return CitationCheck(
        target_version,
        outline,
        radius,
        out.path,
        write_parquet(radius, BLAST_RADIUS, store.layout.blast_radius_file(target_version)),
    )
