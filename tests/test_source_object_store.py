"""Documents in an S3 bucket as a source (parsers.sources.object_store), against a real S3-compatible server on
loopback (moto) behind a proxy that counts the requests and answers chosen keys with 403 or 503 SlowDown
(tests/s3_server.py). The corpus is a real release of mkdocs-material's docs, uploaded as it is on disk."""

from __future__ import annotations

import pytest

from citekeeper.locations import LocationError, s3fs_arguments
from parsers.source_tree import Quarantined
from parsers.sources.base import ListedObject
from parsers.sources.object_store import ObjectStoreSource, RetryPolicy, handles, open_source
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
    proxy.forbidden.clear()
    proxy.slow_down.clear()
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
    client = s3_client(endpoint)
    client.put_object(Bucket=BUCKET, Key=f"{prefix}/going.md", Body=b"here now")
    src = source(counted, prefix)
    assert list(listed(src)) == ["going.md"]
    client.delete_object(Bucket=BUCKET, Key=f"{prefix}/going.md")
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
