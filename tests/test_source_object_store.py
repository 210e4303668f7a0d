"""Documents in an S3 bucket as a source (parsers.sources.object_store), against a real S3-compatible server on
loopback (moto) behind a proxy that counts the requests and answers chosen keys with 403 or 503 SlowDown
(tests/s3_server.py). The corpus is a real release of mkdocs-material's docs, uploaded as it is on disk."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from citekeeper.locations import LocationError, s3fs_arguments
from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from parsers.source_tree import Quarantined
from parsers.sources.base import ListedObject
from parsers.sources.object_store import ObjectStoreSource, RetryPolicy, handles, open_source
from pipelines.cli import main
from tests.eval_data import REAL_CORPORA
from tests.s3_server import FaultyProxy, fresh_prefix, moto_server, put_objects, s3_client, storage_options, upload_tree

BUCKET = "citekeeper-docs"
MKDOCS = REAL_CORPORA / "mkdocs-material"
RELEASE = MKDOCS / "9.5.0"
QUICK = RetryPolicy(attempts=3, first_wait=0.01, max_wait=0.02)  # real backoff, short waits


@pytest.fixture(scope="module")
def endpoint():
    with moto_server(BUCKET) as url:
        yield url


@pytest.fixture(scope="module")
def proxy(endpoint):
    with FaultyProxy(endpoint).running() as running:
        yield running


@pytest.fixture(scope="module")
def release(endpoint) -> str:
    """mkdocs-material 9.5.0 under a prefix of its own; the prefix."""
    prefix = fresh_prefix()
    upload_tree(endpoint, BUCKET, prefix, RELEASE)
    return prefix


@pytest.fixture
def counted(proxy):
    """The proxy with fresh counts and no faults."""
    proxy.reset_counts()
    proxy.clear_faults()
    return proxy


def source(proxy: FaultyProxy, prefix: str, **options) -> ObjectStoreSource:
    return ObjectStoreSource(f"s3://{BUCKET}/{prefix}", storage_options(proxy.url), retries=QUICK, **options)


def on_disk() -> dict[str, int]:
    return {p.relative_to(RELEASE).as_posix(): p.stat().st_size for p in RELEASE.rglob("*") if p.is_file()}


def listed(src: ObjectStoreSource) -> dict[str, ListedObject]:
    objects = list(src.list_objects())
    assert all(isinstance(o, ListedObject) for o in objects)
    return {o.key: o for o in objects}  # type: ignore[union-attr]


def test_listing_is_the_tree_relative_to_the_prefix_in_one_request(counted, release) -> None:
    objects = listed(source(counted, release))
    assert {key: o.size for key, o in objects.items()} == on_disk()
    assert len(objects) == 87 and "reference/admonitions.md" in objects
    assert all(o.stamp for o in objects.values())  # S3 lists an ETag for every object
    assert counted.requests == [f"GET /{BUCKET}?list-type=2&prefix={release}%2F&delimiter=&encoding-type=url"]


def test_listing_pages_of_1000_keys(counted, endpoint) -> None:
    prefix = fresh_prefix()
    put_objects(endpoint, BUCKET, {f"{prefix}/k{n:04}.md": b"x" for n in range(1001)})
    assert len(listed(source(counted, prefix))) == 1001
    assert counted.listings == 2 and counted.methods() == {"GET": 2}


def test_a_prefix_is_a_folder(counted, endpoint) -> None:
    """`docs` lists docs/... only: not docs2/..., not an object named `docs`, not folder markers."""
    base = fresh_prefix()
    client = s3_client(endpoint)
    for key in ("docs/a.md", "docs/sub/", "docs/sub/b.md", "docs2/c.md", "docs", "docsx.md"):
        client.put_object(Bucket=BUCKET, Key=f"{base}/{key}", Body=b"text")
    assert sorted(listed(source(counted, f"{base}/docs"))) == ["a.md", "sub/b.md"]
    assert sorted(listed(source(counted, f"{base}/docs/"))) == ["a.md", "sub/b.md"]  # a trailing slash alike
    assert source(counted, f"{base}/docs/").uri == f"s3://{BUCKET}/{base}/docs"


def test_stamps_change_with_the_bytes_and_stay_without(counted, endpoint) -> None:
    prefix = fresh_prefix()
    client = s3_client(endpoint)
    for key, body in (("same.md", b"untouched"), ("rewritten.md", b"version 1"), ("grown.md", b"short")):
        client.put_object(Bucket=BUCKET, Key=f"{prefix}/{key}", Body=body)
    src = source(counted, prefix)
    before = {k: o.stamp for k, o in listed(src).items()}
    client.put_object(Bucket=BUCKET, Key=f"{prefix}/rewritten.md", Body=b"version 2")  # same size
    client.put_object(Bucket=BUCKET, Key=f"{prefix}/grown.md", Body=b"much longer now")
    client.put_object(Bucket=BUCKET, Key=f"{prefix}/new.md", Body=b"new")
    after = {k: o.stamp for k, o in listed(src).items()}  # the same source: no listing kept between runs
    assert after["same.md"] == before["same.md"]
    assert after["rewritten.md"] != before["rewritten.md"] and after["grown.md"] != before["grown.md"]
    assert "new.md" in after and "new.md" not in before
    assert counted.listings == 2 and not counted.gets


def test_read_is_one_ranged_get_without_head(counted, release) -> None:
    src = source(counted, release)
    keys = ["index.md", "reference/admonitions.md", "setup/changing-the-colors.md"]
    for key in keys:
        assert src.read(key, max_bytes=10**9) == (RELEASE / key).read_bytes()
    bounded = src.read("reference/admonitions.md", max_bytes=100)
    assert bounded == (RELEASE / "reference/admonitions.md").read_bytes()[:101]  # max_bytes + 1
    assert counted.methods() == {"GET": 4}
    assert counted.gets == {f"{BUCKET}/{release}/{key}": 1 for key in keys[::2]} | {
        f"{BUCKET}/{release}/reference/admonitions.md": 2
    }


def test_an_empty_object_reads_empty(counted, endpoint) -> None:
    prefix = fresh_prefix()
    s3_client(endpoint).put_object(Bucket=BUCKET, Key=f"{prefix}/empty.md", Body=b"")
    src = source(counted, prefix)
    assert {k: o.size for k, o in listed(src).items()} == {"empty.md": 0}
    assert src.read("empty.md", max_bytes=100) == b""  # S3 answers 416 to a range over no bytes
    assert counted.gets == {f"{BUCKET}/{prefix}/empty.md": 1}


def test_an_object_vanished_since_the_listing_is_quarantined(counted, endpoint) -> None:
    prefix = fresh_prefix()
    s3_client(endpoint).put_object(Bucket=BUCKET, Key=f"{prefix}/going.md", Body=b"here now")
    counted.vanish_after_listing.add(f"{BUCKET}/{prefix}/going.md")
    src = source(counted, prefix)
    assert list(listed(src)) == ["going.md"]  # deleted once listed
    with pytest.raises(Quarantined) as caught:
        src.read("going.md", max_bytes=100)
    assert (caught.value.stage, caught.value.error_type) == ("read", "ObjectVanished")
    assert "going.md" in caught.value.reason
    assert counted.gets == {f"{BUCKET}/{prefix}/going.md": 1}  # not retried


def test_a_forbidden_object_is_quarantined(counted, release) -> None:
    counted.forbidden.add(f"{BUCKET}/{release}/index.md")
    src = source(counted, release)
    with pytest.raises(Quarantined) as caught:
        src.read("index.md", max_bytes=100)
    assert (caught.value.stage, caught.value.error_type) == ("read", "PermissionDenied")
    assert "index.md" in caught.value.reason
    assert src.read("upgrade.md", max_bytes=10**9) == (RELEASE / "upgrade.md").read_bytes()  # the others read
    assert counted.gets[f"{BUCKET}/{release}/index.md"] == 1  # not retried


def test_a_throttled_object_is_retried_until_it_answers(counted, release) -> None:
    key = f"{BUCKET}/{release}/upgrade.md"
    counted.slow_down[key] = QUICK.attempts - 1
    assert source(counted, release).read("upgrade.md", max_bytes=10**9) == (RELEASE / "upgrade.md").read_bytes()
    assert counted.gets == {key: QUICK.attempts}  # the policy's attempts, and no client retries on top


def test_an_object_throttled_past_the_retries_is_quarantined(counted, release) -> None:
    key = f"{BUCKET}/{release}/upgrade.md"
    counted.slow_down[key] = QUICK.attempts + 5
    with pytest.raises(Quarantined) as caught:
        source(counted, release).read("upgrade.md", max_bytes=100)
    assert (caught.value.stage, caught.value.error_type) == ("read", "Throttled")
    assert "upgrade.md" in caught.value.reason
    assert counted.gets == {key: QUICK.attempts}


def test_sources_on_two_endpoints_in_one_process_keep_their_own_clients(counted, endpoint, release) -> None:
    """No filesystem instance is shared: the same URL through the proxy and straight to moto."""
    through_proxy, direct = (
        source(counted, release),
        ObjectStoreSource(f"s3://{BUCKET}/{release}", storage_options(endpoint)),
    )
    assert listed(direct).keys() == listed(through_proxy).keys()
    assert counted.listings == 1


def test_no_options_take_the_default_chain(counted, release, monkeypatch) -> None:
    """Without storage options s3fs finds its credentials and endpoint as botocore does (AWS_* variables)."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_S3": counted.url,
    }.items():
        monkeypatch.setenv(name, value)
    src = open_source(f"s3://{BUCKET}/{release}", {})
    assert {key: o.size for key, o in listed(src).items()} == on_disk()
    assert counted.listings == 1


def test_which_specs_are_object_stores() -> None:
    for spec in ("s3://bucket/prefix", "s3://bucket", "gs://bucket/docs", "az://container/docs", "abfs://c/d"):
        assert handles(spec), spec
    for spec in ("docs", "/srv/docs", "file:///srv/docs", "git:/srv/repo@v1", "git:repo@main", "C:\\docs"):
        assert not handles(spec), spec


@pytest.mark.parametrize(("url", "extra"), [("gs://bucket/docs", "gcs"), ("az://container/docs", "azure")])
def test_a_protocol_without_its_package_names_the_extra(url, extra) -> None:
    with pytest.raises(LocationError, match=rf"citekeeper\[{extra}\]"):
        open_source(url, {})


def test_store_options_as_s3fs_arguments() -> None:
    options = {
        "aws_endpoint": "127.0.0.1:9000",
        "allow_http": "true",
        "aws_access_key_id": "id",
        "aws_secret_access_key": "secret",
        "aws_session_token": "token",
        "aws_region": "eu-west-1",
        "anon": "false",
    }
    assert s3fs_arguments(options) == {
        "endpoint_url": "http://127.0.0.1:9000",
        "key": "id",
        "secret": "secret",
        "token": "token",
        "client_kwargs": {"region_name": "eu-west-1"},
        "anon": False,
    }
    assert s3fs_arguments({"endpoint": "minio.internal"}) == {"endpoint_url": "https://minio.internal"}
    assert s3fs_arguments({"aws_endpoint": "http://h:1", "allow_http": "false"}) == {"endpoint_url": "http://h:1"}
    assert s3fs_arguments({}) == {}
    with pytest.raises(LocationError, match="'aws_endpoint_url'"):
        s3fs_arguments({"aws_endpoint_url": "http://h:1"})


# ---------------------------------------------------------------------- ingest from the bucket, against disk

RELEASES = {"9.5.0": MKDOCS / "9.5.0", "9.7.6": MKDOCS / "9.7.6"}


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def changed_keys(old: Path, new: Path) -> set[str]:
    """The files of `new` whose bytes are not those of the same path in `old` (new files included)."""
    before, after = tree_bytes(old), tree_bytes(new)
    return {key for key, data in after.items() if before.get(key) != data}


def sync_tree(url: str, prefix: str, old: Path, new: Path) -> None:
    """The bucket prefix holding `old` made to hold `new` as a sync by content does: the changed and new files
    uploaded, the ones gone deleted, the others untouched."""
    after = tree_bytes(new)
    put_objects(url, BUCKET, {f"{prefix}/{key}": after[key] for key in changed_keys(old, new)})
    client = s3_client(url)
    for key in tree_bytes(old).keys() - after.keys():
        client.delete_object(Bucket=BUCKET, Key=f"{prefix}/{key}")


def comparable(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.drop("ingested_at")  # the only column that depends on when a store ingested


@dataclass
class TwoReleases:
    disk: CorpusStore
    bucket: CorpusStore
    url: str
    gets: dict[str, Counter[str]]  # version -> GETs of each key in its bucket run
    listings: dict[str, int]
    methods: dict[str, Counter[str]]


@pytest.fixture(scope="module")
def two_releases(endpoint, proxy, tmp_path_factory) -> TwoReleases:
    """Both releases ingested in order from disk into one store, and from one bucket prefix (synced from the first
    release to the second) into another, the proxy counting each bucket run's requests."""
    prefix = fresh_prefix()
    first_tree, second_tree = RELEASES.values()
    upload_tree(endpoint, BUCKET, prefix, first_tree)
    root = tmp_path_factory.mktemp("releases")
    found = TwoReleases(
        CorpusStore(root / "disk"),
        CorpusStore(root / "bucket", storage_options=storage_options(proxy.url)),
        f"s3://{BUCKET}/{prefix}",
        {},
        {},
        {},
    )
    proxy.clear_faults()
    for version, tree in RELEASES.items():
        if tree == second_tree:
            sync_tree(endpoint, prefix, first_tree, second_tree)
        assert ingest(tree, found.disk, version=version).created
        proxy.reset_counts()
        result = ingest(found.url, found.bucket, version=version)
        assert result.created and not result.errors, result.errors
        found.gets[version] = Counter(proxy.gets)
        found.listings[version], found.methods[version] = proxy.listings, proxy.methods()
    return found


@pytest.mark.parametrize("version", RELEASES)
def test_bucket_ingest_equals_disk_ingest(two_releases, version) -> None:
    for read in ("read_chunks", "read_documents"):
        got = comparable(getattr(two_releases.bucket, read)(version))
        want = comparable(getattr(two_releases.disk, read)(version))
        assert got.height > 0 and got.equals(want), f"{read}({version}) differs from the disk ingest"


def test_bucket_and_disk_diffs_are_the_same(two_releases, tmp_path) -> None:
    runner = CliRunner()
    outputs = {}
    for name, store in (("disk", two_releases.disk), ("bucket", two_releases.bucket)):
        out = tmp_path / f"{name}.parquet"
        result = runner.invoke(main, ["diff", *RELEASES, "--out", str(out), "--json", "--store", str(store.root)])
        assert result.exit_code == 0, result.output
        outputs[name] = (json.loads(result.output), pl.read_parquet(out))
    (disk_counts, disk_chunks), (bucket_counts, bucket_chunks) = outputs["disk"], outputs["bucket"]
    assert bucket_counts == disk_counts and bucket_counts["changed_documents"]
    assert bucket_chunks.height > 0 and bucket_chunks.equals(disk_chunks)


def test_each_run_gets_only_the_objects_whose_bytes_changed(two_releases) -> None:
    first, second = RELEASES
    prefix = two_releases.url.removeprefix("s3://")
    assert two_releases.gets[first] == {f"{prefix}/{key}": 1 for key in tree_bytes(RELEASES[first])}
    changed = changed_keys(RELEASES[first], RELEASES[second])
    assert 0 < len(changed) < len(tree_bytes(RELEASES[second]))  # some objects stay as they were
    assert two_releases.gets[second] == {f"{prefix}/{key}": 1 for key in changed}
    for version in RELEASES:  # one listing page, no HEAD, nothing but GETs
        assert two_releases.listings[version] == 1
        assert two_releases.methods[version] == {"GET": 1 + len(two_releases.gets[version])}


def test_a_run_over_an_unchanged_bucket_makes_no_get(two_releases, counted) -> None:
    result = ingest(two_releases.url, two_releases.bucket)
    assert not result.created and result.equals == list(RELEASES)[-1]
    assert counted.listings == 1 and not counted.gets and counted.methods() == {"GET": 1}


def upload_few(url: str, names: tuple[str, ...]) -> str:
    """A few documents of the release under a prefix of their own (an ingest of the whole release takes a
    minute on a busy machine; the two-release fixture does that); the prefix."""
    prefix = fresh_prefix()
    put_objects(url, BUCKET, {f"{prefix}/{name}": (RELEASE / name).read_bytes() for name in names})
    return prefix


FEW = ("index.md", "upgrade.md", "reference/admonitions.md", "setup/changing-the-colors.md")


def test_one_object_failing_quarantines_its_document_only(endpoint, counted, tmp_path) -> None:
    prefix = upload_few(endpoint, FEW)
    counted.forbidden.add(f"{BUCKET}/{prefix}/index.md")
    counted.vanish_after_listing.add(f"{BUCKET}/{prefix}/upgrade.md")
    store = CorpusStore(tmp_path / "store", storage_options=storage_options(counted.url))
    result = ingest(f"s3://{BUCKET}/{prefix}", store, version="v1")
    assert result.created
    assert {(e.source_path, e.stage, e.error_type) for e in result.errors} == {
        ("index.md", "read", "PermissionDenied"),
        ("upgrade.md", "read", "ObjectVanished"),
    }
    documents = set(store.read_documents("v1")["source_path"])
    assert documents == set(FEW) - {"index.md", "upgrade.md"}


def test_cli_ingests_a_bucket_with_the_store_options_from_the_environment(endpoint, counted, tmp_path) -> None:
    prefix = upload_few(endpoint, FEW)
    env = {"CITEKEEPER_STORAGE_OPTIONS": json.dumps(storage_options(counted.url))}
    store = tmp_path / "store"
    url = f"s3://{BUCKET}/{prefix}"
    result = CliRunner().invoke(main, ["ingest", url, "--store", str(store), "--version", "v1"], env=env)
    assert result.exit_code == 0, result.output
    assert "created corpus version v1" in result.output
    assert set(CorpusStore(store).read_documents("v1")["source_path"]) == set(FEW)
    assert counted.gets == {f"{BUCKET}/{prefix}/{name}": 1 for name in FEW}
    assert CorpusStore(store).manifest("v1").source_dir == url
