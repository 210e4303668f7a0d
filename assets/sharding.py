"""Sharded ingest: static document shards x dynamic corpus versions, then one commit per version.

Each `ingest_shard_stage` partition (shard i of n, version v) reads and parses only the files whose stable
source_path hash falls in shard i, into the store's staging area: no lock, so all n run at once (one run,
hence one pod with the K8sRunLauncher, per partition). `ingest_shard_commit` then merges the n staged
shards into corpus version v under the store's writer lock. The committed version is identical to a
single-process ingest (tests/test_sharding.py); the regular `chunks` asset of the same version then
finds the tree already committed and the rest of the pipeline runs as usual.
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


@dg.asset(partitions_def=shard_x_version, group_name=SHARD_GROUP)
def ingest_shard_stage(context: dg.AssetExecutionContext, citekeeper: CitekeeperConfig) -> dg.MaterializeResult:
    """Parse one document shard of a corpus version into the staging area (nothing committed yet)."""
    from parsers.ingest import Shard, stage

    keys = context.partition_key.keys_by_dimension
    version, shard = keys["corpus_version"], Shard(int(keys["doc_shard"]), N_SHARDS)
    result = stage(citekeeper.source_path, citekeeper.corpus_store(), version, shard=shard,
                   config=citekeeper.parse_config())
    context.log.info(f"event=shard_staged version={version} shard={shard.index}/{shard.count} "
                     f"parsed={result.n_parsed} reused={result.n_reused} skipped={result.n_skipped} "
                     f"quarantined={len(result.errors)}")
    return dg.MaterializeResult(
        metadata={
            "corpus_version": version,
            "shard": f"{shard.index} of {shard.count}",
            "parent": result.parent or "",
            "n_parsed": result.n_parsed,
            "n_reused": result.n_reused,
            "n_skipped": result.n_skipped,
            "n_quarantined": len(result.errors),
            "staged_path": dg.MetadataValue.path(str(result.path)),
        }
    )


@dg.asset(
    partitions_def=corpus_versions,
    group_name=SHARD_GROUP,
    deps=[dg.AssetDep(ingest_shard_stage, partition_mapping=version_of_shard)],
    pool=STORE_WRITER_POOL,
)
def ingest_shard_commit(context: dg.AssetExecutionContext, citekeeper: CitekeeperConfig) -> dg.MaterializeResult:
    """Merge all staged shards of a corpus version into one committed version, under the writer lock."""
    from parsers.ingest import commit

    result = commit(citekeeper.corpus_store(), context.partition_key, n_shards=N_SHARDS)
    fail_if_unchanged(result, citekeeper, context.partition_key)
    manifest = result.manifest
    context.log.info(f"event=shards_committed version={manifest.name} created={result.created} "
                     f"shards={N_SHARDS} chunks={manifest.n_chunks}")
    return dg.MaterializeResult(
        metadata={
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
    )
