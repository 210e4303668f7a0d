"""`--from cohere`: a response of Cohere's Chat v2 API, whole or as chat_stream's events."""

from __future__ import annotations

import re

from citekeeper.answers.formats.reader import Cited, get_field, joined, non_negative, text_blocks


def read(response) -> tuple[str, list[Cited]]:
    """Chat v2: message.content text blocks; message.citations with start/end into the text and their sources.
    Or chat_stream's events (a list), assembled into that response."""
    if isinstance(response, list):
        text, citations = _stream(response)
    else:
        message = get_field(response, "message", "response.message", dict)
        content = message.get("content")
        text = (
            content if isinstance(content, str) else joined(text_blocks(content) if isinstance(content, list) else [])
        )
        citations = [
            (citation, f"response.message.citations.{i}") for i, citation in enumerate(message.get("citations") or [])
        ]
    return text, [cited for citation, field in citations for cited in _citation(citation, field)]


def _stream(events: list) -> tuple[str, list[tuple[object, str]]]:
    """The text of the content-start / content-delta events (by content index, in order), and each
    citation-start's citation with its field."""
    texts: dict[int, list[str]] = {}
    citations = []
    for i, event in enumerate(events):
        kind = get_field(event, "type", f"response.{i}.type", str)
        delta = get_field(event, "delta", f"response.{i}.delta", dict, required=False) or {}
        message = get_field(delta, "message", f"response.{i}.delta.message", dict, required=False) or {}
        if kind in ("content-start", "content-delta"):
            content = get_field(message, "content", f"response.{i}.delta.message.content", dict, required=False) or {}
            text = get_field(content, "text", f"response.{i}.delta.message.content.text", str, required=False)
            texts.setdefault(non_negative(event.get("index", 0), f"response.{i}.index"), []).append(
                text or ""
            )  # a thinking delta has none
        elif kind == "citation-start":
            citations.append((message.get("citations"), f"response.{i}.delta.message.citations"))
    return "".join("".join(pieces) for _, pieces in sorted(texts.items())), citations


def _citation(citation, field: str) -> list[Cited]:
    """A citation's span (`start` / `end` into the text) cited once per source."""
    start = non_negative(get_field(citation, "start", f"{field}.start", int), f"{field}.start")
    end = non_negative(get_field(citation, "end", f"{field}.end", int), f"{field}.end")
    cited = []
    for j, source in enumerate(get_field(citation, "sources", f"{field}.sources", list)):
        document = source.get("document") if isinstance(source, dict) else None
        document = document if isinstance(document, dict) else {}
        source_id = source.get("id") if isinstance(source, dict) else None
        keys = (document.get("id"), source_id, *_positional(source_id))
        passage = next(
            (document[k] for k in ("text", "snippet", "content", "chunk") if isinstance(document.get(k), str)), None
        )
        cited.append(Cited((start, end), keys, f"{field}.sources.{j}", passage))
    return cited


def _positional(source_id: object) -> tuple[int, ...]:
    """Cohere names documents given without ids "doc:N" (N their position); a plain number is one too."""
    match = re.fullmatch(r"(?:doc:)?(\d+)", str(source_id)) if source_id is not None else None
    return (int(match.group(1)),) if match else ()
