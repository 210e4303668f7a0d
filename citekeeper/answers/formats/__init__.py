"""Answers as RAG systems return them: an LLM API's or framework's response in its envelope (`--from FORMAT`),
turned into an answer record whose citations name documents, anchored at registration (citekeeper.answers.anchoring;
docs/answers.md, "Answers as LLM APIs return them")."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from citekeeper.answers.records import (
    UNANCHORED,
    AnswerInputError,
    AnswerLimits,
    DocumentRef,
    GivenText,
    Issue,
    Names,
    ParsedAnswer,
    ParsedCitation,
    ParsedClaim,
    RequiredText,
    Timestamp,
    issue_from,
    record_json,
)
from citekeeper.text import marker_ids, sentence_spans, strip_markers

RESPONSE_FORMATS = ("anthropic", "openai", "cohere", "gemini", "llamaindex", "langchain")


class UnknownFormat(ValueError):
    pass


def converter(response_format: str | None) -> Callable[..., ParsedAnswer] | None:
    """What turns a line of `response_format` into an answer record (None: lines are answer records already)."""
    if response_format is None:
        return None
    if response_format not in _READERS:
        raise UnknownFormat(f"unknown response format {response_format!r}: use one of {', '.join(RESPONSE_FORMATS)}")
    return functools.partial(parse_response, response_format=response_format)


class ShapeError(ValueError):
    """The response is not of its format's shape."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class DocumentEntry(BaseModel):
    key: int | str | None = None
    doc_id: GivenText | None = None
    source_path: GivenText | None = None
    retrieved_at: Timestamp = None  # when the RAG system read this document (else the envelope's)

    @model_validator(mode="after")
    def _one_name(self) -> DocumentEntry:
        if (self.doc_id is None) == (self.source_path is None):
            raise ValueError("give doc_id or source_path (one)")
        return self

    def reference(self, hint: tuple[int | None, int | None]) -> DocumentRef:
        return DocumentRef(self.doc_id, self.source_path, *hint)


class Envelope(BaseModel):
    answer_id: RequiredText
    question: str | None = None
    corpus_version: RequiredText
    created_at: Timestamp = None
    retrieved_at: Timestamp = None  # when the RAG system read its documents (else created_at)
    audience: Names = None  # as an answer record's (docs/answers.md, "Audience, version and scope")
    about_version: GivenText | None = None
    scope: Names = None
    documents: list[DocumentEntry] = Field(default_factory=list)
    response: dict | list


@dataclass(slots=True)
class Cited:
    """One citation a response makes: where it sits in the response text (None: the whole answer), the names it
    gives its source (most specific first), and what it says of the source."""

    span: tuple[int, int] | None
    keys: tuple[object, ...]
    field: str  # where in the response, for errors
    quote: str | None = None
    start_char: int | None = None  # into the source, as the RAG system saw it
    end_char: int | None = None


class Documents:
    def __init__(self, entries: list[DocumentEntry]):
        self.keyed = {str(entry.key): entry for entry in entries if entry.key is not None}
        self.positional = {i: entry for i, entry in enumerate(entries) if entry.key is None}

    def resolve(self, cited: Cited) -> DocumentEntry | None:
        """The entry of the document `cited` names; None when no entry maps it."""
        for key in cited.keys:
            if key is None:
                continue
            if str(key) in self.keyed:
                return self.keyed[str(key)]
            if isinstance(key, int) and key in self.positional:
                return self.positional[key]
        return None


def _unmapped(cited: Cited) -> Issue:
    names = ", ".join(repr(key) for key in cited.keys if key is not None) or "no name"
    return Issue(cited.field, f"documents has no entry for this source ({names})")


def parse_response(
    row: object,
    line: int | None = None,
    limits: AnswerLimits = AnswerLimits(),
    text: str | None = None,
    *,
    response_format: str,
) -> ParsedAnswer:
    """The answer of one `--from FORMAT` line (`text`: the line as read): claims citing documents, to be anchored
    at registration (citekeeper.answers.anchoring), the envelope kept as the source_record. AnswerInputError names each
    problem; a source `documents` does not map is no such error: its citation registers unanchored (invalid), the
    answer's `unmapped` names it."""
    try:
        envelope = Envelope.model_validate(row)
    except ValidationError as exc:
        raise AnswerInputError([issue_from(error) for error in exc.errors()]) from None
    try:
        answer, cited = _READERS[response_format](_nones_absent(envelope.response))
        claims, unmapped = _claims(answer, cited, Documents(envelope.documents), envelope.retrieved_at)
    except ShapeError as exc:
        raise AnswerInputError([Issue(exc.field, str(exc))]) from None
    except RecursionError:
        raise AnswerInputError([Issue("response", "nested too deeply to be a response")]) from None
    try:
        limits.check_claims(len(claims))
        limits.check_citations(claims)
    except PydanticCustomError as exc:
        raise AnswerInputError([Issue("response", str(exc))]) from None
    return ParsedAnswer(
        answer_id=envelope.answer_id,
        question=envelope.question,
        answer=answer,
        corpus_version=envelope.corpus_version,
        created_at=envelope.created_at,
        input_form=response_format,
        claims=claims,
        source_record=text if text is not None else record_json(row),
        line=line,
        unmapped=unmapped,
        audience=envelope.audience,
        about_version=envelope.about_version,
        scope_labels=envelope.scope,
    )


def _nones_absent(value):
    """`value` without its None fields: an SDK's dump writes every unset field as None where the REST form leaves
    it out, and both read the same."""
    if isinstance(value, dict):
        return {key: _nones_absent(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_nones_absent(item) for item in value]
    return value


def _claims(
    text: str, cited: list[Cited], documents: Documents, retrieved_at: datetime | None = None
) -> tuple[tuple[ParsedClaim, ...], tuple[Issue, ...]]:
    """The claims of `text` with their citations, and the sources no document maps (each cited unanchored). Each
    was retrieved when its document entry says, else at `retrieved_at` (the envelope's)."""
    sentences = [(start, end, strip_markers(text[start:end])) for start, end in sentence_spans(text)]
    sentences = [sentence for sentence in sentences if sentence[2]]
    if not sentences:
        raise ShapeError("response", "has no answer text")
    citations: list[dict[tuple, ParsedCitation]] = [{} for _ in sentences]  # one of each per claim, in order
    unmapped: list[Issue] = []
    for c in cited:
        quote = c.quote
        if quote is not None:
            if not isinstance(quote, str):
                raise ShapeError(c.field, f"the cited text should be text, not {type(quote).__name__}")
            quote = quote.strip() or None
        entry = documents.resolve(c)
        document = None if entry is None else entry.reference(_hint(c))
        if entry is None:  # registered all the same, judged invalid with the reason, like a missing document
            unmapped.append(_unmapped(c))
            citation = ParsedCitation(
                None, quote, None, anchored_by=UNANCHORED, anchor_note=unmapped[-1].message, retrieved_at=retrieved_at
            )
        else:
            citation = ParsedCitation(
                None, quote, None, None, document, retrieved_at=entry.retrieved_at or retrieved_at
            )
        for i in _sentences_of(c.span, sentences):
            citations[i].setdefault((document if document is not None else c.field, quote), citation)
    claims = tuple(ParsedClaim(claim, tuple(cites.values())) for (_, _, claim), cites in zip(sentences, citations))
    return claims, tuple(unmapped)


def _hint(cited: Cited) -> tuple[int | None, int | None]:
    start, end = cited.start_char, cited.end_char
    if type(start) is int and type(end) is int and 0 <= start < end:
        return start, end
    return None, None


def _sentences_of(span: tuple[int, int] | None, sentences: list[tuple[int, int, str]]) -> list[int]:
    """The sentences a citation's span overlaps; one between sentences belongs to the one before it."""
    if span is None:
        return list(range(len(sentences)))
    overlapping = [i for i, (start, end, _) in enumerate(sentences) if span[0] < end and span[1] > start]
    return overlapping or [max([i for i, (start, _, _) in enumerate(sentences) if start <= span[0]], default=0)]


# ---------------------------------------------------------------- reading a response's shape


def _get(value: object, key: str, field: str, kind: type | tuple = object, required: bool = True):
    if not isinstance(value, dict):
        raise ShapeError(field.rsplit(".", 1)[0], "should be an object")
    found = value.get(key)
    if found is None and not required:
        return None
    if not isinstance(found, kind):
        what = "missing" if found is None else f"should be {_kind_name(kind)}, not {type(found).__name__}"
        raise ShapeError(f"{field}", what)
    return found


def _kind_name(kind) -> str:
    names = {list: "a list", dict: "an object", str: "text", int: "an integer"}
    return " or ".join(names.get(k, k.__name__) for k in (kind if isinstance(kind, tuple) else (kind,)))


def _index(value: object, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ShapeError(field, f"should be a non-negative integer, not {value!r:.40}")
    return value


def _text_blocks(blocks: list) -> list[tuple[int, dict, int, int]]:
    """(index, block, start, end) of each text block in order, the spans into the blocks' joined text."""
    out, at = [], 0
    for i, block in enumerate(blocks):
        if (
            isinstance(block, dict)
            and isinstance(block.get("text"), str)
            and block.get("type", "text") in ("text", "output_text")
        ):
            out.append((i, block, at, at + len(block["text"])))
            at += len(block["text"])
    return out


def _joined(blocks: list[tuple[int, dict, int, int]]) -> str:
    return "".join(block["text"] for _, block, _, _ in blocks)


def _anthropic(response) -> tuple[str, list[Cited]]:
    """Messages API: text blocks, each with the `citations` that support it."""
    blocks = _text_blocks(_get(response, "content", "response.content", list))
    cited = []
    for i, block, start, end in blocks:
        for j, citation in enumerate(block.get("citations") or []):
            field = f"response.content.{i}.citations.{j}"
            kind = _get(citation, "type", f"{field}.type", str)
            if kind in ("char_location", "page_location", "content_block_location"):
                keys = (
                    _index(citation.get("document_index"), f"{field}.document_index"),
                    citation.get("document_title"),
                )
            elif kind == "search_result_location":
                keys = (
                    citation.get("source"),
                    citation.get("title"),
                    _index(citation.get("search_result_index"), f"{field}.search_result_index"),
                )
            elif kind == "web_search_result_location":
                keys = (citation.get("url"), citation.get("title"))
            else:
                raise ShapeError(f"{field}.type", f"unknown Anthropic citation type {kind!r:.40}")
            char = kind == "char_location"
            cited.append(
                Cited(
                    (start, end),
                    keys,
                    field,
                    citation.get("cited_text"),
                    citation.get("start_char_index") if char else None,
                    citation.get("end_char_index") if char else None,
                )
            )
    return _joined(blocks), cited


def _openai(response) -> tuple[str, list[Cited]]:
    """Responses API (`output`: file_search_call results, message output_text annotations) or Chat Completions."""
    if isinstance(response, dict) and "choices" in response:
        return _openai_chat(response)
    output = _get(response, "output", "response.output", list)
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
            for j, part in enumerate(_get(item, "content", f"response.output.{i}.content", list)):
                if isinstance(part, dict) and part.get("type") == "output_text":
                    texts.append(
                        (
                            _get(part, "text", f"response.output.{i}.content.{j}.text", str),
                            part.get("annotations") or [],
                            f"response.output.{i}.content.{j}",
                        )
                    )
    text, cited, at = "", [], 0
    for part_text, notes, field in texts:
        for k, note in enumerate(notes):
            cited.append(_openai_annotation(note, f"{field}.annotations.{k}", at, len(part_text), passages))
        text += part_text
        at += len(part_text)
    return text, cited


def _openai_annotation(note, field: str, at: int, length: int, passages: dict[str, str]) -> Cited:
    kind = _get(note, "type", f"{field}.type", str)
    if kind in ("file_citation", "container_file_citation") and "start_index" not in note:
        index = _index(_get(note, "index", f"{field}.index", int), f"{field}.index")
        point = min(index, length)  # a file_citation sits at `index`: it cites the text just before it
        span = (at + max(point - 1, 0), at + max(point, 1))
        return Cited(span, (note.get("file_id"), note.get("filename")), field, passages.get(note.get("file_id")))
    if kind in ("url_citation", "container_file_citation", "file_citation"):
        start = _index(_get(note, "start_index", f"{field}.start_index", int), f"{field}.start_index")
        end = _index(_get(note, "end_index", f"{field}.end_index", int), f"{field}.end_index")
        keys = (note.get("file_id"), note.get("url"), note.get("filename"), note.get("title"))
        return Cited((at + start, at + end), keys, field, passages.get(note.get("file_id")))
    raise ShapeError(f"{field}.type", f"unknown OpenAI annotation type {kind!r:.40}")


def _openai_chat(response: dict) -> tuple[str, list[Cited]]:
    choices = _get(response, "choices", "response.choices", list)
    if not choices:
        raise ShapeError("response.choices", "is empty")
    message = _get(choices[0], "message", "response.choices.0.message", dict)
    text = _get(message, "content", "response.choices.0.message.content", str)
    cited = []
    for k, note in enumerate(message.get("annotations") or []):
        field = f"response.choices.0.message.annotations.{k}"
        body = (
            note.get(note.get("type"), note) if isinstance(note, dict) else note
        )  # {"type": "url_citation", "url_citation": {...}}
        cited.append(
            _openai_annotation(
                {"type": note.get("type"), **body} if isinstance(body, dict) else body, field, 0, len(text), {}
            )
        )
    return text, cited


def _cohere(response) -> tuple[str, list[Cited]]:
    """Chat v2: message.content text blocks; message.citations with start/end into the text and their sources.
    Or chat_stream's events (a list), assembled into that response."""
    if isinstance(response, list):
        text, citations = _cohere_stream(response)
    else:
        message = _get(response, "message", "response.message", dict)
        content = message.get("content")
        text = (
            content if isinstance(content, str) else _joined(_text_blocks(content) if isinstance(content, list) else [])
        )
        citations = [
            (citation, f"response.message.citations.{i}") for i, citation in enumerate(message.get("citations") or [])
        ]
    return text, [cited for citation, field in citations for cited in _cohere_citation(citation, field)]


def _cohere_stream(events: list) -> tuple[str, list[tuple[object, str]]]:
    """The text of the content-start / content-delta events (by content index, in order), and each
    citation-start's citation with its field."""
    texts: dict[int, list[str]] = {}
    citations = []
    for i, event in enumerate(events):
        kind = _get(event, "type", f"response.{i}.type", str)
        delta = _get(event, "delta", f"response.{i}.delta", dict, required=False) or {}
        message = _get(delta, "message", f"response.{i}.delta.message", dict, required=False) or {}
        if kind in ("content-start", "content-delta"):
            content = _get(message, "content", f"response.{i}.delta.message.content", dict, required=False) or {}
            text = _get(content, "text", f"response.{i}.delta.message.content.text", str, required=False)
            texts.setdefault(_index(event.get("index", 0), f"response.{i}.index"), []).append(
                text or ""
            )  # a thinking delta has none
        elif kind == "citation-start":
            citations.append((message.get("citations"), f"response.{i}.delta.message.citations"))
    return "".join("".join(pieces) for _, pieces in sorted(texts.items())), citations


def _cohere_citation(citation, field: str) -> list[Cited]:
    """A citation's span (`start` / `end` into the text) cited once per source."""
    start = _index(_get(citation, "start", f"{field}.start", int), f"{field}.start")
    end = _index(_get(citation, "end", f"{field}.end", int), f"{field}.end")
    cited = []
    for j, source in enumerate(_get(citation, "sources", f"{field}.sources", list)):
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


def _gemini(response) -> tuple[str, list[Cited]]:
    """generateContent's response as REST returns it (camelCase) or the Python SDK dumps it (snake_case: read as
    camelCase, its fields named back as it spells them)."""
    camel = _camel(response)
    if camel == response:
        return _gemini_rest(response)
    try:
        text, cited = _gemini_rest(camel)
    except ShapeError as exc:
        raise ShapeError(_snake(exc.field), str(exc)) from None
    for c in cited:
        c.field = _snake(c.field)
    return text, cited


def _snake(field: str) -> str:
    return _UPPER.sub(lambda m: "_" + m.group(0).lower(), field)


def _gemini_rest(response: object) -> tuple[str, list[Cited]]:
    """The first candidate's parts and groundingMetadata. Segment offsets are UTF-8 bytes into the part's text
    (proto JSON drops a zero startIndex and partIndex)."""
    candidates = _get(response, "candidates", "response.candidates", list)
    if not candidates:
        raise ShapeError("response.candidates", "is empty")
    candidate = candidates[0]
    parts = _get(
        _get(candidate, "content", "response.candidates.0.content", dict),
        "parts",
        "response.candidates.0.content.parts",
        list,
    )
    blocks = _text_blocks(parts)
    by_part = {i: (block["text"], start) for i, block, start, _ in blocks}
    grounding = candidate.get("groundingMetadata") or {}
    chunks = grounding.get("groundingChunks") or []
    cited = []
    for i, support in enumerate(grounding.get("groundingSupports") or []):
        field = f"response.candidates.0.groundingMetadata.groundingSupports.{i}"
        segment = _get(support, "segment", f"{field}.segment", dict)
        part = _index(segment.get("partIndex", 0), f"{field}.segment.partIndex")
        if part not in by_part:
            raise ShapeError(
                f"{field}.segment.partIndex", f"names part {part}, which holds no text ({len(parts)} part(s))"
            )
        part_text, part_start = by_part[part]
        span = _code_points(part_text, segment, f"{field}.segment")
        for position, index in enumerate(
            _get(support, "groundingChunkIndices", f"{field}.groundingChunkIndices", list)
        ):
            at = f"{field}.groundingChunkIndices.{position}"
            if _index(index, at) >= len(chunks):
                raise ShapeError(at, f"names grounding chunk {index}, of {len(chunks)}")
            source = chunks[index].get("retrievedContext") or chunks[index].get("web") or {}
            passage = source.get("text") or (source.get("ragChunk") or {}).get("text")
            keys = (source.get("uri"), source.get("documentName"), source.get("title"), index)
            cited.append(Cited((part_start + span[0], part_start + span[1]), keys, at, passage))
    return _joined(blocks), cited


def _code_points(text: str, segment: dict, field: str) -> tuple[int, int]:
    """A segment's UTF-8 byte offsets as code points into `text`."""
    encoded = text.encode("utf-8")
    start = _index(segment.get("startIndex", 0), f"{field}.startIndex")
    end = _index(_get(segment, "endIndex", f"{field}.endIndex", int), f"{field}.endIndex")
    if end > len(encoded) or start >= end:
        raise ShapeError(
            f"{field}.endIndex", f"bytes {start}-{end} are not inside the part's {len(encoded)} UTF-8 bytes"
        )
    return len(encoded[:start].decode("utf-8", "ignore")), len(encoded[:end].decode("utf-8", "ignore"))


_SOURCE_PREFIX = re.compile(r"^\s*Source \d+:\s*")


def _llamaindex(response) -> tuple[str, list[Cited]]:
    """Response: `response` text with [N] markers (CitationQueryEngine), `source_nodes` the Nth node of each. A
    response without markers cites every node for the whole answer."""
    text = _get(response, "response", "response.response", str)
    nodes = _get(response, "source_nodes", "response.source_nodes", list)
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


_MARKER_AT = re.compile(r"\[\s*\d+(?:\s*,\s*\d+)*\s*\]")


def _langchain(response) -> tuple[str, list[Cited]]:
    """The citation tutorial's QuotedAnswer / CitedAnswer (`answer`, `citations` by source_id), or a message whose
    content blocks carry standard `citation` annotations."""
    if isinstance(response, dict) and "answer" in response:
        text = _get(response, "answer", "response.answer", str)
        cited = []
        for i, citation in enumerate(_get(response, "citations", "response.citations", list)):
            field = f"response.citations.{i}"
            if isinstance(citation, dict):  # QuotedAnswer's Citation
                source_id = _index(_get(citation, "source_id", f"{field}.source_id", int), f"{field}.source_id")
                cited.append(Cited(None, (source_id,), field, _get(citation, "quote", f"{field}.quote", str)))
            else:  # CitedAnswer: source ids
                cited.append(Cited(None, (_index(citation, field),), field))
        return text, cited
    blocks_field = (
        "response.content_blocks" if isinstance(response, dict) and "content_blocks" in response else "response.content"
    )
    raw = (
        response
        if isinstance(response, list)
        else _get(response, blocks_field.split(".")[1], blocks_field, (list, str))
    )
    if isinstance(raw, str):
        return raw, []
    blocks = _text_blocks(raw)
    cited = []
    for i, block, start, end in blocks:
        for j, note in enumerate(block.get("annotations") or []):
            field = f"{blocks_field}.{i}.annotations.{j}"
            if not isinstance(note, dict) or note.get("type") != "citation":
                continue  # non_standard_annotation and the like cite nothing
            extras = note.get("extras") or {}
            keys = (
                note.get("url"),
                note.get("id"),
                note.get("title"),
                extras.get("source"),
                extras.get("document_index"),
            )
            lo, hi = note.get("start_index"), note.get("end_index")
            span = (
                (start + _index(lo, f"{field}.start_index"), start + _index(hi, f"{field}.end_index"))
                if lo is not None and hi is not None
                else (start, end)
            )
            cited.append(Cited(span, keys, field, note.get("cited_text")))
    return _joined(blocks), cited


_READERS: dict[str, Callable[[object], tuple[str, list[Cited]]]] = {
    "anthropic": _anthropic,
    "openai": _openai,
    "cohere": _cohere,
    "gemini": _gemini,
    "llamaindex": _llamaindex,
    "langchain": _langchain,
}
