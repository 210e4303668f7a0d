"""Verdict-cache benchmark: a lookup of 1,000 keys in a cache of 1,000,000 verdicts, the old design (one
Parquet part per run, every lookup scans them all) against the new one (one LanceDB table upserted by key).

Both caches hold the same verdicts, written the way runs write them: --runs runs (default 100) of
--verdicts / --runs verdicts each (one model, one settings key, random sha256 claim and evidence hashes).
Old: one `part-<run>.parquet` per run (the previous VerdictCache.flush); new: one VerdictCache.flush per run
(merge_insert, then the index, compaction and cleanup maintenance that flush does).

A lookup asks for --keys keys (default 1,000; 90% cached, spread over every run, 10% misses), as the engine
does: once per run, in a fresh process. Each lookup runs in its own spawned child, which reports the wall
time of the lookup alone, and the peak RSS of the process and what the lookup added to it (VmHWM after
resetting it, Linux). Old and new alternate, --repeat times each; medians are printed with the ratio
new/old (new: the plan the cache chooses). The new lookup is also run with each plan forced (point: BTree
index; scan: one pass over the narrow columns), at --keys and at each of --crossover key counts, which shows
where POINT_LOOKUP_RATIO puts the switch. Every variant must return the same verdicts.

Also printed, apart from the ratio: one flush of --keys new verdicts into each full cache.

    .venv/bin/python bench/bench_verdict_cache.py [--verdicts 1000000] [--runs 100] [--keys 1000]
                                                  [--crossover 100,10000] [--repeat 3] [--work DIR]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from citekeeper.schema import NLI_CACHE
from citekeeper.tables import write_parquet
from verifiers import verdict_cache
from verifiers.verdict_cache import KEY, MERGE_KEY, VALUES, VerdictCache

ROW_SCHEMA = NLI_CACHE.remove(NLI_CACHE.get_field_index(MERGE_KEY))  # a verdict of the old design (no digest)

MODEL_KEY = "cross-encoder/nli-deberta-v3-xsmall@0123456789abcdef0123456789abcdef01234567/torch"
SETTINGS_KEY = "entail>=0.5;contradict>=0.5;claim_reserve=96;overlap=1;lcs>=0.8;content>=0.8;min_words=4"
VARIANTS = ("old", "new", "point", "scan")


def _hashes(rng: np.random.Generator, n: int) -> list[str]:
    raw = rng.integers(0, 2**63, size=(n, 4), dtype=np.int64)
    return ["sha256:" + "".join(f"{w:016x}" for w in row) for row in raw]


def run_verdicts(run: int, n: int, start: datetime) -> pl.DataFrame:
    """What one run scored: n verdicts (values arbitrary but deterministic per run)."""
    rng = np.random.default_rng(run)
    p = rng.random(n)
    return pl.DataFrame(
        {
            "claim_hash": _hashes(rng, n),
            "evidence_hash": _hashes(rng, n),
            "p_entailment": p,
            "p_neutral": (1 - p) / 2,
            "p_contradiction": (1 - p) / 2,
            "window_start": np.zeros(n, dtype=np.int64),
            "window_end": rng.integers(50, 2000, n),
            "n_windows": np.ones(n, dtype=np.int32),
        }
    ).with_columns(
        pl.col("n_windows").cast(pl.Int32),
        model_key=pl.lit(MODEL_KEY),
        settings_key=pl.lit(SETTINGS_KEY),
        created_at=pl.lit(start + timedelta(days=run)),
    )


def run_id(run: int) -> str:
    return f"2026{run:04d}T000000000000Z"


def build(work: Path, verdicts: int, runs: int, key_counts: list[int]) -> tuple[Path, Path, dict[int, Path], dict]:
    """The old cache (Parquet parts), the new one (a table), and per key count the keys a lookup asks for."""
    old, new = work / "old-cache", work / "new-cache"
    per_run = verdicts // runs
    start = datetime(2026, 1, 1, tzinfo=UTC)
    asked: dict[int, list[pl.DataFrame]] = {n: [] for n in key_counts}
    cache = VerdictCache(new)
    t_old = t_new = 0.0
    for run in range(runs):
        rows = run_verdicts(run, per_run, start)
        t0 = time.perf_counter()
        write_parquet(rows, ROW_SCHEMA, old / f"part-{run_id(run)}.parquet")  # the old flush
        t1 = time.perf_counter()
        cache.add(MODEL_KEY, SETTINGS_KEY, rows.select(KEY[2:] + VALUES))
        cache.flush(run_id(run))
        t_new += time.perf_counter() - t1
        t_old += t1 - t0
        for n in key_counts:  # 90% hits, the same share from every run
            take = n * 9 // 10 // runs + (1 if run < n * 9 // 10 % runs else 0)
            asked[n].append(rows.select(KEY[2:]).sample(n=take, seed=run))
        if (run + 1) % max(1, runs // 10) == 0:
            print(f"  built {run + 1}/{runs} runs ({(run + 1) * per_run:,} verdicts)", flush=True)
    rng = np.random.default_rng(10**9)  # no run's seed: misses
    key_files = {}
    for n in key_counts:
        n_misses = n - n * 9 // 10
        misses = pl.DataFrame({"claim_hash": _hashes(rng, n_misses), "evidence_hash": _hashes(rng, n_misses)})
        key_files[n] = work / f"keys-{n}.parquet"
        pl.concat([*asked[n], misses]).write_parquet(key_files[n])
    return old, new, key_files, {"old_flushes_s": t_old, "new_flushes_s": t_new}


def old_lookup(directory: Path, model_key: str, settings_key: str, keys: pl.DataFrame) -> pl.DataFrame:
    """The previous VerdictCache.lookup, verbatim: a scan of every part."""
    parts = sorted(directory.glob("part-*.parquet"))
    return (
        pl.scan_parquet(parts)
        .filter((pl.col("model_key") == model_key) & (pl.col("settings_key") == settings_key))
        .join(keys.lazy().select(KEY[2:]).unique(), on=KEY[2:], how="semi")
        .unique(subset=KEY[2:], keep="last")
        .select(KEY[2:] + VALUES)
        .collect()
    )


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def _reset_peak_rss() -> float:
    """The current RSS, after resetting the peak to it (Linux: clear_refs 5). ru_maxrss would not do: a
    spawned child keeps the peak of the parent that started it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return _status_mb("VmRSS")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _peak_rss() -> float:
    try:
        return _status_mb("VmHWM")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_s() -> float:
    """CPU seconds of this process, all threads (steadier than wall time on a shared machine)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _child(kind: str, directory: str, keys_file: str, out: str, queue) -> None:
    """One lookup in a fresh process: (seconds, peak RSS MB, MB added by the lookup, plan, CPU seconds)."""
    import lancedb  # noqa: F401  (imported before the baseline, as in a verify run)

    keys = pl.read_parquet(keys_file)
    if kind == "point":
        verdict_cache.POINT_LOOKUP_RATIO = 0
    elif kind == "scan":
        verdict_cache.POINT_LOOKUP_RATIO = 10**18
    base = _reset_peak_rss()
    cpu0 = _cpu_s()
    t0 = time.perf_counter()
    if kind == "old":
        hits, plan = old_lookup(Path(directory), MODEL_KEY, SETTINGS_KEY, keys), "scan parts"
    else:
        cache = VerdictCache(directory)
        hits = cache.lookup(MODEL_KEY, SETTINGS_KEY, keys)
        plan = cache.last_read["plan"]
    seconds, cpu = time.perf_counter() - t0, _cpu_s() - cpu0
    peak = _peak_rss()
    hits.sort(KEY[2:]).write_parquet(out)
    queue.put((seconds, peak, peak - base, plan, cpu))


def measure(kind: str, directory: Path, keys_file: Path, out: Path) -> tuple[float, float, float, str, float]:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(kind, str(directory), str(keys_file), str(out), queue))
    child.start()
    result = queue.get()
    child.join()
    return result


def dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--verdicts", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--crossover", default="100,10000", help="more key counts, comma-separated ('' for none)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, default=None, help="keep the caches here (default: a temp dir)")
    args = parser.parse_args()
    key_counts = [args.keys] + [int(n) for n in args.crossover.split(",") if n.strip()]

    work = args.work or Path(tempfile.mkdtemp(prefix="bench-verdict-cache-"))
    work.mkdir(parents=True, exist_ok=True)
    if any(work.iterdir()):
        parser.error(f"--work {work} is not empty")
    print(
        f"{args.verdicts:,} verdicts in {args.runs} runs; lookups of {', '.join(f'{n:,}' for n in key_counts)} keys; "
        f"cpus {os.cpu_count()}, load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    t0 = time.perf_counter()
    old, new, key_files, times = build(work, args.verdicts, args.runs, key_counts)
    print(
        f"built both caches in {time.perf_counter() - t0:.0f} s (all {args.runs} flushes: "
        f"old {times['old_flushes_s']:.1f} s, new {times['new_flushes_s']:.1f} s); "
        f"on disk: old {dir_mb(old):.0f} MB, new {dir_mb(new):.0f} MB"
    )

    results: dict[tuple[int, str], list] = {}
    for n in key_counts:
        for r in range(args.repeat):
            for kind in VARIANTS:
                out = work / f"hits-{n}-{kind}.parquet"
                directory = old if kind == "old" else new
                results.setdefault((n, kind), []).append(measure(kind, directory, key_files[n], out))
            print(
                f"  {n:,} keys, repeat {r + 1}: "
                + ", ".join(f"{k} {results[(n, k)][-1][0] * 1000:.0f} ms" for k in VARIANTS),
                flush=True,
            )
        hits = [pl.read_parquet(work / f"hits-{n}-{k}.parquet") for k in VARIANTS]
        expected = n * 9 // 10
        same = all(h.equals(hits[0]) for h in hits)
        print(f"  {n:,} keys: hits {[h.height for h in hits]} (expected {expected}); identical verdicts: {same}")
        assert same and hits[0].height == expected

    def med(n: int, kind: str, i: int) -> float:
        return statistics.median(x[i] for x in results[(n, kind)])

    print(
        f"\nlookup (median of {args.repeat}, each in a fresh process): wall time, CPU time (all threads), "
        "peak RSS of the process (added by the lookup)"
    )
    labels = {"old": f"old: scan {args.runs} parts", "point": "new, point plan forced", "scan": "new, scan plan forced"}
    for n in key_counts:
        print(f"  {n:,} keys of {args.verdicts:,}:")
        for kind in VARIANTS:
            label = labels.get(kind) or f"new ({results[(n, kind)][0][3]} plan chosen)"
            print(
                f"    {label:<28} {med(n, kind, 0) * 1000:7.0f} ms {med(n, kind, 4) * 1000:7.0f} ms CPU "
                f"{med(n, kind, 1):6.0f} MB ({med(n, kind, 2):+.0f} MB)"
            )
    n = args.keys
    print(
        f"ratio new/old at {n:,} keys: time {med(n, 'new', 0) / med(n, 'old', 0):.2f}, "
        f"CPU time {med(n, 'new', 4) / med(n, 'old', 4):.2f}, peak RSS {med(n, 'new', 1) / med(n, 'old', 1):.2f}, "
        f"RSS added {med(n, 'new', 2) / max(med(n, 'old', 2), 1):.2f}"
    )

    # one more run's flush into each full cache
    extra = run_verdicts(10**6, args.keys, datetime(2027, 1, 1, tzinfo=UTC))
    t0 = time.perf_counter()
    write_parquet(extra, ROW_SCHEMA, old / "part-extra.parquet")
    t_old = time.perf_counter() - t0
    (old / "part-extra.parquet").unlink()
    cache = VerdictCache(new)
    cache.add(MODEL_KEY, SETTINGS_KEY, extra.select(KEY[2:] + VALUES))
    t0 = time.perf_counter()
    cache.flush("extra")
    t_new = time.perf_counter() - t0
    print(
        f"flush of {args.keys:,} new verdicts into the full cache (with its maintenance): old {t_old * 1000:.0f} ms, "
        f"new {t_new * 1000:.0f} ms"
    )

    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
