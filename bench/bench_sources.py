"""Sources beyond a folder (issue 33): an incremental reindex from an S3 bucket against the same from disk, and a
backfill of 10 release tags from a git repository against 10 separate ingests.

[1] Hugo's docs (corpora/hugo-docs/v0.148.0, ~950 pages) are copied to a temp dir and uploaded to a bucket of a
moto server on loopback, reached through tests/s3_server.py's proxy, which counts the GET requests. A full ingest
from disk into store A and one from the bucket into store B; then each repeat appends a sentence to 1% of the
Markdown pages (rounded up; a different 1% each repeat), the same bytes on disk and in the bucket, and times the
incremental ingest from disk into A and from the bucket into B (alternating which goes first). Both new versions
must have the same corpus_hash. The ratio is bucket over disk, best repeat of each, on wall time; the object GETs
of the bucket run are printed (one per changed page expected), and those of a rerun with nothing changed (0).

[2] A git repository is built in a temp dir with one commit and tag per httpx-docs release folder, in version
order. `backfill(repo, store, "*")` into a fresh store is timed against 10 separate ingests of the release
folders from disk, each into a fresh store of its own (no reuse between them), alternating which goes first.
The backfill's last version must have the same corpus_hash as the separate ingest of the last folder.

    .venv/bin/python bench/bench_sources.py [--hugo DIR] [--httpx DIR] [--repeats N] [--only bucket|backfill]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_ingest import Timer
from bench.bench_reindex import change
from citekeeper.store import CorpusStore
from parsers.backfill import backfill
from parsers.ingest import IngestResult, ingest
from tests.eval_data import HTTPX_DOCS, REAL_CORPORA
from tests.s3_server import FaultyProxy, moto_server, put_objects, storage_options, upload_tree

BUCKET_TARGET = 1.5  # incremental reindex from the bucket / from disk
UNCHANGED_GETS_TARGET = 0
BACKFILL_TARGET = 0.3  # backfill of 10 tags / 10 separate ingests
BUCKET = "citekeeper-bench"
PREFIX = "hugo-docs"
HUGO = REAL_CORPORA / "hugo-docs" / "v0.148.0"


def verdict(ok: bool) -> str:
    return "OK" if ok else "MISSED"


def timed_ingest(source: Path | str, store: CorpusStore) -> tuple[Timer, IngestResult]:
    with Timer() as timer:
        result = ingest(source, store)
    return timer, result


def alternated(steps: tuple[str, str], repeat: int) -> tuple[str, ...]:
    """The two steps, the other one first every other repeat."""
    return steps if repeat % 2 == 0 else steps[::-1]


def bench_bucket(hugo: Path, scratch: Path, repeats: int) -> None:
    tree = scratch / "hugo"
    shutil.copytree(hugo, tree)
    pages = sorted(tree.rglob("*.md"))
    url = f"s3://{BUCKET}/{PREFIX}"
    with moto_server(BUCKET) as endpoint, FaultyProxy(endpoint).running() as proxy:
        upload_tree(endpoint, BUCKET, PREFIX, tree)
        stores = {
            "disk": CorpusStore(scratch / "disk-store"),
            "bucket": CorpusStore(scratch / "bucket-store", storage_options=storage_options(proxy.url)),
        }
        full_disk, _ = timed_ingest(tree, stores["disk"])
        proxy.reset_counts()
        full_bucket, _ = timed_ingest(url, stores["bucket"])
        full_gets = sum(proxy.gets.values())
        print(
            f"[1] {len(pages)} pages; full ingest: disk {full_disk.wall:.1f}s, bucket {full_bucket.wall:.1f}s "
            f"({full_gets} object GETs, {proxy.listings} listing pages)"
        )
        disk_runs: list[Timer] = []
        bucket_runs: list[Timer] = []
        changed_gets: list[tuple[int, int]] = []
        for repeat in range(repeats):
            changed = change(pages, repeat)
            put_objects(
                endpoint, BUCKET, {f"{PREFIX}/{p.relative_to(tree).as_posix()}": p.read_bytes() for p in changed}
            )
            results: dict[str, IngestResult] = {}
            for which in alternated(("disk", "bucket"), repeat):
                proxy.reset_counts()
                timer, results[which] = timed_ingest(tree if which == "disk" else url, stores[which])
                (disk_runs if which == "disk" else bucket_runs).append(timer)
                if which == "bucket":
                    changed_gets.append((sum(proxy.gets.values()), proxy.listings))
            disk, bucket = results["disk"], results["bucket"]
            assert disk.created and bucket.created, (disk.equals, bucket.equals)
            assert disk.manifest.corpus_hash == bucket.manifest.corpus_hash, "bucket and disk versions differ"
            print(
                f"    repeat {repeat}: {len(changed)} pages changed; parsed disk {disk.n_parsed}, "
                f"bucket {bucket.n_parsed}; incremental disk {disk_runs[-1].wall:.2f}s, "
                f"bucket {bucket_runs[-1].wall:.2f}s; bucket run: {changed_gets[-1][0]} object GETs, "
                f"{changed_gets[-1][1]} listing pages"
            )
        proxy.reset_counts()
        unchanged_timer, unchanged = timed_ingest(url, stores["bucket"])
        unchanged_gets = sum(proxy.gets.values())
        assert not unchanged.created, "a rerun with nothing changed created a version"
        print(
            f"    unchanged rerun from the bucket: {unchanged_timer.wall:.2f}s, {unchanged_gets} object GETs, "
            f"{proxy.listings} listing pages"
        )
    disk_wall, bucket_wall = min(t.wall for t in disk_runs), min(t.wall for t in bucket_runs)
    ratio = bucket_wall / disk_wall
    print(f"[1] incremental reindex, best of {repeats}: disk {disk_wall:.2f}s, bucket {bucket_wall:.2f}s")
    print(
        f"[1] ratio bucket/disk (wall time): {ratio:.2f}x (target <= {BUCKET_TARGET}x) -> "
        f"{verdict(ratio <= BUCKET_TARGET)}"
    )
    print(
        f"[1] CPU-time ratio bucket/disk (this process; parse workers not counted): "
        f"{min(t.cpu for t in bucket_runs) / min(t.cpu for t in disk_runs):.2f}x"
    )
    print(
        f"[1] object GETs, 1% changed: {', '.join(str(gets) for gets, _ in changed_gets)} "
        f"(for {len(changed)} changed pages per repeat)"
    )
    print(
        f"[1] object GETs, unchanged rerun: {unchanged_gets} (target {UNCHANGED_GETS_TARGET}) -> "
        f"{verdict(unchanged_gets == UNCHANGED_GETS_TARGET)}"
    )


def release_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split("."))


def build_release_repository(releases: list[Path], repo: Path) -> None:
    """One commit per release (its folder's files as the whole tree), tagged with the release's name."""

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    repo.mkdir()
    git("init", "-q")
    for release in releases:
        for entry in repo.iterdir():
            if entry.name != ".git":
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        shutil.copytree(release, repo, dirs_exist_ok=True)
        git("add", "-A")
        # --allow-empty: a release can leave the docs as they were (httpx 0.28.1's equal 0.28.0's)
        git(
            "-c", "user.name=bench", "-c", "user.email=b@localhost", "commit", "-q", "--allow-empty", "-m", release.name
        )
        git("tag", release.name)


def time_backfill(repo: Path, releases: list[Path], store_dir: Path) -> tuple[Timer, str, int]:
    """The backfill's time, its last version's corpus_hash and how many documents it parsed."""
    store = CorpusStore(store_dir)
    with Timer() as timer:
        done = backfill(repo, store, "*")
    assert [tag.tag.name for tag in done] == [release.name for release in releases]
    last = done[-1].result
    assert last is not None
    parsed = sum(tag.result.n_parsed for tag in done if tag.result is not None)
    return timer, last.manifest.corpus_hash, parsed  # the version made, or the earlier one its tree equals


def time_separate_ingests(releases: list[Path], scratch: Path) -> tuple[Timer, str, int]:
    """The time of an ingest of each release into a fresh store of its own; the last one's corpus_hash, and how
    many documents they parsed."""
    with Timer() as timer:
        results = [ingest(release, CorpusStore(scratch / release.name)) for release in releases]
    return timer, results[-1].manifest.corpus_hash, sum(result.n_parsed for result in results)


def bench_backfill(httpx: Path, scratch: Path, repeats: int) -> None:
    releases = sorted((p for p in httpx.iterdir() if p.is_dir()), key=lambda p: release_key(p.name))
    repo = scratch / "releases.git"
    build_release_repository(releases, repo)
    backfill_runs: list[Timer] = []
    separate_runs: list[Timer] = []
    for repeat in range(repeats):
        hashes: dict[str, str] = {}
        parsed: dict[str, int] = {}
        for which in alternated(("backfill", "separate"), repeat):
            if which == "backfill":
                timer, hashes[which], parsed[which] = time_backfill(repo, releases, scratch / f"backfill-{repeat}")
                backfill_runs.append(timer)
            else:
                timer, hashes[which], parsed[which] = time_separate_ingests(releases, scratch / f"separate-{repeat}")
                separate_runs.append(timer)
        assert hashes["backfill"] == hashes["separate"], f"{releases[-1].name}: backfill and ingest differ"
        print(
            f"    repeat {repeat}: backfill {backfill_runs[-1].wall:.2f}s, {len(releases)} separate ingests "
            f"{separate_runs[-1].wall:.2f}s; documents parsed: backfill {parsed['backfill']}, separate "
            f"{parsed['separate']}; {releases[-1].name}'s corpus_hash equal"
        )
    backfill_wall, separate_wall = min(t.wall for t in backfill_runs), min(t.wall for t in separate_runs)
    ratio = backfill_wall / separate_wall
    print(
        f"[2] {len(releases)} tags ({releases[0].name} .. {releases[-1].name}), best of {repeats}: "
        f"backfill {backfill_wall:.2f}s, separate ingests {separate_wall:.2f}s"
    )
    print(
        f"[2] ratio backfill/separate (wall time): {ratio:.2f}x (target <= {BACKFILL_TARGET}x) -> "
        f"{verdict(ratio <= BACKFILL_TARGET)}"
    )
    print(
        f"[2] CPU-time ratio backfill/separate (this process; parse workers not counted): "
        f"{min(t.cpu for t in backfill_runs) / min(t.cpu for t in separate_runs):.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hugo", type=Path, default=HUGO)
    parser.add_argument("--httpx", type=Path, default=HTTPX_DOCS)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--only", choices=("bucket", "backfill"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        warm_up = sorted(p for p in args.httpx.iterdir() if p.is_dir())[0]
        ingest(warm_up, CorpusStore(Path(scratch) / "warmup"))  # imports, lazy model loads, the parse pool
        if args.only != "backfill":
            bench_bucket(args.hugo, Path(scratch), args.repeats)
        if args.only != "bucket":
            bench_backfill(args.httpx, Path(scratch), args.repeats)


if __name__ == "__main__":
    main()
