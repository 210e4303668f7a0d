"""`--from llamaindex`: a LlamaIndex Response (a CitationQueryEngine's, or any query engine's)."""

from __future__ import annotations

import re

from citekeeper.answers.formats.reader import Cited, ShapeError, get_field
from citekeeper.text import marker_ids

_SOURCE_PREFIX = re.compile(r"^\s*Source \d+:\s*")
_MARKER_AT = re.compile(r"\[\s*\d+(?:\s*,\s*\d+)*\s*\]")


def read(response) -> tuple[str, list[Cited]]:
    """Response: `response` text with [N] markers (CitationQueryEngine), `source_nodes` the Nth node of each. A
    response without markers cites every node for the whole answer."""
    text = get_field(response, "response", "response.response", str)
    nodes = get_field(response, "source_nodes", "response.source_nodes", list)
    markers = [(m, int(ref)) for m in _MARKER_AT.finditer(text) for ref in marker_ids(m.group(0)) if ref.isdigit()]
    cited = []
    for match, ref in markers:
        if not 1 <= ref <= len(nodes):
            raise ShapeError("response.response", f"marker [{ref}] names source node {ref}, of {len(nodes)}")
        cited.append(
            _node(nodes[ref - 1], f"response.source_nodes.{ref - 1}", (max(match.start() - 1, 0), match.end()))
        )
    if not markers:
        cited = [_node(node, f"response.source_nodes.{i}", None) for i, node in enumerate(nodes)]
    return text, cited


def _node(entry, field: str, span) -> Cited:
    node = entry.get("node", entry) if isinstance(entry, dict) else None
    if not isinstance(node, dict):
        raise ShapeError(field, "should be an object (a NodeWithScore or its node)")
    text = node.get("text")
    if not isinstance(text, str):
        text = (node.get("text_resource") or {}).get("text")
    if not isinstance(text, str):
        raise ShapeError(f"{field}.node.text", "missing")
    prefixed = bool(_SOURCE_PREFIX.match(text))  # CitationQueryEngine's sub-chunk: the parent's offsets, not its own
    metadata = node.get("metadata") or {}
    source = (node.get("relationships") or {}).get("1") or (node.get("relationships") or {}).get("SOURCE") or {}
    keys = (
        node.get("ref_doc_id"),
        source.get("node_id"),
        metadata.get("file_path"),
        metadata.get("file_name"),
        node.get("id_"),
    )
    start, end = (None, None) if prefixed else (node.get("start_char_idx"), node.get("end_char_idx"))
    return Cited(span, keys, field, _SOURCE_PREFIX.sub("", text, count=1), start, end)
