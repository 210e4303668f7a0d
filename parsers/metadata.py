"""Per-document metadata given explicitly: a `<file>.citekeeper.json` sidecar or front matter (YAML between
`---` lines, or Hugo's TOML between `+++` lines). Front matter is read whole, nested as generators write it,
within bounds that refuse bombs; only the keys that decide identity and access must be plain text."""
from __future__ import annotations

import json
import os
import re
import stat
import tomllib
from dataclasses import dataclass
from datetime import date, time
from pathlib import Path

import yaml

from citekeeper.text import lone_surrogate
from parsers.model import ACCESS_SCOPES

SIDECAR_SUFFIX = ".citekeeper.json"
IDENTITY_KEYS = ("doc_id", "access_scope")  # decide which document it is and who may see it: plain text or refused
METADATA_KEYS = (*IDENTITY_KEYS, "title")
MAX_SIDECAR_BYTES = 64 * 1024  # three short strings: anything larger is not a sidecar
MAX_VALUE_CHARS = 4096  # a doc_id or title longer than this is refused, not stored in every row
# Bounds of a front matter block: real sites nest a few levels (Hugo's `menu: docs: weight:`) in a few KiB;
# a nesting or alias bomb passes none of them.
MAX_FRONT_MATTER_BYTES = 64 * 1024
MAX_FRONT_MATTER_DEPTH = 64
MAX_FRONT_MATTER_NODES = 10_000

# A leading `---` (YAML) or `+++` (TOML) block, after blank lines at most (Hugo allows them), whose first line
# looks like `key:` / `key =` (so a leading rule is not one), closed by the same fence (or `...` for YAML).
_YAML_BLOCK = re.compile(r"\A(?:[ \t]*\r?\n)*---[ \t]*\r?\n(?=[A-Za-z_][\w-]*[ \t]*:)(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
_TOML_LINE = re.compile(r"\bline (\d+)")  # where tomllib's message says the error is, within the block
_TOML_BLOCK = re.compile(r"\A(?:[ \t]*\r?\n)*\+\+\+[ \t]*\r?\n(?=[A-Za-z_\"'\[][^\n]*[=\]])(.*?)\r?\n\+\+\+[ \t]*(?:\r?\n|\Z)", re.S)


class MetadataError(ValueError):
    """A sidecar or front matter that cannot be trusted; the document is quarantined rather than guessed."""


@dataclass(frozen=True)
class FrontMatter:
    """A text's front matter: the keys citekeeper reads (METADATA_KEYS, as written), the whole block as JSON
    (None when there is none) and the text after it."""

    explicit: dict[str, str]
    as_json: str | None
    body: str


def read_front_matter(text: str) -> FrontMatter:
    """The front matter of `text`; text without one is all body. Raises MetadataError naming the line."""
    for block, load in ((_YAML_BLOCK, _load_yaml), (_TOML_BLOCK, _load_toml)):
        if match := block.match(text):
            first_line = text.count("\n", 0, match.start(1)) + 1
            values, explicit = load(_bounded(match.group(1)), first_line)
            as_json = json.dumps(values, ensure_ascii=False, default=_json_scalar)
            return FrontMatter(_validated(explicit, "front matter"), as_json, text[match.end() :])
    return FrontMatter({}, None, text)


def _bounded(block: str) -> str:
    size = len(block.encode("utf-8", "surrogatepass"))
    if size > MAX_FRONT_MATTER_BYTES:
        raise MetadataError(f"front matter is {size:,} bytes, over the limit of {MAX_FRONT_MATTER_BYTES:,}")
    return block


def _json_scalar(value: object) -> str:
    if isinstance(value, date | time):  # TOML's dates and times: kept as written in ISO 8601
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not a front matter value")


# ---------------------------------------------------------------------- YAML


class _StrictLoader(yaml.BaseLoader):
    """Builds nothing but str, int, float, bool, None, list and dict, so it is as safe as safe_load. Plain
    scalars are typed by YAML 1.2's core schema, which Hugo, MkDocs and VitePress read: `draft: true`,
    `weight: 50`; `date: 2024-01-02` and `title: No` stay the text written (YAML 1.1 would make a datetime and
    False). A key given twice is an error: YAML would keep the last `access_scope`, and redaction must fail
    closed."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


_CORE_SCALARS = {
    "tag:yaml.org,2002:null": (r"^(?:~|null|Null|NULL|)$", lambda text: None),
    "tag:yaml.org,2002:bool": (r"^(?:true|True|TRUE|false|False|FALSE)$", lambda text: text.lower() == "true"),
    "tag:yaml.org,2002:int": (r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", lambda text: int(text, 0) if text[:2] in ("0o", "0x") else int(text)),
    "tag:yaml.org,2002:float": (r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$", float),
}
for _tag, (_pattern, _convert) in _CORE_SCALARS.items():
    _StrictLoader.add_implicit_resolver(_tag, re.compile(_pattern), list("-+0123456789.~nNtTfF") + [""])
    _StrictLoader.add_constructor(_tag, lambda loader, node, convert=_convert: convert(loader.construct_scalar(node)))


def _load_yaml(block: str, first_line: int) -> tuple[dict, dict[str, str]]:
    """(the block's values, its METADATA_KEYS as written), once its events show it within bounds: no anchors
    or aliases (an alias bomb expands to gigabytes), no merge keys (`<<: *base` could carry an access_scope the
    reader would not see), MAX_FRONT_MATTER_DEPTH and MAX_FRONT_MATTER_NODES (the event stream is read without
    recursion, so 100,000 levels are refused before the composer would overflow)."""
    try:
        _check_bounds(block, first_line)
        loader = _StrictLoader(block)
        try:
            root = loader.get_single_node()
            values = loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
    except MetadataError:
        raise
    except yaml.YAMLError as exc:
        raise MetadataError(f"front matter {_located(exc, block, first_line)}") from exc
    except ValueError as exc:  # an explicit tag on text it does not fit: `!!int abc`
        raise MetadataError(f"front matter: invalid YAML value: {exc}") from exc
    if not isinstance(values, dict):  # `access_scope:internal_only`: without the space YAML reads one string
        raise MetadataError(f"front matter must be `key: value` lines (a space after each colon), got {values!r:.80}")
    if "<<" in values:
        raise MetadataError("front matter: YAML merge keys (<<) are not allowed; write each key out")
    return values, _written_keys(root, first_line)


def _check_bounds(block: str, first_line: int) -> None:
    depth = nodes = 0
    for event in yaml.parse(block, Loader=yaml.BaseLoader):
        line = event.start_mark.line + first_line
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise MetadataError(f"front matter line {line}: YAML anchors and aliases are not allowed")
        if isinstance(event, yaml.ScalarEvent | yaml.CollectionStartEvent):
            nodes += 1
            if nodes > MAX_FRONT_MATTER_NODES:
                raise MetadataError(f"front matter line {line}: over {MAX_FRONT_MATTER_NODES:,} values")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_FRONT_MATTER_DEPTH:
                raise MetadataError(f"front matter line {line}: nested over {MAX_FRONT_MATTER_DEPTH} levels deep")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _written_keys(root: yaml.MappingNode, first_line: int) -> dict[str, str]:
    """METADATA_KEYS as written (`doc_id: 007` is "007", `title: No` is "No"). A nested or list value of an
    identity key is refused; a title that is not plain text is left to the parser's heading."""
    written = {}
    for key_node, value_node in root.value:
        key = key_node.value
        if key not in METADATA_KEYS:
            continue
        if isinstance(value_node, yaml.ScalarNode):
            written[key] = value_node.value
        elif key in IDENTITY_KEYS:
            line = key_node.start_mark.line + first_line
            raise MetadataError(f"front matter line {line}: {key} must be plain text, not a {_node_kind(value_node)}")
    return written


def _node_kind(node: yaml.Node) -> str:
    return "list" if isinstance(node, yaml.SequenceNode) else "mapping"


def _located(exc: yaml.YAMLError, block: str, first_line: int) -> str:
    """`line L[, column C]: problem`, L and C counted in the file (yaml counts from 0 within the block)."""
    if isinstance(exc, yaml.reader.ReaderError):  # an unprintable character, known by its offset only
        line = block.count("\n", 0, exc.position) + first_line
        return f"line {line}: invalid YAML: character U+{exc.character:04X} is not allowed"
    mark = exc.problem_mark or exc.context_mark
    problem = " ".join(part for part in (exc.context, exc.problem) if part)
    return f"line {mark.line + first_line}, column {mark.column + 1}: invalid YAML: {problem}"


# ---------------------------------------------------------------------- TOML


def _load_toml(block: str, first_line: int) -> tuple[dict, dict[str, str]]:
    """(the block's values, its METADATA_KEYS). TOML has no aliases, and keys given twice are its own error;
    nesting is bounded by _check_nesting after loading (and by Python's recursion limit while loading)."""
    try:
        values = tomllib.loads(block)
    except tomllib.TOMLDecodeError as exc:  # tomllib counts lines within the block: counted in the file here
        located = _TOML_LINE.sub(lambda at: f"line {int(at[1]) + first_line - 1}", str(exc))
        raise MetadataError(f"front matter: invalid TOML: {located}") from exc
    except RecursionError:
        raise MetadataError(f"front matter: nested over {MAX_FRONT_MATTER_DEPTH} levels deep") from None
    _check_nesting(values)
    written = {}
    for key in METADATA_KEYS:
        value = values.get(key)
        if isinstance(value, str):
            written[key] = value
        elif key in IDENTITY_KEYS and value is not None:
            raise MetadataError(f"front matter: {key} must be a string, got {type(value).__name__}")
    return values, written


def _check_nesting(values: object) -> None:
    """MAX_FRONT_MATTER_DEPTH and MAX_FRONT_MATTER_NODES over loaded values, without recursion."""
    pending, nodes = [(values, 1)], 0
    while pending:
        value, depth = pending.pop()
        nodes += 1
        if nodes > MAX_FRONT_MATTER_NODES:
            raise MetadataError(f"front matter: over {MAX_FRONT_MATTER_NODES:,} values")
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        if children and depth > MAX_FRONT_MATTER_DEPTH:
            raise MetadataError(f"front matter: nested over {MAX_FRONT_MATTER_DEPTH} levels deep")
        pending.extend((child, depth + 1) for child in children)


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
    """The keys checked; an empty title is dropped (the parser's heading serves), an empty identity refused."""
    values = {key: value for key, value in values.items() if not (key == "title" and isinstance(value, str) and not value.strip())}
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
