"""Parallel sharded ingest for real (issue #13): 2 shards on 2 cores against 1, through Dagster.

Each measurement is one run of `citekeeper_ingest_sharded` (assets/sharding.py: the backfill of every
`doc_shard` partition of a version in one run, a stage step per shard, then the commit) through Dagster's
multiprocess executor on a persistent instance in a temporary DAGSTER_HOME, in a fresh child process with
CITEKEEPER_INGEST_SHARDS=n, into a fresh store, on a tree of small synthetic markdown documents (those of
bench_ingest_scale.py). Each stage step parses serially in its own process (parse_workers=1): the shards are
the parallelism, so 1 shard uses one core and 2 shards two.

The figure is the wall time of the staging of all shards, from the first stage step's STEP_START to the last
stage step's STEP_SUCCESS in the run's event log (the commit and the run's start-up are printed apart). By
default the executor's steps fork from a server that preloaded the code and warmed the parsers
(`--start-method forkserver`, what the parse pool does for its workers); `--start-method spawn` starts each
step in a fresh interpreter, which then imports unstructured and spaCy inside the timed window. Rounds
alternate the order of the two settings; the best of each is compared. Both committed versions must be
equal (corpus_hash, counts).

    .venv/bin/python bench/bench_shards.py [--docs 3000] [--rounds 2] [--start-method forkserver|spawn]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dagster as dg

from assets.resources import CitekeeperSettings, IngestResource, StoreResource
from bench.bench_ingest_scale import generate

TARGET = 1.6
STORE_ENV, SOURCE_ENV, SHARDS_ENV = "CITEKEEPER_STORE", "CITEKEEPER_SOURCE", "CITEKEEPER_INGEST_SHARDS"


def child_settings() -> CitekeeperSettings:
    return CitekeeperSettings(
        store=StoreResource(store_dir=os.environ[STORE_ENV]),
        ingest=IngestResource(source_dir=os.environ[SOURCE_ENV], parse_workers=1),
        ingest_shards=int(os.environ[SHARDS_ENV]),
    )


def backfill_job() -> dg.JobDefinition:
    """What each step process rebuilds (dg.reconstructable), from the environment the child set."""
    from pipelines.automation import SHARDED_INGEST_JOB
    from pipelines.definitions import build_definitions

    return build_definitions(child_settings()).resolve_job_def(SHARDED_INGEST_JOB)


def measure(start_method: str) -> dict:
    """In a child whose environment names the shards, store, source and DAGSTER_HOME: one backfill run."""
    from citekeeper.store import CorpusStore

    n_shards = child_settings().ingest_shards
    method = (
        {"spawn": {}}
        if start_method == "spawn"
        else {"forkserver": {"preload_modules": ["assets.sharding", "parsers.warm_worker"]}}
    )
    run_config = {"execution": {"config": {"max_concurrent": n_shards, "start_method": method}}}
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions("corpus_version", ["v1"])
        started = time.time()
        result = dg.execute_job(
            dg.reconstructable(backfill_job), instance, run_config=run_config, tags={"dagster/partition": "v1"}
        )
        run_wall = time.time() - started
        if not result.success:
            raise SystemExit(f"the backfill run failed: {result.run_id}")
        events = [e for e in instance.all_logs(result.run_id) if e.dagster_event]

    def times(event_type: str, prefix: str) -> list[float]:
        return [
            e.timestamp
            for e in events
            if e.dagster_event.event_type_value == event_type and (e.step_key or "").startswith(prefix)
        ]

    stage_start, stage_end = (
        min(times("STEP_START", "stage_doc_shard_")),
        max(times("STEP_SUCCESS", "stage_doc_shard_")),
    )
    manifest = CorpusStore(os.environ[STORE_ENV]).manifest("v1")
    return {
        "n_shards": n_shards,
        "staging_s": stage_end - stage_start,
        "run_s": run_wall,
        "before_staging_s": stage_start - started,
        "commit_s": max(times("STEP_SUCCESS", "commit_doc_shards")) - min(times("STEP_START", "commit_doc_shards")),
        "stage_steps": len(times("STEP_SUCCESS", "stage_doc_shard_")),
        "corpus_hash": manifest.corpus_hash,
        "n_documents": manifest.n_documents,
        "n_chunks": manifest.n_chunks,
    }


def measure_in_child(n_shards: int, source: Path, scratch: Path, start_method: str, tag: str) -> dict:
    home = scratch / f"dagster-home-{tag}"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {
        **os.environ,
        SHARDS_ENV: str(n_shards),
        STORE_ENV: str(scratch / f"store-{tag}"),
        SOURCE_ENV: str(source),
        "DAGSTER_HOME": str(home),
    }
    command = [sys.executable, __file__, "--measure", "--start-method", start_method]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode:
        sys.exit(f"measuring child failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=3000, help="documents in the tree (default 3,000)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--start-method", choices=("forkserver", "spawn"), default="forkserver")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # a child: one run
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.start_method)))
        return

    print(
        f"bench_shards: {len(os.sched_getaffinity(0))} usable CPUs, load average {os.getloadavg()[0]:.1f} at start; "
        f"{args.docs:,} documents; multiprocess executor ({args.start_method}), max_concurrent = shards, "
        "parse_workers=1 per stage step"
    )
    runs: dict[int, list[dict]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory(prefix="ck-shards-") as scratch:
        source = Path(scratch) / "tree"
        generate(source, args.docs)
        for round_index in range(args.rounds):
            for n in (1, 2) if round_index % 2 == 0 else (2, 1):
                measured = measure_in_child(n, source, Path(scratch), args.start_method, f"{round_index}-{n}")
                runs[n].append(measured)
                print(
                    f"  round {round_index + 1}, {n} shard(s): staging {measured['staging_s']:.1f}s, "
                    f"commit {measured['commit_s']:.1f}s, run {measured['run_s']:.1f}s (start-up before the first "
                    f"stage step {measured['before_staging_s']:.1f}s); load average {os.getloadavg()[0]:.1f}"
                )
    hashes = {(m["corpus_hash"], m["n_documents"], m["n_chunks"]) for ms in runs.values() for m in ms}
    assert len(hashes) == 1, f"the runs committed different versions: {hashes}"
    ((_, n_documents, n_chunks),) = hashes
    best = {n: min(m["staging_s"] for m in ms) for n, ms in runs.items()}
    print(f"committed: {n_documents:,} documents, {n_chunks:,} chunks, the same version every run")
    for n in (1, 2):
        rounds = ", ".join(f"{m['staging_s']:.1f}s" for m in runs[n])
        print(
            f"{n} shard(s): staging of all shards {best[n]:.1f}s (best of {args.rounds}: {rounds}), "
            f"{n_documents / best[n]:.1f} docs/s"
        )
    ratio = best[1] / best[2]
    print(
        f"speed-up 2 shards / 1 shard (staging wall time): {ratio:.2f}x (target >= {TARGET}x) -> "
        f"{'OK' if ratio >= TARGET else 'UNDER'}"
    )
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
