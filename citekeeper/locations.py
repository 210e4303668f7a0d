"""Where a corpus store keeps its two big data sets: LanceDB tables and Parquet exports.

By default both live under the store root. On a cluster they can live in an object store (`s3://...`)
while the root (manifests, writer lock, staging, other components' data) stays on a shared volume.

Config keys, read only by `locations_from_env` (the CLI and the Dagster definitions both call it):
    CITEKEEPER_LANCE_URI        e.g. s3://bucket/citekeeper/lance
    CITEKEEPER_PARQUET_URI      e.g. s3://bucket/citekeeper/parquet
    CITEKEEPER_STORAGE_OPTIONS  JSON object of LanceDB storage options, e.g.
                                {"aws_endpoint": "http://minio:9000", "aws_region": "us-east-1", "allow_http": "true"}
                                the Parquet side maps the same keys onto pyarrow's S3FileSystem;
                                credentials come from the usual AWS_* environment variables.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from urllib.parse import urlparse

from pyarrow import fs

LANCE_URI_ENV = "CITEKEEPER_LANCE_URI"
PARQUET_URI_ENV = "CITEKEEPER_PARQUET_URI"
STORAGE_OPTIONS_ENV = "CITEKEEPER_STORAGE_OPTIONS"

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


def locations_from_env(environ: Mapping[str, str] | None = None) -> dict:
    """CorpusStore keyword arguments (lance_uri, parquet_uri, storage_options) from the config keys."""
    environ = os.environ if environ is None else environ
    raw = environ.get(STORAGE_OPTIONS_ENV, "").strip()
    try:
        options = json.loads(raw) if raw else {}
    except json.JSONDecodeError as exc:
        raise LocationError(f"{STORAGE_OPTIONS_ENV} is not valid JSON ({exc}): {raw!r}") from None
    if not isinstance(options, dict):
        raise LocationError(f"{STORAGE_OPTIONS_ENV} must be a JSON object of option -> value, got {raw!r}")
    return {
        "lance_uri": environ.get(LANCE_URI_ENV) or None,
        "parquet_uri": environ.get(PARQUET_URI_ENV) or None,
        # LanceDB takes strings only; JSON true -> "true", as its boolean options expect
        "storage_options": {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in options.items()},
    }


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
        raise LocationError(f"cannot open Parquet location {uri} with storage options {sorted(storage_options)}: {exc}") from exc
