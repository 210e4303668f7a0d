"""Sharded ingest: static document shards x dynamic corpus versions. Each shard is staged without the writer lock,
so all run at once, then one commit per version merges them under it (docs/production.md); `sharded_ingest(n)`
builds the assets and ops for n shards."""

import warnings
from dataclasses import dataclass

import dagster as dg

from assets.corpus import fail_if_unchanged
from assets.partitions import corpus_versions
from assets.resources import STORE_WRITER_POOL, IngestResource, StoreResource

SHARD_GROUP = "ingest_shards"
STAGE = dg.AssetKey("ingest_shard_stage")
COMMIT = dg.AssetKey("ingest_shard_commit")

with warnings.catch_warnings():  # the mapping is marked beta; it is the documented way to fan shards in
    warnings.simplefilter("ignore", dg.BetaWarning)
    version_of_shard = dg.MultiToSingleDimensionPartitionMapping("corpus_version")


def shard_x_version(n_shards: int) -> dg.MultiPartitionsDefinition:
    doc_shards = dg.StaticPartitionsDefinition([str(i) for i in range(n_shards)])
    return dg.MultiPartitionsDefinition({"corpus_version": corpus_versions, "doc_shard": doc_shards})


def shard_partition_key(version: str, index: int) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"corpus_version": version, "doc_shard": str(index)})


def stage_shard(
    log: dg.DagsterLogManager, store: StoreResource, ingest: IngestResource, version: str, index: int, n_shards: int
) -> dict:
    """Stage shard `index` of `n_shards` of `version`; the materialization metadata of its partition."""
    from parsers.ingest import Shard, stage

    shard = Shard(index, n_shards)
    result = stage(ingest.source_dir, store.corpus_store(), version, shard=shard, config=ingest.parse_config())
    log.info(
        f"event=shard_staged version={version} shard={shard.index}/{shard.count} "
        f"parsed={result.n_parsed} reused={result.n_reused} skipped={result.n_skipped} "
        f"quarantined={len(result.errors)}"
    )
    return {
        "corpus_version": version,
        "shard": f"{shard.index} of {shard.count}",
        "parent": result.parent or "",
        "n_parsed": result.n_parsed,
        "n_reused": result.n_reused,
        "n_skipped": result.n_skipped,
        "n_quarantined": len(result.errors),
        "staged_path": dg.MetadataValue.path(str(result.path)),
    }


def commit_shards(
    log: dg.DagsterLogManager, store: StoreResource, ingest: IngestResource, version: str, n_shards: int
) -> dict:
    """Commit the `n_shards` staged shards of `version`; the materialization metadata of its partition."""
    from parsers.ingest import commit

    result = commit(store.corpus_store(), version, n_shards=n_shards).shared()
    fail_if_unchanged(result, ingest, version)
    manifest = result.manifest
    log.info(
        f"event=shards_committed version={manifest.name} created={result.created} "
        f"shards={n_shards} chunks={manifest.n_chunks}"
    )
    return {
        "corpus_version": manifest.name,
        "created": result.created,
        "n_shards": n_shards,
        "n_documents": manifest.n_documents,
        "n_chunks": manifest.n_chunks,
        "n_parsed": result.n_parsed,
        "n_reused": result.n_reused,
        "n_skipped": result.n_skipped,
        "no_text": dg.MetadataValue.json(result.no_text),
        "n_quarantined": result.n_quarantined,
        "commit_seconds": round(result.durations_s.get("commit", 0.0), 3),
    }


@dataclass(frozen=True)
class ShardedIngest:
    """The shard assets, and the ops of the one run that stages every shard of a version then commits."""

    partitions: dg.MultiPartitionsDefinition
    assets: list[dg.AssetsDefinition]
    stage_ops: list[dg.OpDefinition]
    commit_op: dg.OpDefinition


def sharded_ingest(n_shards: int) -> ShardedIngest:
    """The shard assets and ops for `n_shards` shards (CitekeeperSettings.ingest_shards): shard i of a version holds
    the files whose source_path hash falls in it, and the commit equals a single-process ingest."""
    partitions = shard_x_version(n_shards)

    @dg.asset(key=STAGE, partitions_def=partitions, group_name=SHARD_GROUP)
    def ingest_shard_stage(
        context: dg.AssetExecutionContext, store: StoreResource, ingest: IngestResource
    ) -> dg.MaterializeResult:
        """Parse one document shard of a corpus version into the staging area (nothing committed yet)."""
        keys = context.partition_key.keys_by_dimension
        return dg.MaterializeResult(
            metadata=stage_shard(context.log, store, ingest, keys["corpus_version"], int(keys["doc_shard"]), n_shards)
        )

    @dg.asset(
        key=COMMIT,
        partitions_def=corpus_versions,
        group_name=SHARD_GROUP,
        pool=STORE_WRITER_POOL,
        deps=[dg.AssetDep(STAGE, partition_mapping=version_of_shard)],
    )
    def ingest_shard_commit(
        context: dg.AssetExecutionContext, store: StoreResource, ingest: IngestResource
    ) -> dg.MaterializeResult:
        """Merge all staged shards of a corpus version into one committed version, under the writer lock."""
        return dg.MaterializeResult(metadata=commit_shards(context.log, store, ingest, context.partition_key, n_shards))

    @dg.op(
        ins={f"shard_{index}": dg.In(dg.Nothing) for index in range(n_shards)},
        pool=STORE_WRITER_POOL,
        description="Commit the staged shards: the partition ingest_shard_commit[version].",
    )
    def commit_doc_shards(context: dg.OpExecutionContext, store: StoreResource, ingest: IngestResource) -> None:
        version = context.partition_key
        metadata = commit_shards(context.log, store, ingest, version, n_shards)
        context.log_event(dg.AssetMaterialization(COMMIT, partition=version, metadata=metadata))

    return ShardedIngest(
        partitions,
        [ingest_shard_stage, ingest_shard_commit],
        [_stage_op(index, n_shards) for index in range(n_shards)],
        commit_doc_shards,
    )


def _stage_op(index: int, n_shards: int) -> dg.OpDefinition:
    @dg.op(
        name=f"stage_doc_shard_{index}",
        out=dg.Out(dg.Nothing),
        description=f"Stage doc_shard {index} of {n_shards}: the partition ingest_shard_stage[version|{index}].",
    )
    def stage_doc_shard(context: dg.OpExecutionContext, store: StoreResource, ingest: IngestResource) -> None:
        version = context.partition_key
        metadata = stage_shard(context.log, store, ingest, version, index, n_shards)
        context.log_event(
            dg.AssetMaterialization(STAGE, partition=shard_partition_key(version, index), metadata=metadata)
        )

    return stage_doc_shard
