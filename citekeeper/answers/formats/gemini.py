"""`--from gemini`: a response of Gemini's generateContent, as REST returns it or the Python SDK dumps it."""

from __future__ import annotations

import re

from citekeeper.answers.formats.reader import Cited, ShapeError, get_field, joined, non_negative, text_blocks

_CAMEL = re.compile(r"_([a-z])")
_UPPER = re.compile(r"[A-Z]")


def _camel(value):
    """The REST API's camelCase keys for the Python SDK's snake_case dump, recursively."""
    if isinstance(value, dict):
        return {
            _CAMEL.sub(lambda m: m.group(1).upper(), key) if isinstance(key, str) else key: _camel(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_camel(item) for item in value]
    return value


def read(response) -> tuple[str, list[Cited]]:
    """generateContent's response as REST returns it (camelCase) or the Python SDK dumps it (snake_case: read as
    camelCase, its fields named back as it spells them)."""
    camel = _camel(response)
    if camel == response:
        return _rest(response)
    try:
        text, cited = _rest(camel)
    except ShapeError as exc:
        raise ShapeError(_snake(exc.field), str(exc)) from None
    for c in cited:
        c.field = _snake(c.field)
    return text, cited


def _snake(field: str) -> str:
    return _UPPER.sub(lambda m: "_" + m.group(0).lower(), field)


def _rest(response: object) -> tuple[str, list[Cited]]:
    """The first candidate's parts and groundingMetadata. Segment offsets are UTF-8 bytes into the part's text
    (proto JSON drops a zero startIndex and partIndex)."""
    candidates = get_field(response, "candidates", "response.candidates", list)
    if not candidates:
        raise ShapeError("response.candidates", "is empty")
    candidate = candidates[0]
    parts = get_field(
        get_field(candidate, "content", "response.candidates.0.content", dict),
        "parts",
        "response.candidates.0.content.parts",
        list,
    )
    blocks = text_blocks(parts)
    by_part = {i: (block["text"], start) for i, block, start, _ in blocks}
    grounding = candidate.get("groundingMetadata") or {}
    chunks = grounding.get("groundingChunks") or []
    cited = []
    for i, support in enumerate(grounding.get("groundingSupports") or []):
        field = f"response.candidates.0.groundingMetadata.groundingSupports.{i}"
        segment = get_field(support, "segment", f"{field}.segment", dict)
        part = non_negative(segment.get("partIndex", 0), f"{field}.segment.partIndex")
        if part not in by_part:
            raise ShapeError(
                f"{field}.segment.partIndex", f"names part {part}, which holds no text ({len(parts)} part(s))"
            )
        part_text, part_start = by_part[part]
        span = _code_points(part_text, segment, f"{field}.segment")
        for position, index in enumerate(
            get_field(support, "groundingChunkIndices", f"{field}.groundingChunkIndices", list)
        ):
            at = f"{field}.groundingChunkIndices.{position}"
            if non_negative(index, at) >= len(chunks):
                raise ShapeError(at, f"names grounding chunk {index}, of {len(chunks)}")
            source = chunks[index].get("retrievedContext") or chunks[index].get("web") or {}
            passage = source.get("text") or (source.get("ragChunk") or {}).get("text")
            keys = (source.get("uri"), source.get("documentName"), source.get("title"), index)
            cited.append(Cited((part_start + span[0], part_start + span[1]), keys, at, passage))
    return joined(blocks), cited


def _code_points(text: str, segment: dict, field: str) -> tuple[int, int]:
    """A segment's UTF-8 byte offsets as code points into `text`."""
    encoded = text.encode("utf-8")
    start = non_negative(segment.get("startIndex", 0), f"{field}.startIndex")
    end = non_negative(get_field(segment, "endIndex", f"{field}.endIndex", int), f"{field}.endIndex")
    if end > len(encoded) or start >= end:
        raise ShapeError(
            f"{field}.endIndex", f"bytes {start}-{end} are not inside the part's {len(encoded)} UTF-8 bytes"
        )
    return len(encoded[:start].decode("utf-8", "ignore")), len(encoded[:end].decode("utf-8", "ignore"))
