"""Per-document metadata given explicitly: a `<file>.citekeeper.json` sidecar or markdown front matter."""
from __future__ import annotations

import json
import re
from pathlib import Path

from parsers.model import ACCESS_SCOPES

SIDECAR_SUFFIX = ".citekeeper.json"
METADATA_KEYS = ("doc_id", "access_scope", "title")

# Front matter: a leading `---` block whose first line looks like `key: value` (so a leading rule is not one).
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(?=[A-Za-z_][\w-]*[ \t]*:)(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
_FRONT_MATTER_LINE = re.compile(r"^([A-Za-z_][\w-]*)[ \t]*:[ \t]*(.*?)[ \t]*$")


class MetadataError(ValueError):
    """A sidecar or front matter that cannot be trusted; the document is quarantined rather than guessed."""


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """(known keys found in the front matter, the text after it). Text without front matter is returned whole."""
    match = _FRONT_MATTER.match(text)
    if not match:
        return {}, text
    found = {}
    for line in match.group(1).splitlines():
        line_match = _FRONT_MATTER_LINE.match(line)
        if line_match and line_match.group(1) in METADATA_KEYS:
            found[line_match.group(1)] = _unquote(line_match.group(2))
    return _validated(found, "front matter"), text[match.end() :]


def read_sidecar(path: Path) -> dict[str, str]:
    """The sidecar's keys; {} when there is none. Raises MetadataError when it is unreadable or invalid."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise MetadataError(f"sidecar {path.name} unreadable: {exc.strerror or exc}") from exc
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MetadataError(f"sidecar {path.name} is not valid UTF-8 JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise MetadataError(f"sidecar {path.name} must hold a JSON object, not {type(data).__name__}")
    unknown = sorted(set(data) - set(METADATA_KEYS))
    if unknown:
        raise MetadataError(f"sidecar {path.name} has unknown keys {unknown}; allowed: {list(METADATA_KEYS)}")
    return _validated(data, f"sidecar {path.name}")


def _validated(values: dict, origin: str) -> dict[str, str]:
    for key, value in values.items():
        if not isinstance(value, str) or not value.strip():
            raise MetadataError(f"{origin}: {key} must be a non-empty string, got {value!r}")
    scope = values.get("access_scope")
    if scope is not None and scope not in ACCESS_SCOPES:
        raise MetadataError(f"{origin}: access_scope {scope!r} is not one of {list(ACCESS_SCOPES)}")
    return {key: value.strip() for key, value in values.items()}


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value
