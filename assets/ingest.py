"""Ingest assets: documents and chunks of a corpus version (one partition per version).

One multi-asset does the ingest (the store writes both tables in one commit); blocking checks then read
the committed version back from the store. The op runs in the `citekeeper_store_writer` pool and carries
the `citekeeper/store-writer` tag, so only one writer runs at a time (see dagster.yaml); the store's file
lock still guards against writers outside Dagster.
"""

import warnings

import dagster as dg

from assets.partitions import corpus_versions
from citekeeper.store import duplicate_chunk_ids, mismatched_text_hashes, misplaced_offsets
from pipelines.resources import CitekeeperConfig

DOCUMENTS = dg.AssetKey("documents")
CHUNKS = dg.AssetKey("chunks")
STORE_WRITER_POOL = "citekeeper_store_writer"
STORE_WRITER_TAGS = {"citekeeper/store-writer": "true"}
MAX_LISTED = 20  # offending rows shown in check metadata
# Partitioned asset checks are a Dagster preview feature; they are what lets a check judge one version.
warnings.filterwarnings("ignore", message="Specifying a partitions_def on an AssetCheckSpec", category=dg.PreviewWarning)


@dg.multi_asset(
    specs=[
        dg.AssetSpec(DOCUMENTS, description="Documents of a corpus version, with their canonical text."),
        dg.AssetSpec(CHUNKS, description="Locatable chunks with stable IDs of a corpus version."),
    ],
    partitions_def=corpus_versions,
    pool=STORE_WRITER_POOL,
    op_tags=STORE_WRITER_TAGS,
    group_name="ingest",
)
def ingested_corpus(context: dg.AssetExecutionContext, citekeeper: CitekeeperConfig):
    """Ingest the source directory as the corpus version named by the partition key."""
    from citekeeper.ingest import ingest

    version = context.partition_key
    store = citekeeper.corpus_store()
    result = ingest(citekeeper.source_path, store, version=version,
                    config=citekeeper.parse_config())
    if not result.created and result.equals != version:
        raise dg.Failure(
            f"source tree {citekeeper.source_dir} is unchanged since corpus version {result.equals}; "
            f"no version {version!r} was created. Materialize partition {result.equals!r} instead.",
        )
    manifest = result.manifest
    common = {
        "corpus_version": manifest.name,
        "parent": manifest.parent or "",
        "created": result.created,
        "corpus_hash": manifest.corpus_hash,
        "store_dir": str(store.root),
        "lance_uri": store.lance_uri,
        "chunks_parquet": str(store.parquet_path("chunks", manifest.name)),
    }
    quarantined = {e.source_path: f"{e.stage}: {e.reason}" for e in result.errors}
    context.log.info(f"event=ingested version={manifest.name} created={result.created} parsed={result.n_parsed} "
                     f"reused={result.n_reused} removed={result.n_removed} quarantined={result.n_quarantined}")
    for error in result.errors:
        context.log.warning(f"event=quarantined version={manifest.name} path={error.source_path!r} "
                            f"stage={error.stage} reason={error.reason!r}")
    yield dg.MaterializeResult(
        asset_key=DOCUMENTS,
        metadata={
            **common,
            "n_documents": manifest.n_documents,
            "n_parsed": result.n_parsed,
            "n_reused": result.n_reused,
            "n_removed": result.n_removed,
            "removed_doc_ids": dg.MetadataValue.json(result.removed_doc_ids),
            "n_quarantined": result.n_quarantined,
            "quarantined": dg.MetadataValue.json(quarantined),
            **{f"{step}_seconds": round(seconds, 3) for step, seconds in result.durations_s.items()},
        },
    )
    yield dg.MaterializeResult(asset_key=CHUNKS, metadata={**common, "n_chunks": manifest.n_chunks})


def _check_result(offending, what: str) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=offending.height == 0,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            f"n_{what}": offending.height,
            what: dg.MetadataValue.md(str(offending.head(MAX_LISTED))) if offending.height else "none",
        },
    )


@dg.asset_check(asset=CHUNKS, blocking=True, partitions_def=corpus_versions,
                description="Every chunk_id occurs once within the corpus version.")
def chunk_ids_unique(context: dg.AssetCheckExecutionContext, citekeeper: CitekeeperConfig) -> dg.AssetCheckResult:
    chunks = citekeeper.corpus_store().read_chunks(context.partition_key, columns=["chunk_id"])
    return _check_result(duplicate_chunk_ids(chunks), "duplicate_chunk_ids")


@dg.asset_check(asset=CHUNKS, blocking=True, partitions_def=corpus_versions,
                description="text_hash is sha256 of the chunk text.")
def text_hash_matches_text(context: dg.AssetCheckExecutionContext,
                           citekeeper: CitekeeperConfig) -> dg.AssetCheckResult:
    chunks = citekeeper.corpus_store().read_chunks(
        context.partition_key, columns=["chunk_id", "text", "text_hash"]
    )
    return _check_result(mismatched_text_hashes(chunks), "mismatched_chunks")


@dg.asset_check(asset=CHUNKS, blocking=True, partitions_def=corpus_versions, additional_deps=[DOCUMENTS],
                description="documents.text[start_char:end_char] reproduces every chunk's text.")
def offsets_reproduce_text(context: dg.AssetCheckExecutionContext,
                           citekeeper: CitekeeperConfig) -> dg.AssetCheckResult:
    store = citekeeper.corpus_store()
    chunks = store.read_chunks(context.partition_key, columns=["chunk_id", "doc_id", "start_char", "end_char", "text"])
    documents = store.read_documents(context.partition_key, columns=["doc_id", "text"])
    return _check_result(misplaced_offsets(chunks, documents), "misplaced_chunks")
