"""Per-document metadata given explicitly: a `<file>.citekeeper.json` sidecar or front matter (YAML between
`---` lines, or Hugo's TOML between `+++` lines). Front matter is read whole, nested as generators write it,
within bounds that refuse bombs; only the keys that decide identity and access must be plain text."""

from __future__ import annotations

import json
import os
import re
import stat
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, time
from functools import partial
from pathlib import Path

import yaml

from citekeeper.sources import DEFAULT_AUTHORITY_LEVELS, parse_timestamp
from citekeeper.text import lone_surrogate
from parsers.records import ACCESS_SCOPES

SIDECAR_SUFFIX = ".citekeeper.json"
IDENTITY_KEYS = ("doc_id", "access_scope")  # decide which document it is and who may see it: plain text or refused
METADATA_KEYS = (*IDENTITY_KEYS, "title")
# The source fields (citekeeper.schema.SOURCE_FIELDS) by the kind of value they hold.
TEXT_FIELDS = ("source_type", "source_url", "authority", "source_version")
DATE_FIELDS = ("published_at", "updated_at")
LIST_FIELDS = ("access_groups", "scope_labels")
SIDECAR_ALIASES = {"scope": "scope_labels", "version": "source_version"}  # the names the issue writes them by
SOURCE_KEYS = (*TEXT_FIELDS, *DATE_FIELDS, *LIST_FIELDS, "summary")  # SourceFields' names
SIDECAR_KEYS = (*METADATA_KEYS, *SOURCE_KEYS, *SIDECAR_ALIASES)
MAX_SIDECAR_BYTES = 64 * 1024  # a few short strings and lists: anything larger is not a sidecar
MAX_VALUE_CHARS = 4096  # a doc_id, title, summary or label longer than this is refused, not stored in every row
# Bounds of a front matter block: real sites nest a few levels (Hugo's `menu: docs: weight:`) in a few KiB;
# a nesting or alias bomb passes none of them.
MAX_FRONT_MATTER_BYTES = 64 * 1024
MAX_FRONT_MATTER_DEPTH = 64
MAX_FRONT_MATTER_NODES = 10_000

# A leading `---` (YAML) or `+++` (TOML) block, after blank lines at most (Hugo allows them), whose first line
# looks like `key:` / `key =` (so a leading rule is not one), closed by the same fence (or `...` for YAML).
_YAML_BLOCK = re.compile(
    r"\A(?:[ \t]*\r?\n)*---[ \t]*\r?\n(?=[A-Za-z_][\w-]*[ \t]*:)(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S
)
_TOML_LINE = re.compile(r"\bline (\d+)")  # where tomllib's message says the error is, within the block
_TOML_BLOCK = re.compile(
    r"\A(?:[ \t]*\r?\n)*\+\+\+[ \t]*\r?\n(?=[A-Za-z_\"'\[][^\n]*[=\]])(.*?)\r?\n\+\+\+[ \t]*(?:\r?\n|\Z)", re.S
)


class MetadataError(ValueError):
    """A sidecar or front matter that cannot be trusted; the document is quarantined rather than guessed."""


@dataclass(frozen=True)
class FrontMatter:
    """A text's front matter: the keys citekeeper reads (METADATA_KEYS, as written), the whole block as JSON
    (None when there is none) and the text after it; the block's values as that JSON holds them (TOML dates
    in ISO 8601) and, for YAML, the line of each top-level key."""

    explicit: dict[str, str]
    as_json: str | None
    body: str
    values: dict = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)


def read_front_matter(text: str) -> FrontMatter:
    """The front matter of `text`; text without one is all body. Raises MetadataError naming the line."""
    for block, load in ((_YAML_BLOCK, _load_yaml), (_TOML_BLOCK, _load_toml)):
        if match := block.match(text):
            first_line = text.count("\n", 0, match.start(1)) + 1
            values, explicit, lines = load(_bounded(match.group(1)), first_line)
            as_json = json.dumps(values, ensure_ascii=False, default=_json_scalar)
            return FrontMatter(
                _validated(explicit, "front matter"), as_json, text[match.end() :], json.loads(as_json), lines
            )
    return FrontMatter({}, None, text)


def front_matter_head(text: str) -> str:
    """The leading part of `text` that read_front_matter reads (the block and its fences; "" when there is
    none): read_front_matter(front_matter_head(text)) has the same keys, values and lines as of the whole text."""
    for block in (_YAML_BLOCK, _TOML_BLOCK):
        if match := block.match(text):
            return text[: match.end()]
    return ""


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


_CORE_SCALARS: dict[str, tuple[str, Callable[[str], object]]] = {
    "tag:yaml.org,2002:null": (r"^(?:~|null|Null|NULL|)$", lambda text: None),
    "tag:yaml.org,2002:bool": (r"^(?:true|True|TRUE|false|False|FALSE)$", lambda text: text.lower() == "true"),
    "tag:yaml.org,2002:int": (
        r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$",
        lambda text: int(text, 0) if text[:2] in ("0o", "0x") else int(text),
    ),
    "tag:yaml.org,2002:float": (r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$", float),
}


def _construct_scalar(convert: Callable[[str], object], loader: yaml.BaseLoader, node: yaml.ScalarNode) -> object:
    return convert(loader.construct_scalar(node))


for _tag, (_pattern, _convert) in _CORE_SCALARS.items():
    _StrictLoader.add_implicit_resolver(_tag, re.compile(_pattern), [*list("-+0123456789.~nNtTfF"), ""])
    _StrictLoader.add_constructor(_tag, partial(_construct_scalar, _convert))


def _load_yaml(block: str, first_line: int) -> tuple[dict, dict[str, str], dict[str, int]]:
    """(the block's values, its METADATA_KEYS as written, each top-level key's line), once its events show it
    within bounds: no anchors or aliases (an alias bomb expands to gigabytes), no merge keys (`<<: *base` could
    carry an access_scope the reader would not see), MAX_FRONT_MATTER_DEPTH and MAX_FRONT_MATTER_NODES (the event
    stream is read without recursion, so 100,000 levels are refused before the composer would overflow)."""
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
    # `access_scope:internal_only`: without the space YAML reads one string (a mapping's node is the root)
    if not isinstance(values, dict) or not isinstance(root, yaml.MappingNode):
        raise MetadataError(f"front matter must be `key: value` lines (a space after each colon), got {values!r:.80}")
    if "<<" in values:
        raise MetadataError("front matter: YAML merge keys (<<) are not allowed; write each key out")
    lines = {key_node.value: key_node.start_mark.line + first_line for key_node, _ in root.value}
    return values, _written_keys(root, first_line), lines


def _check_bounds(block: str, first_line: int) -> None:
    depth = nodes = 0
    for event in yaml.parse(block, Loader=yaml.BaseLoader):
        line = event.start_mark.line + first_line  # type: ignore[union-attr]  # the parser marks every event
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
    if not isinstance(exc, yaml.MarkedYAMLError) or (mark := exc.problem_mark or exc.context_mark) is None:
        return f"invalid YAML: {exc}"  # no position known (the loader's errors all carry one)
    problem = " ".join(part for part in (exc.context, exc.problem) if part)
    return f"line {mark.line + first_line}, column {mark.column + 1}: invalid YAML: {problem}"


# ---------------------------------------------------------------------- TOML


def _load_toml(block: str, first_line: int) -> tuple[dict, dict[str, str], dict[str, int]]:
    """(the block's values, its METADATA_KEYS, no lines: tomllib keeps none). TOML has no aliases, and keys given
    twice are its own error; nesting is bounded by _check_nesting after loading (and by Python's recursion limit
    while loading)."""
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
    return values, written, {}


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


def read_sidecar(path: Path, root: Path, authority_levels: tuple[str, ...] = DEFAULT_AUTHORITY_LEVELS) -> dict:
    """The sidecar's keys (SIDECAR_KEYS, aliases under their field's name, dates as UTC instants); {} when
    there is none. Raises MetadataError naming the key when a value is invalid (an authority not in
    `authority_levels`, a date that does not parse), and when the file is unreadable, a link out of `root` (the
    source root, resolved), not a regular file (a FIFO would block, /dev/zero never end), or larger than
    MAX_SIDECAR_BYTES. Nothing of a refused sidecar is read into the message."""
    try:
        real = path.resolve(strict=True)
        mode = real.stat().st_mode
    except FileNotFoundError:
        return {} if not path.is_symlink() else _refuse(path.name, "is a broken symlink")
    except (OSError, RuntimeError) as exc:
        raise MetadataError(f"sidecar {path.name} unreadable: {getattr(exc, 'strerror', None) or exc}") from exc
    if not real.is_relative_to(root):
        _refuse(path.name, "is a symlink to a file outside the source root")
    if not stat.S_ISREG(mode):
        _refuse(path.name, "is not a regular file")
    try:
        with open(real, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NONBLOCK)) as handle:
            raw = handle.read(MAX_SIDECAR_BYTES + 1)
    except OSError as exc:
        raise MetadataError(f"sidecar {path.name} unreadable: {exc.strerror or exc}") from exc
    return sidecar_values(raw, path.name, authority_levels)


def sidecar_values(raw: bytes, name: str, authority_levels: tuple[str, ...] = DEFAULT_AUTHORITY_LEVELS) -> dict:
    """What read_sidecar returns, of a sidecar's bytes (at most MAX_SIDECAR_BYTES + 1 of them read) named `name`."""
    if len(raw) > MAX_SIDECAR_BYTES:
        _refuse(name, f"is over {MAX_SIDECAR_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8"), object_pairs_hook=_unique_keys)
    except MetadataError as exc:
        raise MetadataError(f"sidecar {name}: {exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MetadataError(f"sidecar {name} is not valid UTF-8 JSON: {exc}") from exc
    except RecursionError:
        raise MetadataError(f"sidecar {name} nests too deeply: it must hold one flat JSON object") from None
    if not isinstance(data, dict):
        raise MetadataError(f"sidecar {name} must hold a JSON object, not {type(data).__name__}")
    unknown = sorted(set(data) - set(SIDECAR_KEYS))
    if unknown:
        raise MetadataError(f"sidecar {name} has unknown keys {unknown!r:.200}; allowed: {list(SIDECAR_KEYS)}")
    for alias, field_name in SIDECAR_ALIASES.items():
        if alias in data and field_name in data:
            raise MetadataError(f"sidecar {name}: {alias} and {field_name} name one field: give one of them")
    origin = f"sidecar {name}"
    data = {SIDECAR_ALIASES.get(key, key): value for key, value in _validated(data, origin).items()}
    return data | _interpreted(data, origin, authority_levels)


def _refuse(name: str, why: str):
    raise MetadataError(f"sidecar {name} {why}; the document is not ingested until it is fixed")


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object whose keys are unique: json.loads would keep the last `access_scope` given."""
    values: dict = {}
    for key, value in pairs:
        if key in values:
            raise MetadataError(f"key {key!r:.60} is given twice")
        values[key] = value
    return values


def _validated(values: dict, origin: str) -> dict:
    """The keys checked: text, or a list of texts for LIST_FIELDS; an empty title is dropped (the parser's
    heading serves), any other empty text refused."""
    values = {
        key: value
        for key, value in values.items()
        if not (key == "title" and isinstance(value, str) and not value.strip())
    }
    checked: dict[str, str | list[str]] = {}
    for key, value in values.items():
        if SIDECAR_ALIASES.get(key, key) not in LIST_FIELDS:
            checked[key] = _text(key, value, origin)
        elif isinstance(value, list):
            checked[key] = [_text(f"{key}[{i}]", item, origin) for i, item in enumerate(value)]
        else:
            raise MetadataError(f"{origin}: {key} must be a list of strings, got {type(value).__name__} {value!r:.60}")
    scope = checked.get("access_scope")
    if scope is not None and scope not in ACCESS_SCOPES:
        raise MetadataError(f"{origin}: access_scope {scope!r} is not one of {list(ACCESS_SCOPES)}")
    return checked


def _text(key: str, value: object, origin: str) -> str:
    """`value` stripped, once it is a non-empty string of valid Unicode within MAX_VALUE_CHARS."""
    if not isinstance(value, str):
        raise MetadataError(f"{origin}: {key} must be a string, got {type(value).__name__} {value!r:.60}")
    if not value.strip():
        raise MetadataError(f"{origin}: {key} must be a non-empty string, got {value!r}")
    if len(value) > MAX_VALUE_CHARS:
        raise MetadataError(f"{origin}: {key} is {len(value)} characters long, over {MAX_VALUE_CHARS}")
    if lone_surrogate(value) is not None:
        raise MetadataError(f"{origin}: {key} holds a lone surrogate (an invalid \\u escape): not valid Unicode text")
    return value.strip()


def _interpreted(values: dict, origin: str, authority_levels: tuple[str, ...], label: str | None = None) -> dict:
    """The dates of `values` as UTC instants, once its authority is checked to be one of `authority_levels`.
    Raises MetadataError naming the key (`label`, where it was read from another key)."""
    authority = values.get("authority")
    if authority is not None and authority not in authority_levels:
        raise MetadataError(
            f"{origin}: {label or 'authority'} {authority!r} "
            f"is not one of the authority levels {list(authority_levels)}"
        )
    dates = {}
    for key in DATE_FIELDS:
        if key in values:
            try:
                dates[key] = parse_timestamp(values[key])
            except ValueError as exc:
                raise MetadataError(f"{origin}: {label or key} {exc}") from None
    return dates


# ---------------------------------------------------------------------- source fields


def front_matter_fields(
    front_matter: FrontMatter, keys: Mapping[str, tuple[str, ...]], authority_levels: tuple[str, ...]
) -> dict:
    """The source fields the front matter gives, each from the first of its `keys` (field -> front matter keys,
    a dotted key reading a nested map) that holds a value of the field's kind. A key holding another kind is
    not that field (Jekyll's `published: false`, MkDocs' `date:` map), except `access_groups`, which fails
    closed. A text that is no date, or an authority not in `authority_levels`, raises MetadataError naming
    the key and its line: the generators refuse such a date too, and a misspelt authority would rank lowest."""
    found: dict[str, object] = {}
    if not front_matter.values:  # most documents have none: no key to look up
        return found
    for name, candidates in keys.items():
        for key in candidates:
            given = _lookup(front_matter.values, key)
            if given is None:  # absent: no field, and nothing to say of it
                continue
            origin, label = _key_origin(front_matter, key), key if key == name else f"{key} ({name})"
            value = _front_matter_value(name, given, origin, label)
            if value is not None:
                found |= {name: value} | _interpreted({name: value}, origin, authority_levels, label)
                break
    return found


def _key_origin(front_matter: FrontMatter, key: str) -> str:
    line = front_matter.lines.get(key.partition(".")[0])
    return "front matter" if line is None else f"front matter line {line}"


def _lookup(values: object, key: str) -> object:
    """values[key], or for a dotted key the nested map's value (None where there is none)."""
    if not isinstance(values, dict):
        return None
    if key in values:
        return values[key]
    head, dot, rest = key.partition(".")
    return _lookup(values.get(head), rest) if dot else None


def _front_matter_value(name: str, value: object, origin: str, label: str) -> str | list[str] | None:
    """`value` as field `name` holds it (a text, or a list of texts for LIST_FIELDS: one text is a list of one),
    None when it is of another kind. Messages name the key by `label`."""
    if name in LIST_FIELDS:
        items = [value] if isinstance(value, str) else value
        if isinstance(items, list) and all(isinstance(item, str) and item.strip() for item in items):
            return [_text(f"{label}[{i}]", item, origin) for i, item in enumerate(items)]
        if name == "access_groups" and value is not None:
            raise MetadataError(f"{origin}: {label} must be a list of group names, got {value!r:.60}")
        return None
    return _text(label, value, origin) if isinstance(value, str) and value.strip() else None


def given_source_fields(front_matter: dict, sidecars: list[dict]) -> dict:
    """The source fields a document's own metadata gives: a sidecar's over the front matter's (the sidecar where
    the walk found the file over the one where it really is), but access_groups, the groups every source that
    names some allows: fail closed, as for access_scope. Sources naming groups and sharing none raise
    MetadataError: an empty list would open the document to every audience."""
    given: dict = {}
    for values in (front_matter, *reversed(sidecars)):
        given |= {key: value for key, value in values.items() if key in SOURCE_KEYS}
    named = [values["access_groups"] for values in (front_matter, *sidecars) if values.get("access_groups")]
    if named:
        shared = [group for group in dict.fromkeys(named[0]) if all(group in groups for groups in named)]
        if not shared:
            raise MetadataError(
                f"access_groups {' and '.join(map(str, named))} share no group: give one list the sources agree on"
            )
        given["access_groups"] = shared
    return given
