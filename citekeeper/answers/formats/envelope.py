"""The envelope every `--from FORMAT` line comes in (answer_id, corpus_version, documents, response) and its
conversion into an answer record: the format's reader gives the answer text and its citations, the text's
sentences become the claims, each with the citations whose span overlaps it, and `documents` maps each cited
source onto a citekeeper document."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from citekeeper.answers.formats.reader import Cited, Reader, ShapeError
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
from citekeeper.text import sentence_spans, strip_markers


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
    read: Reader,
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
        answer, cited = read(_nones_absent(envelope.response))
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
