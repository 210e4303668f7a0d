"""A real S3-compatible server on loopback for the tests (moto's ThreadedMotoServer), and a fault-injecting proxy
in front of it that counts the requests a client makes.

`moto_server()` starts moto on 127.0.0.1 and gives its URL; `s3_client(url)` is a boto3 client for it (the
tests' own uploads and listings, never through the proxy). `FaultyProxy(url)` forwards every request to that
URL and records it: `gets[key]` counts the GET requests of each object key (listings are `GET /bucket?...` and
count under `listings`), `requests` keeps every request line. It answers 403 AccessDenied for the keys in
`forbidden` and 503 SlowDown for the next `slow_down[key]` GETs of a key, without forwarding them; the keys in
`vanish_after_listing` are deleted from the server once the next listing page is answered (a race with a
client that deletes objects while a run lists and reads them).
"""

from __future__ import annotations

import http.client
import logging
import threading
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import boto3  # type: ignore[import-untyped]  # moto[server] and boto3 come with the dev extra
from moto import server as moto

from tests.loopback import serving

REGION = "us-east-1"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "aws_region": REGION}
# Hop-by-hop headers and the ones http.client sets itself: never copied from one side to the other.
_NOT_FORWARDED = {"connection", "keep-alive", "transfer-encoding", "host", "content-length", "server", "date"}


@contextmanager
def moto_server(*buckets: str) -> Iterator[str]:
    """A moto S3 server on loopback with the given buckets, for the length of the block; yields its URL."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one access-log line per S3 request otherwise
    server = moto.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        url = f"http://{host}:{port}"
        for bucket in buckets:
            s3_client(url).create_bucket(Bucket=bucket)
        yield url
    finally:
        server.stop()


def s3_client(url: str):
    return boto3.client(
        "s3", endpoint_url=url, region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )


def storage_options(url: str) -> dict[str, str]:
    """The object_store-style options a store or a source reaches `url` with (credentials given, not from env)."""
    return {**CREDENTIALS, "aws_endpoint": url, "allow_http": "true"}


def fresh_prefix() -> str:
    return uuid.uuid4().hex


def put_objects(url: str, bucket: str, objects: Mapping[str, bytes]) -> None:
    """Uploads {key: bytes}, several at once (moto serves each request on a thread)."""
    client = s3_client(url)
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda item: client.put_object(Bucket=bucket, Key=item[0], Body=item[1]), objects.items()))


def upload_tree(url: str, bucket: str, prefix: str, root: Path) -> list[str]:
    """Every file under root as `prefix/<path relative to root>`; the relative paths, sorted."""
    keys = sorted(path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file())
    put_objects(url, bucket, {f"{prefix}/{key}": (root / key).read_bytes() for key in keys})
    return keys


def delete_prefix(url: str, bucket: str, prefix: str) -> None:
    client = s3_client(url)
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/")
    for page in pages:
        for item in page.get("Contents", []):
            client.delete_object(Bucket=bucket, Key=item["Key"])


class FaultyProxy:
    """Forwards path-style S3 requests to `upstream`, counting them and answering chosen keys with faults."""

    def __init__(self, upstream: str):
        self.upstream = urlsplit(upstream)
        self.gets: Counter[str] = Counter()  # "bucket/key" -> GET requests received, faulted ones included
        self.listings = 0
        self.requests: list[str] = []  # "METHOD /path?query", in arrival order
        self.forbidden: set[str] = set()  # "bucket/key"
        self.slow_down: Counter[str] = Counter()  # "bucket/key" -> 503 SlowDown answers still to give
        self.vanish_after_listing: set[str] = set()  # "bucket/key"
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    @contextmanager
    def running(self) -> Iterator[FaultyProxy]:
        with serving(self._server):
            yield self

    def reset_counts(self) -> None:
        with self._lock:
            self.gets.clear()
            self.listings = 0
            self.requests.clear()

    def clear_faults(self) -> None:
        self.forbidden.clear()
        self.slow_down.clear()
        self.vanish_after_listing.clear()

    def methods(self) -> Counter[str]:
        return Counter(line.split(" ", 1)[0] for line in self.requests)

    def _fault(self, method: str, path: str, query: str) -> tuple[int, str, str] | None:
        """(status, S3 error code, message) to answer instead of forwarding; None to forward. Counts the request."""
        key = unquote(path).lstrip("/")
        with self._lock:
            self.requests.append(f"{method} {path}" + (f"?{query}" if query else ""))
            if method != "GET":
                return None
            if "/" not in key:  # GET /bucket?list-type=2...: a page of a listing
                self.listings += 1
                return None
            self.gets[key] += 1
            if key in self.forbidden:
                return 403, "AccessDenied", f"Access Denied to {key}"
            if self.slow_down[key] > 0:
                self.slow_down[key] -= 1
                return 503, "SlowDown", "Please reduce your request rate."
        return None

    def _vanish(self) -> None:
        with self._lock:
            going, self.vanish_after_listing = self.vanish_after_listing, set()
        client = s3_client(self.upstream.geturl())
        for path in going:
            bucket, key = path.split("/", 1)
            client.delete_object(Bucket=bucket, Key=key)

    def _forward(self, method: str, target: str, headers: dict[str, str], body: bytes):
        connection = http.client.HTTPConnection(self.upstream.netloc, timeout=60)
        try:
            connection.request(method, target, body=body or None, headers=headers)
            response = connection.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            connection.close()

    def _handler(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a client's connection pool expects

            def do_GET(self):
                self._answer()

            def do_HEAD(self):
                self._answer()

            def do_PUT(self):
                self._answer()

            def do_POST(self):
                self._answer()

            def do_DELETE(self):
                self._answer()

            def _answer(self):
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                fault = proxy._fault(self.command, parts.path, parts.query)
                if fault is not None:
                    self._send(fault[0], [("Content-Type", "application/xml")], _error_xml(*fault[1:]))
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _NOT_FORWARDED}
                status, response_headers, content = proxy._forward(self.command, self.path, headers, body)
                if self.command == "GET" and "/" not in parts.path.strip("/"):
                    proxy._vanish()
                kept = [(k, v) for k, v in response_headers if k.lower() not in _NOT_FORWARDED]
                # A HEAD answer has no body but tells the object's length
                length = dict((k.lower(), v) for k, v in response_headers).get("content-length", "0")
                self._send(status, kept, content, length if self.command == "HEAD" else None)

            def _send(self, status: int, headers: list[tuple[str, str]], content: bytes, length: str | None = None):
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", length or str(len(content)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(content)

            def log_message(self, *args):
                pass

        return Handler


def _error_xml(code: str, message: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
        f"<RequestId>{uuid.uuid4().hex}</RequestId></Error>"
    ).encode()
