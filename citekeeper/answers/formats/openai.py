"""`--from openai`: a response of OpenAI's Responses or Chat Completions API."""

from __future__ import annotations

from citekeeper.answers.formats.reader import Cited, ShapeError, get_field, non_negative


def read(response) -> tuple[str, list[Cited]]:
    """Responses API (`output`: file_search_call results, message output_text annotations) or Chat Completions."""
    if isinstance(response, dict) and "choices" in response:
        return _chat(response)
    output = get_field(response, "output", "response.output", list)
    passages: dict[str, str] = {}  # file_id -> its best retrieved passage (results come best first)
    texts: list[tuple[str, list, str]] = []
    for i, item in enumerate(output):
        if not isinstance(item, dict):
            raise ShapeError(f"response.output.{i}", "should be an object")
        if item.get("type") == "file_search_call":
            for result in item.get("results") or []:
                if isinstance(result, dict) and result.get("file_id") and isinstance(result.get("text"), str):
                    passages.setdefault(result["file_id"], result["text"])
        elif item.get("type") == "message":
            for j, part in enumerate(get_field(item, "content", f"response.output.{i}.content", list)):
                if isinstance(part, dict) and part.get("type") == "output_text":
                    texts.append(
                        (
                            get_field(part, "text", f"response.output.{i}.content.{j}.text", str),
                            part.get("annotations") or [],
                            f"response.output.{i}.content.{j}",
                        )
                    )
    text, cited, at = "", [], 0
    for part_text, notes, field in texts:
        for k, note in enumerate(notes):
            cited.append(_annotation(note, f"{field}.annotations.{k}", at, len(part_text), passages))
        text += part_text
        at += len(part_text)
    return text, cited


def _annotation(note, field: str, at: int, length: int, passages: dict[str, str]) -> Cited:
    kind = get_field(note, "type", f"{field}.type", str)
    if kind in ("file_citation", "container_file_citation") and "start_index" not in note:
        index = non_negative(get_field(note, "index", f"{field}.index", int), f"{field}.index")
        point = min(index, length)  # a file_citation sits at `index`: it cites the text just before it
        span = (at + max(point - 1, 0), at + max(point, 1))
        return Cited(span, (note.get("file_id"), note.get("filename")), field, passages.get(note.get("file_id")))
    if kind in ("url_citation", "container_file_citation", "file_citation"):
        start = non_negative(get_field(note, "start_index", f"{field}.start_index", int), f"{field}.start_index")
        end = non_negative(get_field(note, "end_index", f"{field}.end_index", int), f"{field}.end_index")
        keys = (note.get("file_id"), note.get("url"), note.get("filename"), note.get("title"))
        return Cited((at + start, at + end), keys, field, passages.get(note.get("file_id")))
    raise ShapeError(f"{field}.type", f"unknown OpenAI annotation type {kind!r:.40}")


def _chat(response: dict) -> tuple[str, list[Cited]]:
    choices = get_field(response, "choices", "response.choices", list)
    if not choices:
        raise ShapeError("response.choices", "is empty")
    message = get_field(choices[0], "message", "response.choices.0.message", dict)
    text = get_field(message, "content", "response.choices.0.message.content", str)
    cited = []
    for k, note in enumerate(message.get("annotations") or []):
        field = f"response.choices.0.message.annotations.{k}"
        body = (
            note.get(note.get("type"), note) if isinstance(note, dict) else note
        )  # {"type": "url_citation", "url_citation": {...}}
        cited.append(
            _annotation({"type": note.get("type"), **body} if isinstance(body, dict) else body, field, 0, len(text), {})
        )
    return text, cited
