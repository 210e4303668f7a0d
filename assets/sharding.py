"""Sharded ingest: static document shards x dynamic corpus versions, then one commit per version.

Each `ingest_shard_stage` partition (shard i of n, version v) reads and parses only the files whose stable
source_path hash falls in shard i, into the store's staging area: no lock, so all n run at once (one run,
hence one pod with the K8sRunLauncher, per partition). `ingest_shard_commit` then merges the n staged
shards into corpus version v under the store's writer lock. The committed version is identical to a
single-process ingest (tests/test_sharding.py); the regular `chunks` asset of the same version then
finds the tree already committed and the rest of the pipeline runs as usual.

`ingest_sharded_job` is the backfill of one version's `doc_shard` partitions in a single run: one stage
step per shard, which the multiprocess executor runs in parallel processes (with k8s_job_executor, pods),
then the commit step. Each step records the materialization of the asset partition it made
(`ingest_shard_stage[v|i]`, `ingest_shard_commit[v]`) with the metadata the assets record, so the asset
catalogue shows the same partitions materialized as after n stage runs and one commit run
(tests/test_sharded_backfill.py; bench/bench_shards.py times it).
"""

import os
import warnings

import dagster as dg

from assets.corpus import fail_if_unchanged
from assets.partitions import corpus_versions
from assets.resources import STORE_WRITER_POOL, CitekeeperConfig

# Static: a shard's files are fixed by the hash of their source_path, so n must not change between
# stage and commit. Set CITEKEEPER_INGEST_SHARDS before the code location loads.
N_SHARDS = int(os.environ.get("CITEKEEPER_INGEST_SHARDS", "4"))
SHARD_GROUP = "ingest_shards"

with warnings.catch_warnings():  # the mapping is marked beta; it is the documented way to fan shards in
    warnings.simplefilter("ignore", dg.BetaWarning)
    version_of_shard = dg.MultiToSingleDimensionPartitionMapping("corpus_version")

doc_shards = dg.StaticPartitionsDefinition([str(i) for i in range(N_SHARDS)])
shard_x_version = dg.MultiPartitionsDefinition({"corpus_version": corpus_versions, "doc_shard": doc_shards})


def stage_shard(log: dg.DagsterLogManager, citekeeper: CitekeeperConfig, version: str, index: int) -> dict:
    """Stage shard `index` of N_SHARDS of `version`; the materialization metadata of its partition."""
    from parsers.ingest import Shard, stage

    shard = Shard(index, N_SHARDS)
    result = stage(citekeeper.source_path, citekeeper.corpus_store(), version, shard=shard,
                   config=citekeeper.parse_config())
    log.info(f"event=shard_staged version={version} shard={shard.index}/{shard.count} "
             f"parsed={result.n_parsed} reused={result.n_reused} skipped={result.n_skipped} "
             f"quarantined={len(result.errors)}")
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


def commit_shards(log: dg.DagsterLogManager, citekeeper: CitekeeperConfig, version: str) -> dict:
    """Commit the N_SHARDS staged shards of `version`; the materialization metadata of its partition."""
    from parsers.ingest import commit

    result = commit(citekeeper.corpus_store(), version, n_shards=N_SHARDS)
    fail_if_unchanged(result, citekeeper, version)
    manifest = result.manifest
    log.info(f"event=shards_committed version={manifest.name} created={result.created} "
             f"shards={N_SHARDS} chunks={manifest.n_chunks}")
    return {
        "corpus_version": manifest.name,
        "created": result.created,
        "n_shards": N_SHARDS,
        "n_documents": manifest.n_documents,
        "n_chunks": manifest.n_chunks,
        "n_parsed": result.n_parsed,
        "n_reused": result.n_reused,
        "n_skipped": result.n_skipped,
        "n_quarantined": result.n_quarantined,
        "commit_seconds": round(result.durations_s.get("commit", 0.0), 3),
    }


def shard_partition_key(version: str, index: int) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"corpus_version": version, "doc_shard": str(index)})


@dg.asset(partitions_def=shard_x_version, group_name=SHARD_GROUP)
def ingest_shard_stage(context: dg.AssetExecutionContext, citekeeper: CitekeeperConfig) -> dg.MaterializeResult:
    """Parse one document shard of a corpus version into the staging area (nothing committed yet)."""
    keys = context.partition_key.keys_by_dimension
    return dg.MaterializeResult(metadata=stage_shard(context.log, citekeeper, keys["corpus_version"],
                                                     int(keys["doc_shard"])))


@dg.asset(
    partitions_def=corpus_versions,
    group_name=SHARD_GROUP,
    deps=[dg.AssetDep(ingest_shard_stage, partition_mapping=version_of_shard)],
    pool=STORE_WRITER_POOL,
)
def ingest_shard_commit(context: dg.AssetExecutionContext, citekeeper: CitekeeperConfig) -> dg.MaterializeResult:
    """Merge all staged shards of a corpus version into one committed version, under the writer lock."""
    return dg.MaterializeResult(metadata=commit_shards(context.log, citekeeper, context.partition_key))


# ---------------------------------------------------------------------- all shards of a version in one run


def _stage_op(index: int) -> dg.OpDefinition:
    @dg.op(name=f"stage_doc_shard_{index}", out=dg.Out(dg.Nothing),
           description=f"Stage doc_shard {index} of {N_SHARDS}: the partition ingest_shard_stage[version|{index}].")
    def stage_doc_shard(context: dg.OpExecutionContext, citekeeper: CitekeeperConfig) -> None:
        version = context.partition_key
        metadata = stage_shard(context.log, citekeeper, version, index)
        context.log_event(dg.AssetMaterialization(ingest_shard_stage.key, partition=shard_partition_key(version, index),
                                                  metadata=metadata))

    return stage_doc_shard


STAGE_OPS = [_stage_op(index) for index in range(N_SHARDS)]


@dg.op(ins={f"shard_{index}": dg.In(dg.Nothing) for index in range(N_SHARDS)}, pool=STORE_WRITER_POOL,
       description="Commit the staged shards: the partition ingest_shard_commit[version].")
def commit_doc_shards(context: dg.OpExecutionContext, citekeeper: CitekeeperConfig) -> None:
    version = context.partition_key
    metadata = commit_shards(context.log, citekeeper, version)
    context.log_event(dg.AssetMaterialization(ingest_shard_commit.key, partition=version, metadata=metadata))
