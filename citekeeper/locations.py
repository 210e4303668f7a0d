"""Where a corpus store keeps its two big data sets, the LanceDB tables and the Parquet exports: under the store
root by default, or in an object store (`s3://...`) while the root stays on a shared volume. Configured by
CITEKEEPER_LANCE_URI, CITEKEEPER_PARQUET_URI and CITEKEEPER_STORAGE_OPTIONS (citekeeper.settings;
docs/production.md)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import Any
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
# The same settings as s3fs.S3FileSystem arguments (a source of documents in a bucket: parsers.sources.object_store),
# keyed by the pyarrow argument above; the region goes to the botocore client.
_S3FS_NAMES = {
    "access_key": "key",
    "secret_key": "secret",
    "session_token": "token",
    "endpoint_override": "endpoint_url",
}
# Arguments an fsspec filesystem takes besides its class's own, accepted as storage options as they are.
_FSSPEC_ARGUMENTS = {"use_listings_cache", "listings_expiry_time", "max_paths", "profile"}


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


def s3fs_arguments(storage_options: Mapping[str, Any]) -> dict[str, Any]:
    """s3fs.S3FileSystem keyword arguments from the store's storage options (S3_ARGUMENTS' keys, allow_http), so a
    bucket of documents is reached with the store's settings. No options: s3fs's own chain (AWS_* variables, a
    profile, the pod's role). An option s3fs takes by its own name (key, anon, client_kwargs, ...) passes as it is;
    any other key is a LocationError."""
    import s3fs  # type: ignore[import-untyped]  # a source's dependency, imported when a bucket of documents is opened

    own = set(inspect.signature(s3fs.S3FileSystem.__init__).parameters) - {"self", "kwargs"}
    arguments: dict[str, Any] = {}
    client: dict[str, Any] = {}
    for option, value in storage_options.items():
        if option == "allow_http":
            continue
        setting = S3_ARGUMENTS.get(option)
        if setting == "region":
            client["region_name"] = value
        elif setting is not None:
            arguments[_S3FS_NAMES[setting]] = value
        elif option in own | _FSSPEC_ARGUMENTS:
            arguments[option] = _fsspec_value(value)
        else:
            raise LocationError(
                f"storage option {option!r} is neither an S3 option ({', '.join(sorted(S3_ARGUMENTS))}, allow_http) "
                "nor an s3fs argument"
            )
    endpoint = arguments.get("endpoint_url")
    if endpoint and "://" not in endpoint:
        http = str(storage_options.get("allow_http", "")).lower() == "true"
        arguments["endpoint_url"] = f"{'http' if http else 'https'}://{endpoint}"
    if client:
        arguments["client_kwargs"] = {**arguments.get("client_kwargs", {}), **client}
    return arguments


def _fsspec_value(value: Any) -> Any:
    """Settings give every option as a string (JSON true -> "true"); s3fs wants booleans and dicts."""
    if not isinstance(value, str):
        return value
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    if value.startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise LocationError(f"storage option value {value!r} is not a JSON object: {exc}") from None
    return value
