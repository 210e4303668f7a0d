"""Ingest assets: documents and chunks of a corpus version (one partition per version), written by one
multi-asset in one store commit and read back by blocking checks; one store writer at a time (docs/dagster.md)."""

import dagster as dg

from assets.partitions import corpus_versions
from assets.resources import STORE_WRITER_POOL, IngestResource, StoreResource
from assets.table_metadata import table_metadata
from citekeeper.integrity import duplicate_chunk_ids, mismatched_text_hashes, misplaced_offsets

DOCUMENTS = dg.AssetKey("documents")
CHUNKS = dg.AssetKey("chunks")
MAX_LISTED = 20  # offending rows shown in check metadata


@dg.multi_asset(
    specs=[
        dg.AssetSpec(DOCUMENTS, description="Documents of a corpus version, with their canonical text."),
        dg.AssetSpec(CHUNKS, description="Locatable chunks with stable IDs of a corpus version."),
    ],
    partitions_def=corpus_versions,
    pool=STORE_WRITER_POOL,
    group_name="ingest",
)
def ingested_corpus(context: dg.AssetExecutionContext, store: StoreResource, ingest: IngestResource):
    """Ingest the source directory as the corpus version named by the partition key."""
    from parsers.ingest import ingest as ingest_tree

    version = context.partition_key
    corpus = store.corpus_store()
    result = ingest_tree(ingest.source_dir, corpus, version=version, config=ingest.parse_config()).shared()
    fail_if_unchanged(result, ingest, version)
    manifest = result.manifest
    common: dict[str, str | bool] = {
        "corpus_version": manifest.name,
        "parent": manifest.parent or "",
        "created": result.created,
        "corpus_hash": manifest.corpus_hash,
        "store_dir": str(corpus.root),
        "lance_uri": corpus.lance_uri,
        "chunks_parquet": str(corpus.parquet_path("chunks", manifest.name)),
    }
    quarantined = {e.source_path: f"{e.stage}: {e.reason}" for e in result.errors}
    context.log.info(
        f"event=ingested version={manifest.name} created={result.created} parsed={result.n_parsed} "
        f"reused={result.n_reused} removed={result.n_removed} skipped={result.n_skipped} "
        f"no_text={len(result.no_text)} quarantined={result.n_quarantined}"
    )
    for error in result.errors:
        context.log.warning(
            f"event=quarantined version={manifest.name} path={error.source_path!r} "
            f"stage={error.stage} reason={error.reason!r}"
        )
    yield dg.MaterializeResult(
        asset_key=DOCUMENTS,
        metadata={
            **common,
            "n_documents": manifest.n_documents,
            "n_parsed": result.n_parsed,
            "n_reused": result.n_reused,
            "reparse_reason": result.reparse_reason or "",
            "n_removed": result.n_removed,
            "removed_doc_ids": dg.MetadataValue.json(result.removed_doc_ids),
            "n_skipped": result.n_skipped,
            "no_text": dg.MetadataValue.json(result.no_text),
            "n_quarantined": result.n_quarantined,
            "quarantined": dg.MetadataValue.json(quarantined),
            **{f"{step}_seconds": round(seconds, 3) for step, seconds in result.durations_s.items()},
        },
    )
    yield dg.MaterializeResult(asset_key=CHUNKS, metadata={**common, "n_chunks": manifest.n_chunks})


def fail_if_unchanged(result, ingest: IngestResource, version: str) -> None:
    """An ingest or commit that created no version `version` because the tree equals an earlier one fails."""
    if not result.created and result.equals != version:
        raise dg.Failure(
            f"source tree {ingest.source_dir} is unchanged since corpus version {result.equals}; "
            f"no version {version!r} was created. Materialize partition {result.equals!r} instead.",
        )


def _check_result(check_name: str, offending, what: str) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        check_name=check_name,
        asset_key=CHUNKS,
        passed=offending.height == 0,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            f"n_{what}": offending.height,
            what: table_metadata(offending.head(MAX_LISTED)),
        },
    )


def _check_spec(name: str, description: str, **kwargs) -> dg.AssetCheckSpec:
    return dg.AssetCheckSpec(
        name, asset=CHUNKS, blocking=True, partitions_def=corpus_versions, description=description, **kwargs
    )


@dg.multi_asset_check(
    specs=[
        _check_spec("chunk_ids_unique", "Every chunk_id occurs once within the corpus version."),
        _check_spec("text_hash_matches_text", "text_hash is sha256 of the chunk text."),
        _check_spec(
            "offsets_reproduce_text",
            "documents.text[start_char:end_char] reproduces every chunk's text.",
            additional_deps=[DOCUMENTS],
        ),
    ],
)
def chunk_integrity_checks(context: dg.AssetCheckExecutionContext, store: StoreResource):
    """The committed version read back once (its text is the costly column) and judged three ways."""
    corpus = store.corpus_store()
    chunks = corpus.read_chunks(
        context.partition_key, columns=["chunk_id", "doc_id", "start_char", "end_char", "text", "text_hash"]
    )
    documents = corpus.read_documents(context.partition_key, columns=["doc_id", "text"])
    yield _check_result("chunk_ids_unique", duplicate_chunk_ids(chunks), "duplicate_chunk_ids")
    yield _check_result("text_hash_matches_text", mismatched_text_hashes(chunks), "mismatched_chunks")
    yield _check_result("offsets_reproduce_text", misplaced_offsets(chunks, documents), "misplaced_chunks")
