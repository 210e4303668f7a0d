"""Every job, schedule and sensor: the per-version pipeline job, nightly reindex, change-driven runs, weekly
retention (off by default), the sharded jobs (`sharded_jobs`), retries, one store writer at a time. Why one
explicit job per version rather than declarative automation: docs/dagster.md."""

from datetime import UTC, datetime

import dagster as dg

from assets.partitions import CORPUS_VERSIONS, corpus_versions
from assets.resources import STORE_WRITER_POOL, STORE_WRITER_TAG, IngestResource, StoreResource
from assets.sharding import COMMIT, SHARD_GROUP, STAGE, ShardedIngest
from assets.verification import merge_shards_op, verify_shard_op
from citekeeper.retention import gc
from parsers.ingest import unchanged_since
from parsers.sources import fingerprint, missing, open_source

WRITER_TAGS = {
    STORE_WRITER_TAG: "1",
    # whole-run retry when the run worker itself dies (OOM kill, node loss); needs run_retries in dagster.yaml
    "dagster/max_retries": "2",
    "dagster/retry_on_asset_or_op_failure": "false",
}
# Step-level retry for transient failures inside an asset (store lock held, object-store hiccup).
TRANSIENT_RETRY = dg.RetryPolicy(max_retries=2, delay=5, backoff=dg.Backoff.EXPONENTIAL)


def _job(
    name: str,
    selection: dg.AssetSelection,
    description: str,
    partitions_def: dg.PartitionsDefinition = corpus_versions,
    writes_store: bool = True,
):
    return dg.define_asset_job(
        name,
        selection=selection,
        partitions_def=partitions_def,
        tags=WRITER_TAGS if writes_store else {},
        op_retry_policy=TRANSIENT_RETRY,
        description=description,
    )


pipeline_job = _job(
    "citekeeper_pipeline",
    dg.AssetSelection.all() - dg.AssetSelection.groups(SHARD_GROUP),
    "One corpus version end to end: ingest, diff, citation status, re-verification, report.",
)
ingest_job = _job(
    "citekeeper_ingest",
    dg.AssetSelection.groups("ingest"),
    "Ingest one corpus version (documents and chunks) and nothing downstream.",
)


def version_name(prefix: str, when: datetime, fingerprint: str | None = None) -> str:
    """A sortable, readable corpus version name, e.g. auto-20261130T011500Z-1a2b3c4d."""
    stamp = when.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{prefix}-{stamp}" + (f"-{fingerprint[:8]}" if fingerprint else "")


def equal_version(store: StoreResource, ingest: IngestResource) -> str | None:
    """The committed version whose documents equal the source's, if any: keeps a touched-but-identical tree
    from starting a run that would only fail with "unchanged since version X"."""
    equal = unchanged_since(store.corpus_store(), ingest.source_dir, ingest.parse_config())
    return equal.name if equal else None


@dg.sensor(
    job=pipeline_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Fingerprints what discovery would see of the source (a folder's paths, sizes and mtimes, a "
    "bucket's listing, a git ref's commit; no document read) and starts a new corpus version when it changed.",
)
def source_change_sensor(context: dg.SensorEvaluationContext, store: StoreResource, ingest: IngestResource):
    source = open_source(ingest.source_dir, store.storage_options)
    if (why := missing(source)) is not None:
        return dg.SkipReason(why)
    seen = fingerprint(source, ingest.parse_config())
    if seen == context.cursor:
        return dg.SkipReason(f"no change in {ingest.source_dir}")
    equal = equal_version(store, ingest)
    if equal is not None:
        context.update_cursor(seen)
        return dg.SkipReason(f"{ingest.source_dir} was touched but its content equals version {equal}")
    version = version_name("auto", datetime.now(UTC), seen)
    context.log.info(f"event=source_changed source={ingest.source_dir} fingerprint={seen[:12]} version={version}")
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=version, run_key=version, tags={"citekeeper/trigger": "sensor"})],
        dynamic_partitions_requests=[corpus_versions.build_add_request([version])],
        cursor=seen,
    )


@dg.schedule(
    job=pipeline_job,
    cron_schedule="0 2 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Nightly reindex of the configured source directory into a new corpus version "
    "(skipped when the tree's content equals the latest version).",
)
def nightly_reindex_schedule(context: dg.ScheduleEvaluationContext, store: StoreResource, ingest: IngestResource):
    if (why := missing(open_source(ingest.source_dir, store.storage_options))) is not None:
        return dg.SkipReason(why)
    equal = equal_version(store, ingest)
    if equal is not None:
        return dg.SkipReason(f"source tree unchanged since corpus version {equal}")
    # Schedules cannot return dynamic-partition requests, so the partition is added here directly.
    version = version_name("nightly", context.scheduled_execution_time)
    context.instance.add_dynamic_partitions(CORPUS_VERSIONS, [version])
    return dg.RunRequest(partition_key=version, run_key=version, tags={"citekeeper/trigger": "schedule"})


@dg.op(pool=STORE_WRITER_POOL, description="citekeeper gc with the resource's gc_keep_last and gc_keep.")
def corpus_gc(context: dg.OpExecutionContext, store: StoreResource) -> dg.Output:
    if store.gc_keep_last is None:
        raise dg.Failure(
            "gc_keep_last is not set (CITEKEEPER_GC_KEEP_LAST): refusing to guess how many versions to keep",
            allow_retries=False,
        )
    summary = gc(store.corpus_store(), store.gc_keep_last, store.gc_keep)
    # A pruned version's corpus_version partition names a version that no longer exists: it goes too.
    partitions = set(context.instance.get_dynamic_partitions(CORPUS_VERSIONS))
    for version in summary.pruned:
        if version in partitions:
            context.instance.delete_dynamic_partition(CORPUS_VERSIONS, version)
    context.log.info(
        f"event=gc pruned={len(summary.pruned)} kept={len(summary.kept)} "
        f"bytes_freed={summary.bytes_freed} lance_rewritten={summary.lance_rewritten}"
    )
    return dg.Output(
        None,
        metadata={
            "pruned": summary.pruned,
            "kept": {name: "; ".join(why) for name, why in summary.kept.items()},
            "n_removed_outside_lancedb": len(summary.removed),
            "bytes_before": summary.bytes_before,
            "bytes_after": summary.bytes_after,
            "bytes_freed": summary.bytes_freed,
            "lance_versions_removed": summary.lance_versions_removed,
            "duration_s": round(summary.seconds, 3),
        },
    )


@dg.job(
    name="citekeeper_gc",
    tags=WRITER_TAGS,
    op_retry_policy=TRANSIENT_RETRY,
    description="Retention: prune old corpus versions and what belongs only to them, compact the store.",
)
def gc_job():
    corpus_gc()


@dg.schedule(
    job=gc_job,
    cron_schedule="0 4 * * 0",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Weekly retention (Sunday 04:00 UTC), off until turned on: citekeeper gc with gc_keep_last and "
    "gc_keep; skipped while gc_keep_last is unset.",
)
def weekly_gc_schedule(context: dg.ScheduleEvaluationContext, store: StoreResource):
    if store.gc_keep_last is None:
        return dg.SkipReason("gc_keep_last is not set (CITEKEEPER_GC_KEEP_LAST); nothing to do")
    return dg.RunRequest(
        run_key=f"gc-{context.scheduled_execution_time:%Y%m%dT%H%M%SZ}", tags={"citekeeper/trigger": "schedule"}
    )


# ---------------------------------------------------------------------- the sharded jobs

SHARDED_INGEST_JOB = "citekeeper_ingest_sharded"
SHARDED_VERIFY_JOB = "citekeeper_verify_sharded"


def sharded_jobs(ingest: ShardedIngest, verify_shards: int) -> list[dg.JobDefinition]:
    """The jobs whose shape the shard counts fix: per-partition runs of the shard assets, and the one-run
    backfills of a version's ingest shards and answer shards."""
    # One run per (version, shard) partition, without the store-writer tag since staging takes no lock; then
    # one commit run per version, which does write.
    stage = _job(
        "citekeeper_ingest_shard_stage",
        dg.AssetSelection.assets(STAGE),
        "Parse one document shard of a corpus version into staging; run all shards in parallel.",
        partitions_def=ingest.partitions,
        writes_store=False,
    )
    commit = _job(
        "citekeeper_ingest_shard_commit",
        dg.AssetSelection.assets(COMMIT),
        "Commit the staged shards of a corpus version as one version.",
    )

    @dg.job(
        name=SHARDED_INGEST_JOB,
        partitions_def=corpus_versions,
        tags={STORE_WRITER_TAG: "1"},  # its last step writes the store
        description="Backfill every doc_shard partition of a corpus version in one run: the shards' stage "
        "steps in parallel (one process, or pod, each), then the commit.",
    )
    def ingest_sharded_job():
        ingest.commit_op(**{f"shard_{index}": op() for index, op in enumerate(ingest.stage_ops)})

    verify_ops = [verify_shard_op(index, verify_shards) for index in range(verify_shards)]
    merge = merge_shards_op(verify_shards)

    @dg.job(
        name=SHARDED_VERIFY_JOB,
        partitions_def=corpus_versions,
        description="Verify every answer shard of a corpus version in one run: the shards in parallel (one "
        "process, or pod, each; they share the verdict cache), then the merge of their run metrics.",
    )
    def verify_sharded_job():
        merge(**{f"shard_{index}": op() for index, op in enumerate(verify_ops)})

    return [stage, commit, ingest_sharded_job, verify_sharded_job]


jobs = [pipeline_job, ingest_job, gc_job]
schedules = [nightly_reindex_schedule, weekly_gc_schedule]
sensors = [source_change_sensor]
