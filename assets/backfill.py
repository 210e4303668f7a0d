"""The backfill job: a corpus version per release tag of a git repository (parsers.backfill), each added as a
corpus_version partition with its documents and chunks recorded as materialized, so the downstream assets (diff,
citation status, verification) can be run for any past release."""

from typing import TYPE_CHECKING

import dagster as dg

from assets.corpus import CHUNKS, DOCUMENTS
from assets.partitions import CORPUS_VERSIONS
from assets.resources import STORE_WRITER_POOL, STORE_WRITER_TAG, IngestResource, StoreResource

if TYPE_CHECKING:
    from parsers.ingest import IngestResult


class BackfillConfig(dg.Config):
    repository: str  # a local clone or a bare repository
    refs: str  # glob of the tags, e.g. "v*"


@dg.op(
    pool=STORE_WRITER_POOL,
    description="A corpus version per tag of the repository matching refs, named after it, oldest commit first; "
    "existing versions are skipped, unchanged documents reused.",
)
def backfill_tags(
    context: dg.OpExecutionContext, config: BackfillConfig, store: StoreResource, ingest: IngestResource
) -> dg.Output:
    from parsers.backfill import iter_backfill

    corpus = store.corpus_store()
    outcomes: dict[str, str] = {}
    for done in iter_backfill(config.repository, corpus, config.refs, ingest.parse_config()):
        tag, result = done.tag.name, done.result
        if result is None or result.created:  # the tag's version: made now, or by an earlier backfill
            context.instance.add_dynamic_partitions(CORPUS_VERSIONS, [tag])
        if result is None:
            outcomes[tag] = "exists"
        elif result.created:
            outcomes[tag] = "created"
            _record_materialized(context, result.shared(), done.tag.commit)
        else:
            outcomes[tag] = f"equals {result.equals}"
        context.log.info(f"event=backfilled tag={tag} commit={done.tag.commit} outcome={outcomes[tag]!r}")
    return dg.Output(None, metadata={"repository": config.repository, "refs": config.refs, "tags": outcomes})


def _record_materialized(context: dg.OpExecutionContext, result: "IngestResult", commit: str) -> None:
    """The new version's documents and chunks as materializations of its partition, as ingested_corpus gives."""
    manifest = result.manifest
    common = {"corpus_version": manifest.name, "parent": manifest.parent or "", "commit": commit}
    documents: dict[str, str | int | dg.MetadataValue] = {
        **common,
        "n_documents": manifest.n_documents,
        "n_parsed": result.n_parsed,
        "n_reused": result.n_reused,
        "n_removed": result.n_removed,
        "n_quarantined": result.n_quarantined,
        "quarantined": dg.MetadataValue.json({e.source_path: f"{e.stage}: {e.reason}" for e in result.errors}),
    }
    context.log_event(dg.AssetMaterialization(DOCUMENTS, partition=manifest.name, metadata=documents))
    context.log_event(
        dg.AssetMaterialization(CHUNKS, partition=manifest.name, metadata={**common, "n_chunks": manifest.n_chunks})
    )


@dg.job(
    name="citekeeper_backfill",
    tags={STORE_WRITER_TAG: "1"},
    description="Backfill corpus versions from a git repository's tags (run config: repository, refs).",
)
def backfill_job():
    backfill_tags()
