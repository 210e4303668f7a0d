"""Parse registered answers (structured or marker form) into answer, claim and citation records.

Structured:  {"answer_id", "question", "answer", "corpus_version", "created_at"?,
              "claims": [{"claim_id"?, "text", "citations": [{"chunk_id", "quote"?, "text_hash"?}]}]}
Marker form: {"answer_id", "question", "answer": "text with [1] and [2][3] markers", "corpus_version",
              "references": [{"ref": 1, "chunk_id", "quote"?, "text_hash"?}]}
In marker form every sentence (citekeeper.text rules, any script) becomes a claim; a sentence without
markers is an uncited claim. Markers are those of citekeeper.text.MARKER: [1], [1][2], [1,2], 【1】, ［1］,
^[1], and ids such as [D1] (whose `ref` is then the string "D1").
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from citekeeper.text import MARKER_ID, marker_ids, split_sentences, strip_markers
from citekeeper.identity import text_hash


class AnswerInputError(ValueError):
    """One input record is malformed; `field` names the offending field (dotted path)."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


@dataclass(frozen=True)
class ParsedCitation:
    chunk_id: str
    quote: str | None
    cited_text_hash: str | None


@dataclass(frozen=True)
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
    input_form: str  # structured | marker
    claims: tuple[ParsedClaim, ...] = field(default_factory=tuple)

    @property
    def content_hash(self) -> str:
        """Hash of everything the answer says; re-adding equal content is a no-op."""
        payload = {
            "question": self.question,
            "answer": self.answer,
            "corpus_version": self.corpus_version,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "claims": [
                [c.source_claim_id, c.text, [[x.chunk_id, x.quote, x.cited_text_hash] for x in c.citations]]
                for c in self.claims
            ],
        }
        return text_hash(json.dumps(payload, sort_keys=True, ensure_ascii=False))


def _short_id(prefix: str, *parts: object) -> str:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).hexdigest()
    return f"{prefix}_{digest[:20]}"


# ---------------------------------------------------------------- field validation


def _required_str(record: dict, key: str, path: str) -> str:
    value = record.get(key)
    if value is None:
        raise AnswerInputError(path, "missing")
    if not isinstance(value, str) or not value.strip():
        raise AnswerInputError(path, f"must be a non-empty string, got {value!r:.60}")
    return value


def _optional_str(record: dict, key: str, path: str) -> str | None:
    value = record.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise AnswerInputError(path, f"must be a non-empty string when given, got {value!r:.60}")
    return value


def _list(record: dict, key: str, path: str) -> list:
    value = record.get(key)
    if not isinstance(value, list):
        raise AnswerInputError(path, "missing" if value is None else "must be a list")
    return value


def _object(value: object, path: str) -> dict:
    if not isinstance(value, dict):
        raise AnswerInputError(path, "must be an object")
    return value


def _created_at(record: dict) -> datetime | None:
    value = record.get("created_at")
    if value is None or isinstance(value, datetime):
        return _utc(value)
    if not isinstance(value, str):
        raise AnswerInputError("created_at", "must be an ISO-8601 string")
    try:
        return _utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError as exc:
        raise AnswerInputError("created_at", f"not an ISO-8601 timestamp: {value!r}") from exc


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _citation(record: object, path: str) -> ParsedCitation:
    record = _object(record, path)
    text_hash = _optional_str(record, "text_hash", f"{path}.text_hash")
    if text_hash is not None and not text_hash.startswith("sha256:"):
        raise AnswerInputError(f"{path}.text_hash", "must look like 'sha256:<hex>'")
    return ParsedCitation(
        chunk_id=_required_str(record, "chunk_id", f"{path}.chunk_id"),
        quote=_optional_str(record, "quote", f"{path}.quote"),
        cited_text_hash=text_hash,
    )


# ---------------------------------------------------------------- the two input forms


def _structured_claims(record: dict) -> tuple[ParsedClaim, ...]:
    claims = []
    for i, claim in enumerate(_list(record, "claims", "claims")):
        path = f"claims[{i}]"
        claim = _object(claim, path)
        citations = claim.get("citations", [])
        if not isinstance(citations, list):
            raise AnswerInputError(f"{path}.citations", "must be a list")
        claims.append(
            ParsedClaim(
                text=_required_str(claim, "text", f"{path}.text"),
                citations=tuple(_citation(c, f"{path}.citations[{j}]") for j, c in enumerate(citations)),
                source_claim_id=_optional_str(claim, "claim_id", f"{path}.claim_id"),
            )
        )
    return tuple(claims)


_REF = re.compile(MARKER_ID)


def _ref_key(ref: str) -> str:
    """One key for a reference id however it is written: "01" and 1 are the same number."""
    return str(int(ref)) if ref.isdigit() else ref


def _reference_key(ref: object, path: str) -> str:
    if isinstance(ref, int) and not isinstance(ref, bool):
        return str(ref)
    if isinstance(ref, str) and _REF.fullmatch(ref.strip()):
        return _ref_key(ref.strip())
    raise AnswerInputError(path, f"must be an integer or a marker id such as 'D1', got {ref!r:.40}")


def _marker_claims(record: dict, answer: str) -> tuple[ParsedClaim, ...]:
    references: dict[str, ParsedCitation] = {}
    for i, ref in enumerate(_list(record, "references", "references")):
        path = f"references[{i}]"
        ref = _object(ref, path)
        key = _reference_key(ref.get("ref"), f"{path}.ref")
        if key in references:
            raise AnswerInputError(f"{path}.ref", f"duplicate reference {key}")
        references[key] = _citation(ref, path)
    claims = []
    for sentence in split_sentences(answer):
        keys = [_ref_key(ref) for ref in marker_ids(sentence)]
        unknown = [key for key in keys if key not in references]
        if unknown:
            raise AnswerInputError("answer", f"marker [{unknown[0]}] has no entry in references")
        text = strip_markers(sentence)
        claims.append(ParsedClaim(text=text, citations=tuple(references[key] for key in dict.fromkeys(keys))))
    return tuple(claims)


def parse_answer(record: object) -> ParsedAnswer:
    """Validate one input record (either form). Raises AnswerInputError naming the bad field."""
    record = _object(record, "record")
    has_claims, has_refs = "claims" in record, "references" in record
    if has_claims and has_refs:
        raise AnswerInputError("claims", "give either claims (structured) or references (marker form), not both")
    answer = record.get("answer")
    if not isinstance(answer, str):
        raise AnswerInputError("answer", "missing" if answer is None else "must be a string")
    question = record.get("question")
    if question is not None and not isinstance(question, str):
        raise AnswerInputError("question", "must be a string")
    if not has_claims and not has_refs:
        raise AnswerInputError("claims", "missing: give claims (structured) or references (marker form)")
    return ParsedAnswer(
        answer_id=_required_str(record, "answer_id", "answer_id"),
        question=question,
        answer=answer,
        corpus_version=_required_str(record, "corpus_version", "corpus_version"),
        created_at=_created_at(record),
        input_form="structured" if has_claims else "marker",
        claims=_structured_claims(record) if has_claims else _marker_claims(record, answer),
    )


# ---------------------------------------------------------------- reading input files


@dataclass(frozen=True)
class LineError:
    line: int  # 1-based line (JSONL) or row (Parquet) number
    field: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.field}: {self.message}"


def read_answer_records(path: Path) -> tuple[list[ParsedAnswer], list[LineError]]:
    """The answers of a JSONL or Parquet file, and an error for each bad non-blank line / row."""
    path = Path(path)
    if path.suffix.lower() == ".parquet":
        rows: Iterator[tuple[int, object]] = enumerate(pl.read_parquet(path).to_dicts(), start=1)
    else:
        rows = _jsonl_rows(path)
    answers, errors = [], []
    for line_no, row in rows:
        if isinstance(row, LineError):
            errors.append(row)
            continue
        try:
            answers.append(parse_answer(row))
        except AnswerInputError as exc:
            errors.append(LineError(line_no, exc.field, exc.message))
    return answers, errors


def _jsonl_rows(path: Path) -> Iterator[tuple[int, object]]:
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield line_no, json.loads(line)
            except json.JSONDecodeError as exc:
                yield line_no, LineError(line_no, "json", f"not valid JSON ({exc.msg} at column {exc.colno})")


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
            citations.append(
                {
                    "answer_id": answer.answer_id,
                    "revision": revision,
                    "claim_id": claim_id,
                    "citation_id": _short_id("cit", claim_id, citation_index, cit.chunk_id, cit.quote, cit.cited_text_hash),
                    "citation_index": citation_index,
                    "chunk_id": cit.chunk_id,
                    "quote": cit.quote,
                    "cited_text_hash": cit.cited_text_hash,
                    "corpus_version": answer.corpus_version,
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
        "registered_at": registered_at,
    }
    return {"answers": [answer_row], "claims": claims, "citations": citations}
