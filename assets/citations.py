"""Diff, citation-status, repair and stale-report assets (one partition per corpus version): thin Dagster assets
over changes/ and reports/ that read and write the store under <store>/diffs/, <store>/citations/ and
<store>/repairs/ (the files: docs/answers.md)."""

import time

import dagster as dg
import polars as pl

from assets.corpus import CHUNKS, DOCUMENTS
from assets.partitions import corpus_versions
from assets.resources import AnswersResource, StoreResource, VerifierResource
from assets.table_metadata import table_metadata
from changes.repair import DEFAULT_MIN_SCORE

GROUP = "citations"


def _seconds_since(started: float) -> float:
    return round(time.perf_counter() - started, 3)


def _count_metadata(counts: dict[str, int], prefix: str) -> dict[str, int]:
    return {f"{prefix}{name}": int(n) for name, n in counts.items()}


@dg.asset(partitions_def=corpus_versions, deps=[DOCUMENTS, CHUNKS], group_name=GROUP)
def chunk_diff(context: dg.AssetExecutionContext, store: StoreResource) -> dg.MaterializeResult:
    """Chunk- and document-level diff of a corpus version against its parent version."""
    from changes.diff import diff_versions

    started = time.perf_counter()
    corpus = store.corpus_store()
    version = context.partition_key
    parent = corpus.manifest(version).parent
    if parent is None or not corpus.has_version(parent):
        note = "first corpus version" if parent is None else f"parent {parent} was pruned by gc"
        return dg.MaterializeResult(
            metadata={"parent": parent or "", "note": f"{note}: nothing to diff", "duration_s": _seconds_since(started)}
        )
    diff = diff_versions(corpus, parent, version).shared(corpus)
    changed = diff.changed_docs().select("change", "old_source_path", "new_source_path")
    return dg.MaterializeResult(
        metadata={
            "parent": parent,
            "path": str(corpus.layout.diff_dir(parent, version)),
            **_count_metadata(diff.doc_counts(), "documents_"),
            **_count_metadata(diff.chunk_counts(), "chunks_"),
            "changed_documents": table_metadata(changed),
            "duration_s": _seconds_since(started),
        }
    )


@dg.asset(partitions_def=corpus_versions, deps=[chunk_diff], group_name=GROUP)
def citation_status(
    context: dg.AssetExecutionContext, store: StoreResource, answers: AnswersResource, verifier: VerifierResource
) -> dg.MaterializeResult:
    """One status per registered citation against this version, re-anchoring suggestions, blast radius.

    Registers `answers_path` (resource config) first when it is set; bad lines are logged, not fatal.
    """
    from changes.citation_status import check_citations
    from citekeeper.answers.store import AnswerStore

    started = time.perf_counter()
    corpus = store.corpus_store()
    registered = {}
    if answers.answers_path:
        answer_store = AnswerStore(corpus.root, limits=answers.limits(), corpus=corpus)
        audience = tuple(answers.audience) if answers.audience is not None else None
        added = answer_store.add(answers.answers_path, response_format=answers.answers_format, audience=audience)
        for error in [*added.errors, *added.unanchored]:
            context.log.warning(f"event=answer_input_error file={answers.answers_path!r} error={str(error)!r}")
        registered = {
            "answers_registered": added.n_registered,
            "answer_input_errors": len(added.errors),
            "citations_of_missing_documents": len(added.unanchored),
        }
    check = check_citations(corpus, context.partition_key, embedding_store=verifier.search_index(corpus.root))
    reanchored = check.outline.filter(pl.col("suggested_chunk_id").is_not_null()).height
    return dg.MaterializeResult(
        metadata={
            **registered,
            "n_citations": check.outline.height,
            **_count_metadata(check.counts(), "status_"),
            "reanchored": reanchored,
            "path": str(check.status_path),
            "blast_radius": table_metadata(check.blast_radius.head(10).drop("target_version")),
            "duration_s": _seconds_since(started),
        }
    )


class RepairConfig(dg.Config):
    """Run config of repaired_answers; `apply` registers the repaired revisions (off: the files only)."""

    apply: bool = False
    min_score: float = DEFAULT_MIN_SCORE


@dg.asset(partitions_def=corpus_versions, deps=[citation_status], group_name=GROUP)
def repaired_answers(
    context: dg.AssetExecutionContext, config: RepairConfig, store: StoreResource, verifier: VerifierResource
) -> dg.MaterializeResult:
    """Every answer with a citation that can be re-pointed, as a new revision citing this version (JSONL and the
    per-citation repairs as Parquet); registered only when the run config says `apply: true`."""
    from changes.repair import repair_citations
    from citekeeper.scope import aggregate_documents, withhold_documents

    started = time.perf_counter()
    corpus = store.corpus_store()
    result = repair_citations(
        corpus,
        context.partition_key,
        min_score=config.min_score,
        apply=config.apply,
        embedding_store=verifier.search_index(corpus.root),
    )
    if result.applied is not None:
        for error in result.applied.errors:
            context.log.warning(f"event=repair_not_applied error={str(error)!r}")
    summary = result.summary()
    needing_review = withhold_documents(
        result.repairs.filter(pl.col("needs_review")), aggregate_documents(corpus)
    ).select("answer_id", "claim_id", "reason")
    return dg.MaterializeResult(
        metadata={
            "applied": summary["applied"],
            "revisions_registered": len(result.applied.revised) if result.applied is not None else 0,
            "n_answers_repaired": summary["n_answers_repaired"],
            "n_needs_review": summary["n_needs_review"],
            **_count_metadata(summary["repairs"], "repair_"),
            "path": str(result.paths["repairs"]),
            "jsonl": str(result.paths["jsonl"]),
            "needs_review": table_metadata(needing_review.head(20)),
            "duration_s": _seconds_since(started),
        }
    )


@dg.asset(partitions_def=corpus_versions, deps=[citation_status, repaired_answers], group_name=GROUP)
def stale_report(context: dg.AssetExecutionContext, store: StoreResource) -> dg.MaterializeResult:
    """Self-contained HTML report of the citation status of this version."""
    from changes.report_inputs import report_inputs
    from citekeeper.schema import BLAST_RADIUS, CITATION_STATUS
    from citekeeper.tables import read_parquet
    from reports.html import write_report
    from reports.terminal import terminal_summary

    started = time.perf_counter()
    corpus = store.corpus_store()
    version = context.partition_key
    status = read_parquet(corpus.layout.citation_status_file(version), CITATION_STATUS)
    radius = read_parquet(corpus.layout.blast_radius_file(version), BLAST_RADIUS)
    shown = report_inputs(corpus, version, status)
    path = write_report(
        corpus.layout.report_file(version),
        version,
        blast_radius=radius,
        status=shown.status,
        answers=shown.answers,
        claims=shown.claims,
        versions=shown.versions,
        status_counts=shown.status_counts,
        history=shown.history,
    )
    summary = terminal_summary(status, radius, version)
    context.log.info(summary)
    return dg.MaterializeResult(
        metadata={
            "path": str(path),
            "summary": dg.MetadataValue.md(f"```\n{summary}\n```"),
            "duration_s": _seconds_since(started),
        }
    )


@dg.asset_check(
    asset=citation_status,
    partitions_def=corpus_versions,
    description="No registered citation references a chunk that never existed in any corpus version.",
)
def citations_reference_existing_chunks(store: StoreResource) -> dg.AssetCheckResult:
    from citekeeper.answers.store import AnswerStore

    corpus = store.corpus_store()
    citations = AnswerStore(corpus.root).citations().select("answer_id", "citation_id", "chunk_id", "corpus_version")
    anchored = citations.drop_nulls("chunk_id")  # one registration could not anchor names no chunk: invalid, no phantom
    cited = anchored["chunk_id"].unique().to_list()  # only these are read, from each version
    known = [corpus.read_chunks(v.name, columns=["chunk_id"], chunk_ids=cited) for v in corpus.versions()]
    ever = pl.concat(known).unique() if known else pl.DataFrame(schema={"chunk_id": pl.String})
    phantom = anchored.join(ever, on="chunk_id", how="anti")
    return dg.AssetCheckResult(
        passed=phantom.height == 0,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "n_phantom_citations": phantom.height,
            "n_citations": citations.height,
            "phantom_citations": table_metadata(phantom.head(20)),
        },
    )
