"""Per-document metadata given explicitly: a `<file>.citekeeper.json` sidecar or markdown front matter."""
from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from parsers.model import ACCESS_SCOPES

SIDECAR_SUFFIX = ".citekeeper.json"
METADATA_KEYS = ("doc_id", "access_scope", "title")

# Front matter: a leading `---` block whose first line looks like `key:` (so a leading rule is not one),
# closed by a `---` or `...` line. Its first line is line 2 of the file.
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(?=[A-Za-z_][\w-]*[ \t]*:)(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
_FIRST_BLOCK_LINE = 2


class MetadataError(ValueError):
    """A sidecar or front matter that cannot be trusted; the document is quarantined rather than guessed."""


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """(known keys found in the front matter, the text after it). Text without front matter is returned whole."""
    match = _FRONT_MATTER.match(text)
    if not match:
        return {}, text
    values = _load_yaml_mapping(match.group(1))
    found = {key: value for key, value in values.items() if key in METADATA_KEYS}
    return _validated(found, "front matter"), text[match.end() :]


class _StrictLoader(yaml.BaseLoader):
    """BaseLoader keeps every scalar as the text written (`doc_id: 007` stays "007", `title: No` stays "No")
    and builds nothing but str, list and dict, so it is as safe as safe_load. A key given twice is an error:
    YAML would keep the last `access_scope`, and redaction must fail closed."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def _load_yaml_mapping(block: str) -> dict:
    """The block as YAML (see _StrictLoader)."""
    try:
        values = yaml.load(block, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        raise MetadataError(f"front matter {_located(exc, block)}") from exc
    if not isinstance(values, dict):  # `access_scope:internal_only`: without the space YAML reads one string
        raise MetadataError(f"front matter must be `key: value` lines (a space after each colon), got {values!r}")
    return values


def _located(exc: yaml.YAMLError, block: str) -> str:
    """`line L[, column C]: problem`, L and C counted in the file (yaml counts from 0 within the block)."""
    if isinstance(exc, yaml.reader.ReaderError):  # an unprintable character, known by its offset only
        line = block.count("\n", 0, exc.position) + _FIRST_BLOCK_LINE
        return f"line {line}: invalid YAML: character U+{exc.character:04X} is not allowed"
    mark = exc.problem_mark or exc.context_mark
    problem = " ".join(part for part in (exc.context, exc.problem) if part)
    return f"line {mark.line + _FIRST_BLOCK_LINE}, column {mark.column + 1}: invalid YAML: {problem}"


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
        if not isinstance(value, str):
            raise MetadataError(f"{origin}: {key} must be a string, got {type(value).__name__} {value!r}")
        if not value.strip():
            raise MetadataError(f"{origin}: {key} must be a non-empty string, got {value!r}")
    scope = values.get("access_scope")
    if scope is not None and scope not in ACCESS_SCOPES:
        raise MetadataError(f"{origin}: access_scope {scope!r} is not one of {list(ACCESS_SCOPES)}")
    return {key: value.strip() for key, value in values.items()}
