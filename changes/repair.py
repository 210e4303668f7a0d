"""Repair citations: write each affected answer as a new revision, in the form it was registered in, that cites
the target version; one repair kind per citation (schema.REPAIR_KINDS; the rules: docs/answers.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from changes.citation_status import Suggester, check_citations
from changes.statuses import AS_CITED, HOLDING, LOST, NEVER_REPAIRED, REPAIRABLE
from citekeeper.answers.records import ANCHORED_BY_CHUNK, UNANCHORED, citation_entries
from citekeeper.answers.store import AddResult, AnswerSnapshot, AnswerStore
from citekeeper.files import atomic_open, atomic_write_text
from citekeeper.native_locator import LOCATOR_COLUMNS, native_locator
from citekeeper.schema import CITATION_STATUS, REPAIRS
from citekeeper.scope import REDACTED, aggregate_documents, crosses_into_internal, internal, withhold_documents
from citekeeper.store import reading_store
from citekeeper.tables import conform, counts_of, read_parquet, write_parquet

DEFAULT_MIN_SCORE = 0.9
# What repair does to each citation (REPAIRS.repair). A never-repaired status is its own kind.
REPAIR_KINDS = (
    "kept",  # holds where it is cited (valid): left as it is
    "repointed_successor",  # holds elsewhere (relocated or drifted): the successor chunk, the quote unchanged
    "repointed_exact",  # lost (stale or removed): the evidence found verbatim elsewhere
    "repointed_normalised",  # ... found after Unicode / quote / whitespace normalisation
    "repointed_suggestion",  # ... the best fuzzy or search suggestion, scoring at least --min-score
    "unresolved",  # lost with no suggestion good enough: left as it is
    *NEVER_REPAIRED,  # invalid; out_of_scope (the document is outside the answer's audience, never repaired into)
)
REPOINTED = [kind for kind in REPAIR_KINDS if kind.startswith("repointed_")]
TO_SUCCESSOR = [s for s in HOLDING if s in REPAIRABLE]  # re-pointed at their successor chunk
TARGET_CHUNK_COLUMNS = [
    "chunk_id",
    "text",
    "start_char",
    "end_char",
    "text_hash",
    "source_path",
    "access_scope",
    *LOCATOR_COLUMNS,
]


@dataclass(frozen=True)
class RepairResult:
    target_version: str
    repairs: pl.DataFrame  # REPAIRS, one row per current citation
    records: list[dict]  # the repaired revisions, as input records
    applied: AddResult | None
    paths: dict[str, Path]

    def counts(self) -> dict[str, int]:
        return counts_of(self.repairs, "repair", REPAIR_KINDS)

    def summary(self) -> dict:
        return {
            "target_version": self.target_version,
            "n_citations": self.repairs.height,
            "n_answers_repaired": len(self.records),
            "n_needs_review": int(self.repairs["needs_review"].sum()),
            "applied": self.applied is not None,
            "repairs": self.counts(),
        }


# ---------------------------------------------------------------- deciding, one row per citation


def decide(
    status: pl.DataFrame, citations: pl.DataFrame, target_chunks: pl.DataFrame, min_score: float
) -> pl.DataFrame:
    """REPAIRS rows (to_revision and applied unset) for status rows of the current citations.

    `citations` gives claim_index, citation_index and the citation's own text_hash; `target_chunks`
    (TARGET_CHUNK_COLUMNS) has at least the chunks the citations could be re-pointed at.
    """
    suggested = pl.col("suggested_method").is_not_null()
    lost = pl.col("status").is_in(LOST)
    chosen_chunk = (
        pl.when(pl.col("status").is_in(AS_CITED))
        .then("chunk_id")
        .when(pl.col("status").is_in(TO_SUCCESSOR))
        .then("new_chunk_id")
        .when(lost & suggested)
        .then("suggested_chunk_id")
    )
    span_start = pl.when(lost).then("suggested_start_char").otherwise("new_start_char")
    span_end = pl.when(lost).then("suggested_end_char").otherwise("new_end_char")
    target = target_chunks.select(TARGET_CHUNK_COLUMNS).rename(lambda c: f"target_{c}")
    frame = (
        status.join(
            citations.select("citation_id", "claim_index", "citation_index", "cited_text_hash"),
            on="citation_id",
            how="left",
        )
        .with_columns(target_chunk_id=chosen_chunk, span_start=span_start, span_end=span_end)
        .join(target, on="target_chunk_id", how="left")
        .with_columns(
            in_one_chunk=(pl.col("span_start") >= pl.col("target_start_char"))
            & (pl.col("span_end") <= pl.col("target_end_char")),
            whole_chunk=(pl.col("span_start") == pl.col("target_start_char"))
            & (pl.col("span_end") == pl.col("target_end_char")),
            # A public citation is never re-pointed into internal_only text (its quote would carry it out).
            crosses_scope=crosses_into_internal("access_scope", "target_access_scope")
            | pl.col("evidence_internal").fill_null(False),
            internal_text=internal("access_scope", "target_access_scope"),
        )
    )
    frame = frame.with_columns(_repair_kind(min_score)).with_columns(_repair_reason(min_score), *_new_citation())
    return conform(frame.with_columns(applied=pl.lit(False)), REPAIRS)


def _repair_kind(min_score: float) -> pl.Expr:
    lost = pl.col("status").is_in(LOST)
    fits = pl.col("in_one_chunk").fill_null(False)
    method = pl.col("suggested_method")
    return (
        pl.when(pl.col("status").is_in(AS_CITED))
        .then(pl.lit("kept"))
        .when(pl.col("status").is_in(NEVER_REPAIRED))
        .then("status")
        .when(pl.col("crosses_scope"))
        .then(pl.lit("unresolved"))
        .when(pl.col("status").is_in(TO_SUCCESSOR) & fits)
        .then(pl.lit("repointed_successor"))
        .when(lost & fits & (method == "exact"))
        .then(pl.lit("repointed_exact"))
        .when(lost & fits & (method == "normalized"))
        .then(pl.lit("repointed_normalised"))
        .when(lost & fits & (pl.col("suggested_score") >= min_score))
        .then(pl.lit("repointed_suggestion"))
        .otherwise(pl.lit("unresolved"))
        .alias("repair")
    )


def _repair_reason(min_score: float) -> pl.Expr:
    kind, method, score = (
        pl.col("repair"),
        pl.col("suggested_method"),
        pl.col("suggested_score").round(3).cast(pl.String),
    )
    span = pl.format("{} chars {}–{}", "target_source_path", "span_start", "span_end")
    return (
        pl.when(kind == "kept")
        .then(pl.lit("valid: nothing to repair"))
        .when(kind == "repointed_successor")
        .then(pl.format("{}: {}", "status", "reason"))
        .when(kind == "repointed_exact")
        .then(pl.format("evidence found verbatim at {}", span))
        .when(kind == "repointed_normalised")
        .then(pl.format("evidence found after normalisation at {}", span))
        .when(kind == "repointed_suggestion")
        .then(
            pl.format(
                "best suggestion ({}, score {}) at {} meets --min-score {}; needs review",
                method,
                score,
                span,
                pl.lit(min_score),
            )
        )
        .when(kind.is_in(NEVER_REPAIRED))
        .then(pl.format("{} citations are never repaired: {}", "status", "reason"))
        .when(pl.col("crosses_scope"))
        .then(
            pl.format(
                "{}: evidence is now {}",
                "status",
                pl.coalesce("target_access_scope", pl.lit("only in text of a stricter level")),
            )
        )
        .when(method.is_null())
        .then(pl.format("{}: no re-anchoring suggestion", "status"))
        .when(~pl.col("in_one_chunk").fill_null(False))
        .then(pl.format("{}: the evidence found at {} spans more than one chunk", "status", span))
        .otherwise(
            pl.format(
                "{}: best suggestion ({}, score {}) is below --min-score {}", "status", method, score, pl.lit(min_score)
            )
        )
        .alias("reason")
    )


def _new_citation() -> list[pl.Expr]:
    """The citation as repair writes it, and where it was. A re-pointed citation keeps its quote where the quote
    is still verbatim; otherwise (and for a whole-chunk citation now a part of a chunk) it quotes its new span."""
    kind = pl.col("repair")
    repointed = kind.is_in(["kept", *REPOINTED])
    suggestion_used = kind.is_in(["repointed_exact", "repointed_normalised", "repointed_suggestion"])
    keeps_quote = (
        kind.is_in(["kept", "repointed_successor", "repointed_exact", "repointed_normalised"])
        & pl.col("quote").is_not_null()
    )
    span_text = pl.col("target_text").str.slice(
        pl.col("span_start") - pl.col("target_start_char"), pl.col("span_end") - pl.col("span_start")
    )
    new_quote = pl.when(keeps_quote).then("quote").when(~pl.col("whole_chunk")).then(span_text)

    def if_repointed(expr: pl.Expr | str) -> pl.Expr:
        return pl.when(repointed).then(expr)

    return [
        pl.when(suggestion_used).then("suggested_score").alias("score"),
        pl.when(suggestion_used).then("suggested_method").alias("method"),
        (kind == "repointed_suggestion").alias("needs_review"),
        pl.col("chunk_id").alias("old_chunk_id"),
        pl.col("cited_version").alias("old_version"),
        pl.col("source_path").alias("old_source_path"),
        pl.col("quote").alias("old_quote"),
        if_repointed("target_chunk_id").alias("new_chunk_id"),
        pl.when(repointed).then("target_version").otherwise("cited_version").alias("new_version"),
        if_repointed("span_start").alias("new_start_char"),
        if_repointed("span_end").alias("new_end_char"),
        if_repointed(native_locator("target_")).alias("new_locator"),
        if_repointed("target_source_path").alias("new_source_path"),
        if_repointed(new_quote).alias("new_quote"),
        if_repointed(pl.when(pl.col("cited_text_hash").is_not_null()).then("target_text_hash")).alias("new_text_hash"),
        pl.col("revision").alias("from_revision"),
    ]


# ---------------------------------------------------------------- rewriting the input records


def repaired_record(
    record: dict, input_form: str, rows: list[dict], target_version: str, withhold: bool = False
) -> dict:
    """`record`, edited in place, citing `target_version` with the REPAIRS `rows` of its citations applied; with
    `withhold`, the quotes of internal_only evidence replaced by citekeeper.scope.REDACTED (a shared copy)."""
    entries = citation_entries(record, input_form)
    for entry in entries.values():
        entry.pop("repair", None)  # what an earlier repair did no longer applies
    done: set[int] = set()
    for row in rows:
        entry = entries[(row["claim_index"], row["citation_index"])]
        if id(entry) not in done:  # marker form: one reference serves every citation of it
            done.add(id(entry))
            _repair_entry(entry, row, target_version)
            if withhold and row["internal_text"] and "quote" in entry:
                entry["quote"] = REDACTED
    if withhold and "given" in record and any(row["internal_text"] for row in rows):
        record["given"] = REDACTED  # what the answer was given as (an API's response) quotes that evidence too
    record["corpus_version"] = target_version
    kinds = [row["repair"] for row in rows]
    record["repair"] = {
        "against": target_version,
        "from_revision": rows[0]["from_revision"],
        "needs_review": any(row["needs_review"] for row in rows),
        "repairs": {kind: kinds.count(kind) for kind in REPAIR_KINDS if kind in kinds},
    }
    return record


def _repair_entry(entry: dict, row: dict, target_version: str) -> None:
    entry.pop("corpus_version", None)
    if row["new_chunk_id"] is None:  # unresolved or invalid: left as it is, still citing its old version
        entry["corpus_version"] = row["old_version"]
    else:
        entry["chunk_id"] = row["new_chunk_id"]
        entry.pop("anchor", None)  # how registration anchored it: the repair re-pointed it since
        _set_or_drop(entry, "quote", row["new_quote"])
        if "text_hash" in entry:
            _set_or_drop(entry, "text_hash", row["new_text_hash"])
    if row["repair"] == "kept":
        return
    entry["repair"] = {
        "kind": row["repair"],
        "status": row["status"],
        "reason": row["reason"],
        "needs_review": row["needs_review"],
        "old": _locator(row, "old", row["old_version"]),
        "new": _locator(row, "new", target_version) if row["new_chunk_id"] is not None else None,
    }


def _set_or_drop(entry: dict, key: str, value: object) -> None:
    if value is None:
        entry.pop(key, None)
    else:
        entry[key] = value


def _locator(row: dict, side: str, version: str) -> dict:
    return {
        "corpus_version": version,
        "chunk_id": row[f"{side}_chunk_id"],
        "source_path": row[f"{side}_source_path"],
        "start_char": row[f"{side}_start_char"],
        "end_char": row[f"{side}_end_char"],
        "locator": row[f"{side}_locator"],
    }


def repaired_records(
    repairs: pl.DataFrame, answers: AnswerSnapshot, target_version: str, withhold: bool = False
) -> list[dict]:
    """The new revision of every answer with at least one re-pointed citation, ordered by answer_id (`withhold`:
    see repaired_record)."""
    affected = repairs.filter(
        pl.col("answer_id").is_in(repairs.filter(pl.col("repair").is_in(REPOINTED))["answer_id"].implode())
    )
    if affected.is_empty():
        return []
    current = answers.answers().filter(pl.col("answer_id").is_in(affected["answer_id"].unique().implode()))
    # Records whose citations are not the rows one for one (anchored by document): rebuilt from the rows.
    by_document = answers.citations().filter(pl.col("anchored_by").fill_null(ANCHORED_BY_CHUNK) != ANCHORED_BY_CHUNK)[
        "answer_id"
    ]
    needs_rows = current.filter(pl.col("answer_id").is_in(by_document.implode()))["answer_id"]
    rebuilt = _rebuilt_records(answers, needs_rows) if needs_rows.len() else {}
    rows_by_answer: dict[str, list[dict]] = {}
    for row in affected.sort("answer_id", "claim_index", "citation_index").iter_rows(named=True):
        rows_by_answer.setdefault(row["answer_id"], []).append(row)
    records = []
    for answer in current.sort("answer_id").iter_rows(named=True):
        record = rebuilt.get(answer["answer_id"]) or json.loads(answer["source_record"])
        record.update(source_model_keys(answer))  # what `answers add --audience` imposed is not in the record
        input_form = "structured" if "claims" in record else "marker"
        records.append(
            repaired_record(record, input_form, rows_by_answer[answer["answer_id"]], target_version, withhold)
        )
    return records


def _rebuilt_records(answers: AnswerSnapshot, answer_ids: pl.Series) -> dict[str, dict]:
    """Input records rebuilt from the tables (record_from_rows)."""
    wanted = pl.col("answer_id").is_in(answer_ids.implode())
    claims = answers.claims().filter(wanted)
    citations = answers.citations().filter(wanted)
    return {
        row["answer_id"]: record_from_rows(
            row,
            claims.filter(pl.col("answer_id") == row["answer_id"]).to_dicts(),
            citations.filter(pl.col("answer_id") == row["answer_id"]).to_dicts(),
        )
        for row in answers.answers().filter(wanted).iter_rows(named=True)
    }


# ---------------------------------------------------------------- against a store


def _positioned_citations(answers: AnswerSnapshot) -> pl.DataFrame:
    """The current citations with their claim's index (a citation's place in its input record)."""
    return answers.citations().join(answers.claims().select("claim_id", "claim_index"), on="claim_id", how="left")


def _target_chunks(store, target_version: str, status: pl.DataFrame) -> pl.DataFrame:
    """The chunks of `target_version` that the judged citations could be re-pointed at."""
    wanted = pl.concat([status["chunk_id"], status["new_chunk_id"], status["suggested_chunk_id"]]).drop_nulls().unique()
    return store.read_chunks(target_version, columns=TARGET_CHUNK_COLUMNS, chunk_ids=wanted.to_list())


def current_status(store, target_version: str, citations: pl.DataFrame, embedding_store=None) -> pl.DataFrame:
    """The stored citation status of `target_version` when it judged exactly the current citations (a `stale`
    run just before; its lost citations re-anchored here if that run did not), else a fresh check. `embedding_store`:
    the search index re-anchoring uses (citekeeper.search_index.EmbeddingStore; None: the store's, default model)."""
    stored = read_parquet(store.layout.citation_status_file(target_version), CITATION_STATUS)
    keys = ["answer_id", "revision", "citation_id"]
    same = (
        stored.height == citations.height
        and stored.select(keys).join(citations.select(keys), on=keys, how="anti").is_empty()
    )
    if same:
        return Suggester(store, target_version, embedding_store)(stored)
    return check_citations(store, target_version, embedding_store=embedding_store).read_status()


def card_repairs(store, target_version: str, status: pl.DataFrame) -> pl.DataFrame:
    """Per citation_id of `status` (the current citations judged against `target_version`), the repair a report card
    shows: the one `repair --apply` made to produce the citation's revision, else the one repair would make now
    (default --min-score). Columns: citation_id, repair, repair_reason, needs_review, repair_locator, repaired_in."""
    citations = _positioned_citations(AnswerStore(store.root).snapshot())
    current = status.join(
        citations.select("citation_id"), on="citation_id", how="semi"
    )  # a repair since may have revised some
    planned = decide(current, citations, _target_chunks(store, target_version, current), DEFAULT_MIN_SCORE).join(
        citations.select("citation_id", "answer_id", "claim_id", "citation_index"),
        on=["answer_id", "claim_id", "citation_index"],
    )
    made = (
        read_parquet(store.layout.repairs_file(target_version), REPAIRS)
        .filter(pl.col("applied"))
        .join(
            citations.select("citation_id", "answer_id", "claim_id", "citation_index", to_revision="revision"),
            on=["answer_id", "claim_id", "citation_index", "to_revision"],
        )
    )
    columns: list[str | pl.Expr] = [
        "citation_id",
        "repair",
        pl.col("reason").alias("repair_reason"),
        "needs_review",
        pl.concat_str(["new_source_path", "new_locator", "new_chunk_id"], separator=" · ", ignore_nulls=True).alias(
            "repair_locator"
        ),
    ]
    return pl.concat(
        [
            made.select(*columns, repaired_in=pl.col("to_revision")),
            planned.join(made, on="citation_id", how="anti").select(*columns, repaired_in=pl.lit(None, pl.Int32)),
        ]
    )


@reading_store  # gc waits until it has read the versions and written its outputs
def repair_citations(
    store,
    target_version: str,
    min_score: float = DEFAULT_MIN_SCORE,
    out: Path | None = None,
    apply: bool = False,
    include_internal_text: bool = False,
    embedding_store=None,
) -> RepairResult:
    """Repair every current citation against `target_version`; write the repaired revisions (JSONL, to the
    store's repairs dir and a shared copy to `out`, internal_only quotes withheld there unless
    `include_internal_text`), the REPAIRS table and a summary. With `apply`, register the revisions. `embedding_store`:
    as current_status takes it."""
    store.manifest(target_version)  # UnknownVersion, listing the known versions
    layout = store.layout
    answers = AnswerStore(store.root).snapshot()
    citations = _positioned_citations(answers)
    status = current_status(store, target_version, citations, embedding_store)
    carried = _registered_before(read_parquet(layout.repairs_file(target_version), REPAIRS), answers)
    decided = decide(status, citations, _target_chunks(store, target_version, status), min_score)
    repairs = decided.join(carried.select("answer_id").unique(), on="answer_id", how="anti")
    records = repaired_records(repairs, answers, target_version)
    stored_jsonl = _write_jsonl(records, layout.repaired_answers_file(target_version))
    paths = {"jsonl": stored_jsonl}
    if out is not None:
        withheld = withhold_documents(repairs, aggregate_documents(store))  # aggregate_only: counted, never named
        shared = (
            records if include_internal_text else repaired_records(withheld, answers, target_version, withhold=True)
        )
        paths["out"] = _write_jsonl(shared, out)
    applied = None
    if apply and records:
        # Recorded before it is registered: a run killed in between finds its revisions by what they were made
        # from (_registered_before), so what was repaired into which revision is never lost.
        write_parquet(pl.concat([carried, repairs]), REPAIRS, layout.repairs_file(target_version))
        revisions = dict(repairs.select("answer_id", "from_revision").unique().iter_rows())
        applied = AnswerStore(store.root, corpus=store).add(stored_jsonl, expected_revisions=revisions)
        to_revision = pl.DataFrame(
            applied.revised, schema={"answer_id": pl.String, "to_revision": pl.Int32}, orient="row"
        )
        repairs = (
            repairs.drop("to_revision")
            .join(to_revision, on="answer_id", how="left")
            .with_columns(applied=pl.col("to_revision").is_not_null())
        )
    repairs = pl.concat([carried, conform(repairs, REPAIRS)]).sort("answer_id", "claim_index", "citation_index")
    paths["repairs"] = write_parquet(repairs, REPAIRS, layout.repairs_file(target_version))
    result = RepairResult(target_version, repairs, records, applied, paths)
    paths["summary"] = layout.repair_summary_file(target_version)
    atomic_write_text(paths["summary"], json.dumps(result.summary(), indent=1) + "\n")
    return result


def _registered_before(previous: pl.DataFrame, answers: AnswerSnapshot) -> pl.DataFrame:
    """The rows of the last repair against this version whose answer's current revision is that repair's result
    (made from the revision it repaired, and the one it recorded, if it got to record it): applied, to that
    revision. They stand for those answers in this run, which would otherwise find them all `kept`."""
    current = answers.answers().select("answer_id", pl.col("revision").alias("current"), "repaired_from")
    made = previous.join(current, on="answer_id").filter(
        (pl.col("repaired_from") == pl.col("from_revision"))
        & (pl.col("to_revision").is_null() | (pl.col("to_revision") == pl.col("current")))
    )
    return conform(made.with_columns(to_revision="current", applied=pl.lit(True)), REPAIRS)


def _write_jsonl(records: list[dict], path: Path) -> Path:
    with atomic_open(path) as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return Path(path)


def record_from_rows(answer: dict, claims: list[dict], citations: list[dict]) -> dict:
    """The input record of an answer whose citations were anchored by document (one given citation may be several
    chunk citations, so the record as given no longer maps onto them), rebuilt from one revision's ANSWERS, CLAIMS
    and CITATIONS rows: structured, each citation naming its chunk and how it was anchored, the record as given
    (source_record) kept under `given`."""
    record = {
        key: answer[key] for key in ("answer_id", "question", "answer", "corpus_version") if answer[key] is not None
    }
    if answer["created_at"] is not None:
        record["created_at"] = answer["created_at"].isoformat()
    record.update(source_model_keys(answer))
    by_claim: dict[str, list[dict]] = {}
    for row in sorted(citations, key=lambda row: row["citation_index"]):
        by_claim.setdefault(row["claim_id"], []).append(_citation_record(row, answer))
    record["claims"] = [
        {
            **({"claim_id": claim["source_claim_id"]} if claim["source_claim_id"] is not None else {}),
            "text": claim["text"],
            "citations": by_claim.get(claim["claim_id"], []),
        }
        for claim in sorted(claims, key=lambda row: row["claim_index"])
    ]
    record["given"] = json.loads(answer["source_record"])
    return record


def source_model_keys(answer: dict) -> dict:
    """The input keys of an ANSWERS row's audience, about_version and scope labels, those it has (a repaired
    revision keeps them: one without its audience would be wider than the answer)."""
    keys = {"audience": answer["audience"], "about_version": answer["about_version"], "scope": answer["scope_labels"]}
    return {key: value for key, value in keys.items() if value is not None}


def _citation_record(row: dict, answer: dict) -> dict:
    if row["chunk_id"] is None and row["cited_doc_id"] is None and row["cited_source_path"] is None:
        # it named no document (an unmapped source): kept unanchored, with why
        citation = {"quote": row["quote"], "anchor": {"method": UNANCHORED, "note": row["anchor_note"]}}
    elif row["chunk_id"] is None:  # unanchored: as given, anchored again when re-added
        citation = {"doc_id": row["cited_doc_id"], "source_path": row["cited_source_path"], "quote": row["quote"]}
    else:
        citation = {"chunk_id": row["chunk_id"], "quote": row["quote"], "text_hash": row["cited_text_hash"]}
    if row["corpus_version"] != answer["corpus_version"]:
        citation["corpus_version"] = row["corpus_version"]
    if row["retrieved_at"] not in (None, answer["created_at"]):  # else read back as the created_at it defaults to
        citation["retrieved_at"] = row["retrieved_at"].isoformat()
    if row["chunk_id"] is not None and row["anchored_by"] not in (None, ANCHORED_BY_CHUNK):
        anchor = {"method": row["anchored_by"], "score": row["anchor_score"], "given_index": row["given_index"]}
        citation["anchor"] = {key: value for key, value in anchor.items() if value is not None}
    return {key: value for key, value in citation.items() if value is not None}
