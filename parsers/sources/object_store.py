"""Documents in an object store as a source: `s3://bucket/prefix`, `gs://...`, `az://...` or any other fsspec
protocol. One listing of the prefix (pages of 1000 keys, no request per object) gives every object's key, size
and stamp; reading an object is one ranged GET of at most max_bytes + 1 bytes. A key is the object's path under
the prefix, so a corpus moved from disk to a bucket keeps its doc_ids.

Credentials and endpoint come from the store's storage options (citekeeper.locations.s3fs_arguments), else from
the filesystem's own chain (AWS_* variables, the pod's role). One object that vanished since the listing, is
forbidden or stays throttled past the retries is quarantined (parsers.source_tree.Quarantined); the run goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import fsspec  # type: ignore[import-untyped]  # no stubs (pyproject: mypy overrides)
import tenacity
from fsspec.registry import known_implementations  # type: ignore[import-untyped]

from citekeeper.locations import S3_ARGUMENTS, LocationError, s3fs_arguments
from parsers.source_tree import Quarantined
from parsers.sources.base import ListedObject, ListedSource, UnlistableKey

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How a throttled or failing request is retried: attempts in all, waits doubling from first_wait."""

    attempts: int = 5
    first_wait: float = 0.5  # seconds
    max_wait: float = 8.0


RETRIES = RetryPolicy()
# Folders (parsers.source_tree) and git refs (git:PATH@REF) have their own sources.
NOT_OBJECT_STORES = {"file", "local", "git"}
# The package extra that brings a protocol's filesystem (pyproject.toml).
EXTRAS = {"gs": "gcs", "gcs": "gcs", "az": "azure", "abfs": "azure", "abfss": "azure", "adl": "azure"}
S3_PROTOCOLS = {"s3", "s3a"}
# What a listing entry says about an object's content (S3 and Azure ETag, GCS generation and MD5) and its time.
CONTENT_FIELDS = ("ETag", "etag", "generation", "md5Hash")
MTIME_FIELDS = ("LastModified", "mtime", "updated", "last_modified")
THROTTLED_STATUS = {429, 503}
FAILING_STATUS = {500, 502, 504}
THROTTLED_WORDS = ("SlowDown", "Throttl", "TooManyRequests", "reduce your request rate")
# The client's own retries are off: RetryPolicy is the one policy (botocore would retry a 503 five times more).
NO_CLIENT_RETRIES = {"retries": {"total_max_attempts": 1}}


def handles(spec: str) -> bool:
    """A URL of a remote fsspec protocol (s3://, gs://, az://, ...): not a path, file:// or git:PATH@REF."""
    scheme, separator, _ = spec.partition("://")
    return bool(separator) and scheme.lower() in known_implementations and scheme.lower() not in NOT_OBJECT_STORES


def open_source(spec: str, storage_options: Mapping[str, str]) -> ObjectStoreSource:
    return ObjectStoreSource(spec, storage_options)


class ObjectStoreSource(ListedSource):
    """The objects under a URL's prefix, the prefix taken as a folder (`docs` never lists `docs2/...`)."""

    def __init__(self, url: str, storage_options: Mapping[str, str] | None = None, retries: RetryPolicy = RETRIES):
        self._url = url.rstrip("/")
        self._protocol = self._url.partition("://")[0].lower()
        self._fs = _filesystem(self._protocol, storage_options or {})
        self._root = self._fs._strip_protocol(self._url).rstrip("/")
        self._retries = retries

    @property
    def uri(self) -> str:
        return self._url

    @property
    def cache_key(self) -> str:
        return self._url

    def list_objects(self) -> Iterator[ListedObject | UnlistableKey]:
        entries = self._retrying(lambda: self._fs.find(self._root, detail=True))
        inside = self._root + "/"
        for name, entry in entries.items():
            # A key ending in "/" is a folder marker; the prefix itself, as an object, is not under it.
            if name.startswith(inside) and not name.endswith("/") and entry.get("type") != "directory":
                yield ListedObject(name.removeprefix(inside), int(entry["size"]), listing_stamp(entry))

    def read(self, key: str, max_bytes: int) -> bytes:
        path = f"{self._root}/{key}"
        try:
            return self._retrying(lambda: self._fs.cat_file(path, start=0, end=max_bytes + 1))
        except FileNotFoundError as exc:
            raise Quarantined("read", "ObjectVanished", f"object {key!r} vanished since the listing: {exc}") from exc
        except PermissionError as exc:
            raise Quarantined("read", "PermissionDenied", f"access denied reading object {key!r}: {exc}") from exc
        except Exception as exc:
            if _status(exc) == 416:  # no byte 0 to range over: the object is empty
                return b""
            if _is_throttled(exc):
                attempts = self._retries.attempts
                reason = f"object {key!r} still throttled after {attempts} attempts: {exc}"
                raise Quarantined("read", "Throttled", reason) from exc
            raise

    def _retrying(self, call: Callable[[], T]) -> T:
        policy = self._retries
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(policy.attempts),
            wait=tenacity.wait_exponential(multiplier=policy.first_wait, max=policy.max_wait),
            retry=tenacity.retry_if_exception(self._is_transient),
            reraise=True,
        )
        return retrying(call)

    def _is_transient(self, exc: BaseException) -> bool:
        return (
            _is_throttled(exc)
            or _status(exc) in FAILING_STATUS
            or isinstance(exc, (ConnectionError, TimeoutError, *_connection_errors(self._protocol)))
        )


def listing_stamp(entry: Mapping[str, Any]) -> str:
    """The content fields a listing entry has, with its size and mtime; "" where it has no content field (mtime
    and size alone may stay while the bytes change)."""
    content = [f"{field}={entry[field]}" for field in CONTENT_FIELDS if entry.get(field)]
    if not content:
        return ""
    mtime = next((entry[field] for field in MTIME_FIELDS if entry.get(field) is not None), "")
    shown = mtime.isoformat() if isinstance(mtime, datetime) else str(mtime)
    return ";".join([*content, f"size={entry.get('size')}", f"mtime={shown}"])


def _filesystem(protocol: str, storage_options: Mapping[str, str]) -> fsspec.AbstractFileSystem:
    """A filesystem of its own (no instance shared with other endpoints) that keeps no listing between runs."""
    try:
        filesystem_class = fsspec.get_filesystem_class(protocol)
    except ImportError as exc:
        extra = EXTRAS.get(protocol)
        needs = f"the '{extra}' extra (pip install 'citekeeper[{extra}]')" if extra else "a package fsspec names"
        raise LocationError(f"{protocol}:// sources need {needs}: {exc}") from exc
    except ValueError as exc:
        raise LocationError(f"{protocol}:// is no fsspec protocol: {exc}") from exc
    if protocol in S3_PROTOCOLS:
        arguments = s3fs_arguments(storage_options)
        arguments["config_kwargs"] = {**arguments.get("config_kwargs", {}), **NO_CLIENT_RETRIES}
    else:  # the S3 options configure the store's bucket, not this source
        arguments = {k: v for k, v in storage_options.items() if k not in S3_ARGUMENTS and k != "allow_http"}
    filesystem = filesystem_class(**arguments, skip_instance_cache=True, use_listings_cache=False)
    if protocol in S3_PROTOCOLS:
        filesystem.retries = 1  # s3fs retries SlowDown itself otherwise
    return filesystem


def _connection_errors(protocol: str) -> tuple[type[BaseException], ...]:
    """The errors a protocol's client raises for a dropped connection or a timeout."""
    if protocol not in S3_PROTOCOLS:
        return ()
    from s3fs.core import S3_RETRYABLE_ERRORS  # type: ignore[import-untyped]

    return S3_RETRYABLE_ERRORS


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """The error and the errors it was raised from, each once."""
    seen: list[BaseException] = []
    error: BaseException | None = exc
    while error is not None and not any(error is other for other in seen):
        seen.append(error)
        yield error
        error = error.__cause__ or error.__context__


def _status(exc: BaseException) -> int | None:
    """The HTTP status behind an error (botocore's response, gcsfs' code, azure's status_code), if any."""
    for error in _causes(exc):
        response = getattr(error, "response", None)
        if isinstance(response, dict) and "ResponseMetadata" in response:
            return response["ResponseMetadata"].get("HTTPStatusCode")
        for name in ("status_code", "status", "code"):
            value = getattr(error, name, None)
            if isinstance(value, int) and 100 <= value < 600:
                return value
    return None


def _is_throttled(exc: BaseException) -> bool:
    return _status(exc) in THROTTLED_STATUS or any(
        word in str(error) for error in _causes(exc) for word in THROTTLED_WORDS
    )
