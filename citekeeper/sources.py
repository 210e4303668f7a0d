"""The source model's vocabulary (issue 31): the ordered authority levels and what a level is worth in the
conflict ranking. Ingest validates a document's `authority` against the configured levels; verification ranks
evidence by the same levels (docs/answers.md, "Sources"). Also where ingest reads a document's source fields
from: the default front matter keys, the URL template's placeholders and the date forms (docs/ingest.md, "Source
fields")."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import PurePosixPath
from string import Formatter
from urllib.parse import quote

# The design's order, most authoritative first; a deployment may configure its own (same order rule).
DEFAULT_AUTHORITY_LEVELS = (
    "official_spec",  # official specification or API docs
    "official_source",  # official source code and tests
    "runtime_observation",
    "official_example",
    "certified_internal",  # certified internal docs
    "community",  # community articles
)


def authority_weight(authority: str | None, levels: tuple[str, ...] = DEFAULT_AUTHORITY_LEVELS) -> float:
    """A(e) in [0, 1]: 1 for the first level, 0 for the last, evenly between; 0 for none or an unknown one."""
    if authority not in levels:
        return 0.0
    if len(levels) == 1:
        return 1.0
    return (len(levels) - 1 - levels.index(authority)) / (len(levels) - 1)


# ---------------------------------------------------------------------- where a document's fields come from

# The front matter keys each source field is read from, the first one present first (docs/ingest.md, "Source
# fields"; ParseConfig.source_fields_map replaces a field's list). A dotted key reads a nested map: MkDocs'
# blog writes `date: {created: ..., updated: ...}`. summary is never read from front matter: Hugo's `summary`
# is page text, and a redacted document shows only what its sidecar says.
DEFAULT_SOURCE_KEYS: dict[str, tuple[str, ...]] = {
    "published_at": ("date", "date.created", "publishDate", "published", "created"),
    "updated_at": ("lastmod", "date.updated", "updated", "last_modified", "modified"),
    "source_url": ("permalink", "canonical_url", "url"),
    "source_type": ("source_type",),
    "authority": ("authority",),
    "source_version": ("version", "source_version"),
    "access_groups": ("access_groups",),
    "scope_labels": ("scope", "scope_labels"),
}
# Fields a setting may give a whole glob of documents (ParseConfig.source_defaults).
DEFAULTABLE_FIELDS = ("source_type", "authority", "source_version")
# What a source URL template may name, each percent-encoded for a URL path (`/` kept): the document's path under
# the source root (`guide/intro.md`), without its extension (`guide/intro`), its file name without extension
# (`intro`), its folder (`guide`, empty at the root) and its doc_id.
URL_PLACEHOLDERS = ("path", "path_without_ext", "stem", "dir", "doc_id")

# Jekyll's `2024-01-02 10:00:00 +0100`: ISO 8601 but for the space before the offset.
_SPACED_OFFSET = re.compile(r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?) +([+-]\d{2}:?\d{2}|Z)$")


def parse_timestamp(text: str) -> datetime:
    """A written date as a UTC instant: ISO 8601 (a date alone is midnight UTC, a time without offset is UTC,
    an offset is converted) or Jekyll's `2024-01-02 10:00:00 +0100`. Raises ValueError saying what it expects."""
    written = text.strip()
    if spaced := _SPACED_OFFSET.match(written):
        written = f"{spaced[1]}T{spaced[2]}{spaced[3]}"
    try:
        value = datetime.fromisoformat(written)
    except ValueError:
        raise ValueError(
            f"{text!r:.80} is not a date: write ISO 8601 (2024-01-02, 2024-01-02T10:00:00+01:00) "
            "or 2024-01-02 10:00:00 +0100"
        ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def check_url_template(template: str) -> None:
    """Raises ValueError when the template is malformed or names a placeholder other than URL_PLACEHOLDERS."""
    try:
        named = {name for _, name, _, _ in Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise ValueError(f"source URL template {template!r}: {exc} (write a literal brace as {{{{ or }}}})") from None
    unknown = sorted(named - set(URL_PLACEHOLDERS))
    if unknown:
        raise ValueError(f"source URL template {template!r} names {unknown}; placeholders: {list(URL_PLACEHOLDERS)}")


def render_source_url(template: str, source_path: str, doc_id: str) -> str:
    """The template filled in for one document (check_url_template first)."""
    stem_path = PurePosixPath(source_path)
    values = {
        "path": source_path,
        "path_without_ext": str(stem_path.with_suffix("")),
        "stem": stem_path.stem,
        "dir": "" if stem_path.parent == PurePosixPath(".") else str(stem_path.parent),
        "doc_id": doc_id,
    }
    return template.format(**{name: quote(value, safe="/") for name, value in values.items()})
