"""Per-document metadata given explicitly: a `<file>.citekeeper.json` sidecar or markdown front matter."""
from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import yaml

from citekeeper.text import lone_surrogate
from parsers.model import ACCESS_SCOPES

SIDECAR_SUFFIX = ".citekeeper.json"
METADATA_KEYS = ("doc_id", "access_scope", "title")
MAX_SIDECAR_BYTES = 64 * 1024  # three short strings: anything larger is not a sidecar
MAX_VALUE_CHARS = 4096  # a doc_id or title longer than this is refused, not stored in every row

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
    """The block as YAML (see _StrictLoader), once its events show flat `key: value` lines: no anchors or
    aliases (an alias bomb expands to gigabytes), no merge keys (`<<: *base` could carry an access_scope the
    reader would not see), no nesting (100,000 levels would overflow the composer's recursion)."""
    try:
        _check_flat(block)
        values = yaml.load(block, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        raise MetadataError(f"front matter {_located(exc, block)}") from exc
    if not isinstance(values, dict):  # `access_scope:internal_only`: without the space YAML reads one string
        raise MetadataError(f"front matter must be `key: value` lines (a space after each colon), got {values!r:.80}")
    if "<<" in values:
        raise MetadataError("front matter: YAML merge keys (<<) are not allowed; write each key out")
    return values


def _check_flat(block: str) -> None:
    depth = 0
    for event in yaml.parse(block, Loader=yaml.BaseLoader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise MetadataError(f"front matter line {event.start_mark.line + _FIRST_BLOCK_LINE}: YAML anchors and aliases are not allowed")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > 2:  # the mapping, and a list value at most
                raise MetadataError(f"front matter line {event.start_mark.line + _FIRST_BLOCK_LINE}: values must be plain text, not nested")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _located(exc: yaml.YAMLError, block: str) -> str:
    """`line L[, column C]: problem`, L and C counted in the file (yaml counts from 0 within the block)."""
    if isinstance(exc, yaml.reader.ReaderError):  # an unprintable character, known by its offset only
        line = block.count("\n", 0, exc.position) + _FIRST_BLOCK_LINE
        return f"line {line}: invalid YAML: character U+{exc.character:04X} is not allowed"
    mark = exc.problem_mark or exc.context_mark
    problem = " ".join(part for part in (exc.context, exc.problem) if part)
    return f"line {mark.line + _FIRST_BLOCK_LINE}, column {mark.column + 1}: invalid YAML: {problem}"


def read_sidecar(path: Path, root: Path) -> dict[str, str]:
    """The sidecar's keys; {} when there is none. Raises MetadataError when it is unreadable or invalid, a
    link out of `root` (the source root, resolved), not a regular file (a FIFO would block, /dev/zero never
    end), or larger than MAX_SIDECAR_BYTES. Nothing of a refused sidecar is read into the message."""
    try:
        real = path.resolve(strict=True)
        mode = real.stat().st_mode
    except FileNotFoundError:
        return {} if not path.is_symlink() else _refuse(path, "is a broken symlink")
    except (OSError, RuntimeError) as exc:
        raise MetadataError(f"sidecar {path.name} unreadable: {getattr(exc, 'strerror', None) or exc}") from exc
    if not real.is_relative_to(root):
        _refuse(path, "is a symlink to a file outside the source root")
    if not stat.S_ISREG(mode):
        _refuse(path, "is not a regular file")
    try:
        with open(real, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NONBLOCK)) as handle:
            raw = handle.read(MAX_SIDECAR_BYTES + 1)
    except OSError as exc:
        raise MetadataError(f"sidecar {path.name} unreadable: {exc.strerror or exc}") from exc
    if len(raw) > MAX_SIDECAR_BYTES:
        _refuse(path, f"is over {MAX_SIDECAR_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8"), object_pairs_hook=_unique_keys)
    except MetadataError as exc:
        raise MetadataError(f"sidecar {path.name}: {exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MetadataError(f"sidecar {path.name} is not valid UTF-8 JSON: {exc}") from exc
    except RecursionError:
        raise MetadataError(f"sidecar {path.name} nests too deeply: it must hold one flat JSON object") from None
    if not isinstance(data, dict):
        raise MetadataError(f"sidecar {path.name} must hold a JSON object, not {type(data).__name__}")
    unknown = sorted(set(data) - set(METADATA_KEYS))
    if unknown:
        raise MetadataError(f"sidecar {path.name} has unknown keys {unknown!r:.200}; allowed: {list(METADATA_KEYS)}")
    return _validated(data, f"sidecar {path.name}")


def _refuse(path: Path, why: str):
    raise MetadataError(f"sidecar {path.name} {why}; the document is not ingested until it is fixed")


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object whose keys are unique: json.loads would keep the last `access_scope` given."""
    values: dict = {}
    for key, value in pairs:
        if key in values:
            raise MetadataError(f"key {key!r:.60} is given twice")
        values[key] = value
    return values


def _validated(values: dict, origin: str) -> dict[str, str]:
    for key, value in values.items():
        if not isinstance(value, str):
            raise MetadataError(f"{origin}: {key} must be a string, got {type(value).__name__} {value!r:.60}")
        if not value.strip():
            raise MetadataError(f"{origin}: {key} must be a non-empty string, got {value!r}")
        if len(value) > MAX_VALUE_CHARS:
            raise MetadataError(f"{origin}: {key} is {len(value)} characters long, over {MAX_VALUE_CHARS}")
        if lone_surrogate(value) is not None:
            raise MetadataError(f"{origin}: {key} holds a lone surrogate (an invalid \\u escape): not valid Unicode text")
    scope = values.get("access_scope")
    if scope is not None and scope not in ACCESS_SCOPES:
        raise MetadataError(f"{origin}: access_scope {scope!r} is not one of {list(ACCESS_SCOPES)}")
    return {key: value.strip() for key, value in values.items()}
