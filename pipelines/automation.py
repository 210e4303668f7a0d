"""Jobs, schedules and sensors: nightly reindex, change-driven runs, retries, one store writer at a time.

One explicit job runs a corpus version end to end (ingest -> diff -> citation status -> verification ->
report) rather than declarative automation: a single run per version holds the store-writer slot once,
retries as a unit, and stops at the first failed blocking check; see README "Running in Dagster".
"""
from __future__ import annotations

import hashlib
import os
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg

from assets.partitions import corpus_versions
from pipelines.resources import CitekeeperConfig

# dagster.yaml limits runs carrying this tag to one at a time (tag_concurrency_limits).
STORE_WRITER_TAG = "citekeeper/store-writer"
SHARD_STAGE_GROUP = "ingest_shards"

WRITER_TAGS = {
    STORE_WRITER_TAG: "1",
    # whole-run retry when the run worker itself dies (OOM kill, node loss); needs run_retries in dagster.yaml
    "dagster/max_retries": "2",
    "dagster/retry_on_asset_or_op_failure": "false",
}
# Step-level retry for transient failures inside an asset (store lock held, object-store hiccup).
TRANSIENT_RETRY = dg.RetryPolicy(max_retries=2, delay=5, backoff=dg.Backoff.EXPONENTIAL)

pipeline_job = dg.define_asset_job(
    "citekeeper_pipeline",
    selection=dg.AssetSelection.all() - dg.AssetSelection.groups(SHARD_STAGE_GROUP),
    partitions_def=corpus_versions,
    tags=WRITER_TAGS,
    op_retry_policy=TRANSIENT_RETRY,
    description="One corpus version end to end: ingest, diff, citation status, re-verification, report.",
)

ingest_job = dg.define_asset_job(
    "citekeeper_ingest",
    selection=dg.AssetSelection.groups("ingest"),
    partitions_def=corpus_versions,
    tags=WRITER_TAGS,
    op_retry_policy=TRANSIENT_RETRY,
    description="Ingest one corpus version (documents and chunks) and nothing downstream.",
)


def source_fingerprint(source_root: Path) -> str:
    """sha256 over (relative path, size, mtime) of every file under the root: stat only, never reads."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(source_root, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            try:
                stat = path.stat()
            except OSError:  # broken symlink, vanished file: ingest reports it, the fingerprint skips it
                continue
            relative = path.relative_to(source_root).as_posix()
            digest.update(f"{relative}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def version_name(prefix: str, when: datetime, fingerprint: str | None = None) -> str:
    """A sortable, readable corpus version name, e.g. auto-20261130T011500Z-1a2b3c4d."""
    stamp = when.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{prefix}-{stamp}" + (f"-{fingerprint[:8]}" if fingerprint else "")


@dg.sensor(
    job=pipeline_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Fingerprints the source root (paths, sizes, mtimes; no parsing) and starts a new corpus "
    "version when it changed.",
)
def source_change_sensor(context: dg.SensorEvaluationContext, citekeeper: CitekeeperConfig):
    source_root = citekeeper.source_path
    if not source_root.is_dir():
        return dg.SkipReason(f"source root {source_root} is not a directory")
    fingerprint = source_fingerprint(source_root)
    if fingerprint == context.cursor:
        return dg.SkipReason(f"no change under {source_root}")
    version = version_name("auto", datetime.now(timezone.utc), fingerprint)
    context.log.info(f"event=source_changed source_root={source_root} fingerprint={fingerprint[:12]} version={version}")
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=version, run_key=version, tags={"citekeeper/trigger": "sensor"})],
        dynamic_partitions_requests=[corpus_versions.build_add_request([version])],
        cursor=fingerprint,
    )


@dg.schedule(
    job=pipeline_job,
    cron_schedule="0 2 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Nightly reindex of the configured source directory into a new corpus version.",
)
def nightly_reindex_schedule(context: dg.ScheduleEvaluationContext):
    # Schedules cannot return dynamic-partition requests, so the partition is added here directly.
    version = version_name("nightly", context.scheduled_execution_time)
    context.instance.add_dynamic_partitions(corpus_versions.name, [version])
    return dg.RunRequest(partition_key=version, run_key=version, tags={"citekeeper/trigger": "schedule"})


jobs = [pipeline_job, ingest_job]
schedules = [nightly_reindex_schedule]
sensors = [source_change_sensor]
