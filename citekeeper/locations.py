"""Where a corpus store keeps its two big data sets, the LanceDB tables and the Parquet exports: under the store
root by default, or in an object store (`s3://...`) while the root stays on a shared volume. Configured by
CITEKEEPER_LANCE_URI, CITEKEEPER_PARQUET_URI and CITEKEEPER_STORAGE_OPTIONS (citekeeper.settings;
docs/production.md)."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlparse

from pyarrow import fs

# LanceDB (object_store) storage option -> pyarrow S3FileSystem argument, so one dict configures both.
S3_ARGUMENTS = {
    "aws_endpoint": "endpoint_override",
    "endpoint": "endpoint_override",
    "aws_region": "region",
    "region": "region",
    "aws_access_key_id": "access_key",
    "access_key_id": "access_key",
    "aws_secret_access_key": "secret_key",
    "secret_access_key": "secret_key",
    "aws_session_token": "session_token",
    "session_token": "session_token",
}


class LocationError(ValueError):
    """A store location or its storage options are unusable; the message names the key."""


def is_remote(uri: str) -> bool:
    """True for object-store URIs (s3://, gs://, ...); plain paths and file:// are local."""
    return urlparse(uri).scheme not in ("", "file")


def parquet_filesystem(uri: str, storage_options: Mapping[str, str]) -> tuple[fs.FileSystem, str]:
    """(filesystem, path inside it) for a remote Parquet location."""
    if urlparse(uri).scheme != "s3":
        return fs.FileSystem.from_uri(uri)
    arguments = {S3_ARGUMENTS[k]: v for k, v in storage_options.items() if k in S3_ARGUMENTS}
    endpoint = arguments.get("endpoint_override", "")
    if endpoint and "://" not in endpoint and storage_options.get("allow_http", "").lower() == "true":
        arguments["scheme"] = "http"
    try:
        return fs.S3FileSystem(**arguments), uri.removeprefix("s3://").rstrip("/")
    except Exception as exc:
        raise LocationError(
            f"cannot open Parquet location {uri} with storage options {sorted(storage_options)}: {exc}"
        ) from exc
