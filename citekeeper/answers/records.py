"""Parse registered answers, in structured or marker form (docs/answers.md, "Registering answers"), into answer,
claim and citation records, validated by pydantic models whose errors name the field by its dotted loc."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from functools import cached_property
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    PlainValidator,
    PrivateAttr,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from citekeeper.identity import text_hash
from citekeeper.text import MARKER_ID, lone_surrogate, marker_ids, split_sentences, strip_markers

# An answer of more claims is refused (a 50 MB marker-form answer made 1.87 M claims and a 10 GB verify).
MAX_CLAIMS_PER_ANSWER = 10_000
# Likewise citations (a claim of 100,000 citations made `stale` run past 300 s, re-anchoring each).
MAX_CITATIONS_PER_CLAIM = 1_000
MAX_CITATIONS_PER_ANSWER = 100_000


@dataclass(frozen=True)
class Issue:
    field: str  # dotted path into the record, e.g. claims.0.citations.1.quote
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class AnswerInputError(ValueError):
    """One input record is malformed; `issues` names each offending field and what is wrong with it."""

    def __init__(self, issues: list[Issue]):
        super().__init__("; ".join(str(issue) for issue in issues))
        self.issues = issues


ANCHORED_BY_CHUNK = "chunk_id"  # the citation named its chunk: nothing to anchor
UNANCHORED = "unanchored"  # registration found no chunk for it: judged invalid, with its anchor_note


@dataclass(frozen=True, slots=True)
class DocumentRef:
    """A citation by document, before anchoring: the document, and where in it (offsets as the RAG system saw
    the document: a hint, not a locator)."""

    doc_id: str | None
    source_path: str | None
    start_char: int | None = None
    end_char: int | None = None

    @property
    def name(self) -> str:
        return self.doc_id if self.doc_id is not None else str(self.source_path)


@dataclass(frozen=True, slots=True)
class ParsedCitation:
    chunk_id: str | None  # None: a citation by document that could not be anchored (anchor_note says why)
    quote: str | None
    cited_text_hash: str | None
    corpus_version: str | None = None  # None: the answer's
    document: DocumentRef | None = None  # named by document (before anchoring, or when it could not be)
    anchored_by: str = ANCHORED_BY_CHUNK  # citekeeper.answers.anchoring.ANCHOR_METHODS
    anchor_score: float | None = None
    anchor_note: str | None = None
    given_index: int | None = None  # the citation as given, within its claim: a quote across chunks is several
    quote_access_scope: str | None = (
        None  # unanchored, its quote withheld text of this level (citekeeper.answers.anchoring)
    )
    retrieved_at: datetime | None = (
        None  # when the RAG system read the evidence, as given (None: the answer's created_at)
    )


@dataclass(frozen=True, slots=True)
class ParsedClaim:
    text: str
    citations: tuple[ParsedCitation, ...]
    source_claim_id: str | None = None


@dataclass(frozen=True)
class ParsedAnswer:
    answer_id: str
    question: str | None
    answer: str
    corpus_version: str
    created_at: datetime | None
    input_form: str  # structured | marker | a response format (citekeeper.answers.formats.RESPONSE_FORMATS)
    claims: tuple[ParsedClaim, ...] = field(default_factory=tuple)
    # The input record as JSON, every key kept: repair edits it, or, for an answer anchored by document (whose
    # citations are no longer the record's one for one), keeps it under `given` of the record it rebuilds.
    source_record: str | None = None
    repaired_from: int | None = None  # the revision `citekeeper repair` made this record from
    line: int | None = None  # of the input file it was read from
    # Sources the input names that no document maps (`--from FORMAT`'s `documents`): each is a citation registered
    # unanchored, so judged invalid, and an error of the line (citekeeper.answers.anchoring reports it).
    unmapped: tuple[Issue, ...] = ()
    # Who it was given to (groups; None: not said, nothing checked), the product version asked about and what the
    # question is about (docs/answers.md, "Audience, version and scope").
    audience: tuple[str, ...] | None = None
    about_version: str | None = None
    scope_labels: tuple[str, ...] | None = None

    def with_claims(self, claims: tuple[ParsedClaim, ...]) -> ParsedAnswer:
        """This answer with `claims` instead (its citations anchored). Copied without __init__: registration makes
        one per answer cited by document, and dataclasses.replace was a tenth of that."""
        copy = object.__new__(ParsedAnswer)
        copy.__dict__.update(self.__dict__, claims=claims)
        copy.__dict__.pop("content_hash", None)  # of the old claims
        return copy

    def for_audience(self, audience: tuple[str, ...] | None) -> ParsedAnswer:
        """This answer registered for `audience` too (`answers add --audience`): its own audience when it names none,
        else the groups both name. Never wider than what it says (fail closed): an empty intersection is an audience
        of nobody, every document with access_groups outside it."""
        if audience is None:
            return self
        mine = audience if self.audience is None else tuple(sorted(set(self.audience) & set(audience)))
        return self if mine == self.audience else dataclasses.replace(self, audience=tuple(sorted(set(mine))))

    @cached_property  # computed once: an add compares it and stores it
    def content_hash(self) -> str:
        """Hash of everything the answer says; re-adding equal content is a no-op."""
        payload = {
            "question": self.question,
            "answer": self.answer,
            "corpus_version": self.corpus_version,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "claims": [
                [c.source_claim_id, c.text, [_citation_content(x, self.created_at) for x in c.citations]]
                for c in self.claims
            ],
        }
        # Who it was given to and what it is about change its statuses and its ranking, so a change of them is a
        # new revision; they join the hash only when given, so answers registered before they existed keep theirs.
        payload.update((key, value) for key in _SOURCE_MODEL_KEYS if (value := getattr(self, key)) is not None)
        return text_hash(json.dumps(payload, sort_keys=True, ensure_ascii=False))


_SOURCE_MODEL_KEYS = ("audience", "about_version", "scope_labels")


def _citation_content(citation: ParsedCitation, created_at: datetime | None) -> list:
    # The version and the anchoring join the hash only when given, so answers registered before they existed
    # keep their hash.
    content: list[object] = [citation.chunk_id, citation.quote, citation.cited_text_hash]
    if citation.corpus_version:
        content.append(citation.corpus_version)
    if citation.anchored_by != ANCHORED_BY_CHUNK:
        content.append([citation.anchored_by, citation.anchor_score, citation.given_index])
    if citation.chunk_id is None and citation.document is not None:
        content.append(list(dataclasses.astuple(citation.document)))
    if citation.retrieved_at not in (None, created_at):  # flags evidence updated since: a change is a new revision
        content.append(["retrieved_at", citation.retrieved_at.isoformat()])
    return content


def _short_id(prefix: str, *parts: object) -> str:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).hexdigest()
    return f"{prefix}_{digest[:20]}"


# ---------------------------------------------------------------- input records (pydantic)
# Strict strings: a number where text belongs is an error, never silently str()-ed. Extra keys are ignored.


def _not_blank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("blank", "String should not be blank")
    return value


def _sha256(value: str) -> str:
    if not value.startswith("sha256:"):
        raise PydanticCustomError("text_hash", "String should look like 'sha256:<hex>'")
    return value


def _utc_timestamp(value: object) -> datetime | None:
    """An ISO-8601 string ("Z" allowed) or a datetime (Parquet input); a naive one is taken as UTC."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise _not_a_timestamp(value) from None
    if not isinstance(value, datetime):
        raise _not_a_timestamp(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _not_a_timestamp(value: object) -> PydanticCustomError:
    return PydanticCustomError(
        "timestamp", "Input should be an ISO-8601 timestamp, got {got}", {"got": f"{value!r:.60}"}
    )


def _groups(value: object) -> tuple[str, ...] | None:
    """A list of names (audience groups, scope labels), or one name: sorted, each once, so the order they are given
    in changes nothing (not the content hash either). An empty list is kept: an audience of nobody."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise PydanticCustomError(
            "names", "Input should be a list of names or one name, got {got}", {"got": f"{value!r:.60}"}
        )
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            raise PydanticCustomError(
                "names", "item {i} should be a non-blank name, got {got}", {"i": i, "got": f"{item!r:.40}"}
            )
    return tuple(sorted(set(items)))


_REF = re.compile(MARKER_ID)


def _ref_key(ref: str) -> str:
    """One key for a reference id however it is written: "01" and 1 are the same number."""
    return str(int(ref)) if ref.isdigit() else ref


def _reference_key(ref: object) -> str:
    if isinstance(ref, int) and not isinstance(ref, bool):
        return str(ref)
    if isinstance(ref, str) and _REF.fullmatch(ref.strip()):
        return _ref_key(ref.strip())
    raise PydanticCustomError(
        "reference_id", "Input should be an integer or a marker id such as 'D1', got {got}", {"got": f"{ref!r:.40}"}
    )


RequiredText = Annotated[StrictStr, AfterValidator(_not_blank)]
GivenText = Annotated[StrictStr, StringConstraints(min_length=1)]  # optional, but not "" when given
TextHash = Annotated[StrictStr, AfterValidator(_sha256)]
Timestamp = Annotated[datetime | None, PlainValidator(_utc_timestamp)]
Offset = Annotated[StrictInt, Field(ge=0)]
Names = Annotated[tuple[str, ...] | None, PlainValidator(_groups)]
ReferenceKey = Annotated[str, PlainValidator(_reference_key)]


@dataclass(frozen=True)
class AnswerLimits:
    """The most one answer may hold; an answer over a limit is refused as its line, the message naming the limit."""

    max_claims_per_answer: int = MAX_CLAIMS_PER_ANSWER
    max_citations_per_claim: int = MAX_CITATIONS_PER_CLAIM
    max_citations_per_answer: int = MAX_CITATIONS_PER_ANSWER

    def check_claims(self, n: int) -> None:
        """Before the claims are made: how many there will be."""
        if n > self.max_claims_per_answer:
            raise _record_error(
                "claims",
                f"the answer has {n:,} claims, over the limit of {self.max_claims_per_answer:,} "
                "(max_claims_per_answer)",
            )

    def check_citations(self, claims: Iterable[ParsedClaim]) -> None:
        total = 0
        for index, claim in enumerate(claims):
            n = len(claim.citations)
            if n > self.max_citations_per_claim:
                raise _record_error(
                    "claims",
                    f"claim {index + 1} has {n:,} citations, over the limit of "
                    f"{self.max_citations_per_claim:,} (max_citations_per_claim)",
                )
            total += n
        if total > self.max_citations_per_answer:
            raise _record_error(
                "claims",
                f"the answer has {total:,} citations, over the limit of "
                f"{self.max_citations_per_answer:,} (max_citations_per_answer)",
            )


def _record_error(field_name: str, message: str) -> PydanticCustomError:
    """An error of a rule over the whole record (pydantic gives it an empty loc): ctx names its field."""
    return PydanticCustomError("answer_record", message, {"field": field_name})


class AnchorNote(BaseModel):
    """The `anchor` object registration writes on a citation it anchored: how, so a re-add keeps it."""

    method: RequiredText
    score: float | None = None
    given_index: StrictInt | None = None
    note: GivenText | None = None  # unanchored: why


class CitationRecord(BaseModel):
    chunk_id: RequiredText | None = None
    doc_id: RequiredText | None = None
    source_path: RequiredText | None = None
    start_char: Offset | None = None  # into the document as the RAG system saw it: a hint for doc_id / source_path
    end_char: Offset | None = None
    quote: GivenText | None = None
    text_hash: TextHash | None = None
    corpus_version: GivenText | None = None
    anchor: AnchorNote | None = None
    retrieved_at: Timestamp = None  # when the RAG system read it; absent: the answer's created_at

    @model_validator(mode="after")
    def _names_its_evidence(self) -> CitationRecord:
        named = [key for key in ("chunk_id", "doc_id", "source_path") if getattr(self, key) is not None]
        if not named and not self._unanchored:  # a record repair rebuilt keeps a citation naming no document
            raise _record_error("chunk_id", "missing: give chunk_id, or the document's doc_id or source_path")
        if len(named) > 1:
            raise _record_error(named[1], f"give one of chunk_id, doc_id and source_path, not {' and '.join(named)}")
        if self.chunk_id is not None:
            for key in ("start_char", "end_char"):
                if getattr(self, key) is not None:
                    raise _record_error(
                        key, "offsets are a hint for a citation by doc_id or source_path, not by chunk_id"
                    )
        elif self.text_hash is not None:
            raise _record_error("text_hash", "is a chunk's hash: give it with chunk_id")
        if (self.start_char is None) != (self.end_char is None):
            raise _record_error(
                "end_char" if self.end_char is None else "start_char", "give start_char and end_char together"
            )
        if self.start_char is not None and self.end_char is not None and self.end_char <= self.start_char:
            raise _record_error("end_char", f"should be after start_char ({self.start_char})")
        return self

    @property
    def _unanchored(self) -> bool:
        return self.anchor is not None and self.anchor.method == UNANCHORED

    def parsed(self) -> ParsedCitation:
        document = None
        if self.chunk_id is None and (self.doc_id is not None or self.source_path is not None):
            document = DocumentRef(self.doc_id, self.source_path, self.start_char, self.end_char)
        anchor = self.anchor if self.chunk_id is not None or (self._unanchored and document is None) else None
        return ParsedCitation(
            chunk_id=self.chunk_id,
            quote=self.quote,
            cited_text_hash=self.text_hash,
            corpus_version=self.corpus_version,
            document=document,
            anchored_by=anchor.method if anchor else ANCHORED_BY_CHUNK,
            anchor_score=anchor.score if anchor else None,
            anchor_note=anchor.note if anchor else None,
            given_index=anchor.given_index if anchor else None,
            retrieved_at=self.retrieved_at,
        )


class ReferenceRecord(CitationRecord):
    ref: ReferenceKey  # the key its markers use: 1, "1" and "01" are all "1"


class ClaimRecord(BaseModel):
    text: RequiredText
    citations: list[CitationRecord] = Field(default_factory=list)
    claim_id: GivenText | None = None

    def parsed(self) -> ParsedClaim:
        return ParsedClaim(
            text=self.text, citations=tuple(c.parsed() for c in self.citations), source_claim_id=self.claim_id
        )


class RepairNote(BaseModel):
    """The answer-level `repair` object of a record that `citekeeper repair` wrote."""

    from_revision: int


class AnswerRecord(BaseModel):
    """One input line. A null `claims` or `references` counts as absent (Parquet rows of the other form)."""

    answer_id: RequiredText
    question: StrictStr | None = None
    answer: StrictStr
    corpus_version: RequiredText
    created_at: Timestamp = None
    claims: list[ClaimRecord] | None = None
    references: list[ReferenceRecord] | None = None
    repair: RepairNote | None = None
    audience: Names = None  # the access groups it was given to (docs/answers.md, "Audience, version and scope")
    about_version: GivenText | None = None
    scope: Names = None  # stored as scope_labels
    _parsed_claims: tuple[ParsedClaim, ...] = PrivateAttr()

    @model_validator(mode="after")
    def _resolve_claims(self, info: ValidationInfo) -> AnswerRecord:
        """Exactly one form, within the validation context's AnswerLimits; in marker form every marker must name
        a reference."""
        limits = (info.context or {}).get("limits", AnswerLimits())
        if self.claims is not None and self.references is not None:
            raise _record_error("claims", "give either claims (structured) or references (marker form), not both")
        if self.claims is not None:
            limits.check_claims(len(self.claims))
            self._parsed_claims = tuple(claim.parsed() for claim in self.claims)
        elif self.references is not None:
            self._parsed_claims = _marker_claims(self.answer, _reference_map(self.references), limits)
        else:
            raise _record_error("claims", "missing: give claims (structured) or references (marker form)")
        limits.check_citations(self._parsed_claims)
        return self

    def parsed(self, source_record: str | None = None, line: int | None = None) -> ParsedAnswer:
        return ParsedAnswer(
            answer_id=self.answer_id,
            question=self.question,
            answer=self.answer,
            corpus_version=self.corpus_version,
            created_at=self.created_at,
            input_form="structured" if self.claims is not None else "marker",
            claims=self._parsed_claims,
            repaired_from=self.repair.from_revision if self.repair else None,
            source_record=source_record,
            line=line,
            audience=self.audience,
            about_version=self.about_version,
            scope_labels=self.scope,
        )


def _reference_map(references: list[ReferenceRecord]) -> dict[str, ParsedCitation]:
    by_key: dict[str, ParsedCitation] = {}
    for i, reference in enumerate(references):
        if reference.ref in by_key:
            raise _record_error(f"references.{i}.ref", f"duplicate reference {reference.ref}")
        by_key[reference.ref] = reference.parsed()
    return by_key


def _marker_claims(answer: str, references: dict[str, ParsedCitation], limits: AnswerLimits) -> tuple[ParsedClaim, ...]:
    claims = []
    sentences = split_sentences(answer)
    limits.check_claims(len(sentences))
    for sentence in sentences:
        keys = _sentence_keys(sentence)
        unknown = [key for key in keys if key not in references]
        if unknown:
            raise _record_error("answer", f"marker [{unknown[0]}] has no entry in references")
        claims.append(ParsedClaim(text=strip_markers(sentence), citations=tuple(references[key] for key in keys)))
    return tuple(claims)


def claim_reference_keys(answer: str) -> list[list[str]]:
    """Per claim (sentence) of a marker-form answer, the reference keys of its citations, in citation order."""
    return [_sentence_keys(sentence) for sentence in split_sentences(answer)]


def _sentence_keys(sentence: str) -> list[str]:
    return list(dict.fromkeys(_ref_key(ref) for ref in marker_ids(sentence)))


def citation_entries(record: dict, input_form: str) -> dict[tuple[int, int], dict]:
    """The dict of `record` that each citation, keyed (claim_index, citation_index), was parsed from. In marker
    form every citation of one reference shares that reference's dict."""
    if input_form == "structured":
        return {
            (claim_index, citation_index): citation
            for claim_index, claim in enumerate(record["claims"])
            for citation_index, citation in enumerate(claim.get("citations") or [])
        }
    by_key = {_reference_key(reference["ref"]): reference for reference in record["references"]}
    return {
        (claim_index, citation_index): by_key[key]
        for claim_index, keys in enumerate(claim_reference_keys(record["answer"]))
        for citation_index, key in enumerate(keys)
    }


def parse_answer(record: object, line: int | None = None, limits: AnswerLimits = AnswerLimits()) -> ParsedAnswer:
    """Validate one input record (either form), read from `line` of its file. Raises AnswerInputError naming
    every bad field."""
    try:
        validated = AnswerRecord.model_validate(record, context={"limits": limits})
    except ValidationError as exc:
        raise AnswerInputError([issue_from(error) for error in exc.errors()]) from None
    return validated.parsed(record_json(record), line)


def record_json(record: object) -> str:
    """`record` as the JSON text the store keeps; AnswerInputError when it has none (an extra key's value of no JSON
    form, a lone surrogate UTF-8 cannot store): that record is refused, not the file."""
    try:
        text = json.dumps(record, ensure_ascii=False, default=_json_value)
    except (TypeError, ValueError) as exc:
        raise AnswerInputError([Issue("record", f"cannot be kept as JSON: {exc}")]) from None
    bad = None if text.isascii() else lone_surrogate(text)
    if bad is not None:
        raise AnswerInputError([Issue("record", f"holds a lone surrogate U+{ord(bad):04X}: not valid Unicode text")])
    return text


def _json_value(value: object) -> object:
    """The JSON form of what Parquet rows hold besides JSON's own types: dates and times as ISO-8601, decimals
    as their exact digits, binary as base64; JSON input never reaches here."""
    if isinstance(value, (date, time)):  # datetime is a date
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


# pydantic's own text would name our model class ("instance of ClaimRecord").
_MESSAGES = {"model_type": "Input should be an object"}


def issue_from(error: ErrorDetails) -> Issue:
    parts = [str(part) for part in error["loc"]]
    if error["type"] == "answer_record":  # a rule over a whole (sub-)record: ctx names the field under its loc
        parts.append(error["ctx"]["field"])
    return Issue(".".join(parts) or "record", _MESSAGES.get(error["type"], error["msg"]))


# ---------------------------------------------------------------- records for the answer store


def answer_rows(answer: ParsedAnswer, revision: int, source_file: str | None, registered_at: datetime) -> dict:
    """The ANSWERS, CLAIMS and CITATIONS rows of one answer revision.

    claim_id and citation_id derive from the answer_id and the content, so an unchanged claim keeps its
    id across revisions (downstream caches key on it).
    """
    claims, citations = [], []
    seen: dict[str, int] = {}
    for claim_index, claim in enumerate(answer.claims):
        key = f"{claim.source_claim_id}\x1f{claim.text}"
        occurrence = seen[key] = seen.get(key, -1) + 1
        claim_id = _short_id("clm", answer.answer_id, claim.source_claim_id, claim.text, occurrence)
        claims.append(
            {
                "answer_id": answer.answer_id,
                "revision": revision,
                "claim_id": claim_id,
                "claim_index": claim_index,
                "text": claim.text,
                "text_hash": text_hash(claim.text),
                "n_citations": len(claim.citations),
                "source_claim_id": claim.source_claim_id,
                "status": "cited" if claim.citations else "uncited",
            }
        )
        for citation_index, cit in enumerate(claim.citations):
            named = cit.chunk_id if cit.chunk_id is not None else cit.document
            citations.append(
                {
                    "answer_id": answer.answer_id,
                    "revision": revision,
                    "claim_id": claim_id,
                    "citation_id": _short_id("cit", claim_id, citation_index, named, cit.quote, cit.cited_text_hash),
                    "citation_index": citation_index,
                    "chunk_id": cit.chunk_id,
                    "quote": cit.quote,
                    "cited_text_hash": cit.cited_text_hash,
                    "corpus_version": cit.corpus_version or answer.corpus_version,
                    "anchored_by": cit.anchored_by,
                    "anchor_score": cit.anchor_score,
                    "anchor_note": cit.anchor_note,
                    "given_index": citation_index if cit.given_index is None else cit.given_index,
                    "cited_doc_id": cit.document.doc_id if cit.document is not None else None,
                    "cited_source_path": cit.document.source_path if cit.document is not None else None,
                    "quote_access_scope": cit.quote_access_scope,
                    "retrieved_at": cit.retrieved_at or answer.created_at,
                }
            )
    answer_row = {
        "answer_id": answer.answer_id,
        "revision": revision,
        "question": answer.question,
        "answer": answer.answer,
        "corpus_version": answer.corpus_version,
        "created_at": answer.created_at,
        "content_hash": answer.content_hash,
        "input_form": answer.input_form,
        "source_file": source_file,
        "source_record": answer.source_record,
        "repaired_from": answer.repaired_from,
        "audience": _listed(answer.audience),
        "about_version": answer.about_version,
        "scope_labels": _listed(answer.scope_labels),
        "registered_at": registered_at,
    }
    return {"answers": [answer_row], "claims": claims, "citations": citations}


def _listed(names: tuple[str, ...] | None) -> list[str] | None:
    return None if names is None else list(names)
