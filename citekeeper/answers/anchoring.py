"""Anchor citations that name a document (doc_id or source_path, with a quote, offsets or neither) into the
chunks of the version they cite, at registration (docs/answers.md, "Citations by document")."""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from rapidfuzz import fuzz

from citekeeper.answers.files import LineError
from citekeeper.answers.records import UNANCHORED, DocumentRef, ParsedAnswer, ParsedCitation, ParsedClaim
from citekeeper.locate import locate_quote
from citekeeper.scope import internal, strictest
from citekeeper.text import normalize_text, snap_to_words, trim_span

ANCHOR_METHODS = ("chunk_id", "exact", "normalized", "fuzzy", "offsets", "document", UNANCHORED)
REVIEW_METHODS = ("fuzzy", "offsets")  # anchored, but a person should look: flagged in exports
FUZZY_THRESHOLD = 0.9  # rapidfuzz partial_ratio / 100 of the best window of the document


@dataclass(frozen=True)
class _Document:
    doc_id: str
    text: str
    chunks: tuple[tuple[int, int, str], ...]  # (start_char, end_char, chunk_id), by start

    @functools.cached_property
    def starts(self) -> list[int]:
        return [chunk[0] for chunk in self.chunks]


@dataclass(slots=True)
class _Span:
    start: int
    end: int
    method: str
    score: float | None = None


class DocumentTexts:
    """The texts and chunk spans of the documents a batch of answers cites, read from the store per version."""

    def __init__(self, corpus) -> None:
        self.corpus = corpus
        self._docs: dict[tuple[str, str], _Document] = {}  # (version, doc_id)
        self._paths: dict[str, dict[str, str]] = {}  # version -> source_path -> doc_id
        self._versions: dict[str, bool] = {}
        self._withheld: dict[
            str, list[tuple[str, tuple[str, ...]]]
        ] = {}  # version -> (level, text forms) of withheld texts

    def has_version(self, version: str) -> bool:
        if version not in self._versions:
            self._versions[version] = self.corpus.has_version(version)
        return self._versions[version]

    def doc_id(self, version: str, ref: DocumentRef) -> str | None:
        if ref.doc_id is not None or ref.source_path is None:
            return ref.doc_id
        if version not in self._paths:
            paths = self.corpus.read_documents(version, columns=["doc_id", "source_path"])
            self._paths[version] = dict(zip(paths["source_path"], paths["doc_id"]))
        return self._paths[version].get(ref.source_path)

    def load(self, wanted: Iterable[tuple[str, DocumentRef]]) -> None:
        """Read the documents `wanted` names (those of known versions), keeping only them: memory follows a batch."""
        by_version: dict[str, set[str]] = {}
        for version, ref in wanted:
            if self.has_version(version) and (doc_id := self.doc_id(version, ref)) is not None:
                by_version.setdefault(version, set()).add(doc_id)
        kept = {key: doc for key, doc in self._docs.items() if key[1] in by_version.get(key[0], ())}
        for version, doc_ids in by_version.items():
            missing = sorted(doc_ids - {doc_id for v, doc_id in kept if v == version})
            if missing:
                kept.update(((version, doc.doc_id), doc) for doc in self._read(version, missing))
        self._docs = kept

    def _read(self, version: str, doc_ids: list[str]) -> Iterable[_Document]:
        texts = self.corpus.read_documents(version, columns=["doc_id", "text"], doc_ids=doc_ids)
        chunks = (
            self.corpus.read_chunks(version, columns=["doc_id", "start_char", "end_char", "chunk_id"], doc_ids=doc_ids)
            .sort("doc_id", "start_char", "end_char")
            .group_by("doc_id", maintain_order=True)
            .agg("start_char", "end_char", "chunk_id")
        )
        spans = {doc_id: tuple(zip(*columns)) for doc_id, *columns in chunks.iter_rows()}
        for doc_id, text in texts.iter_rows():
            yield _Document(doc_id, text, spans.get(doc_id, ()))

    def withheld_scope(self, version: str, quote: str) -> str | None:
        """The strictest level of the documents of `version` whose text is withheld (every level but user_visible)
        and holds `quote`, exact or normalised (strict or loose); None when none does. Those texts are read once,
        when an unanchored quote first asks."""
        if not self.has_version(version):
            return None
        if version not in self._withheld:
            scopes = self.corpus.read_documents(version, columns=["doc_id", "access_scope"]).filter(
                internal("access_scope")
            )
            texts = (
                self.corpus.read_documents(version, columns=["doc_id", "text"], doc_ids=scopes["doc_id"].to_list())
                if scopes.height
                else None
            )
            rows = (
                scopes.join(texts, on="doc_id").select("access_scope", "text").iter_rows() if texts is not None else ()
            )
            self._withheld[version] = [
                (scope, (text, normalize_text(text), normalize_text(text, loose=True))) for scope, text in rows
            ]
        forms = (quote, normalize_text(quote), normalize_text(quote, loose=True))
        found = [
            scope
            for scope, texts in self._withheld[version]
            if any(form and form in text for form, text in zip(forms, texts))
        ]
        return strictest(found) if found else None

    def get(self, version: str, ref: DocumentRef) -> _Document | None:
        """The document `ref` names in `version` as loaded; None when the version or the document is not in the
        store."""
        doc_id = ref.doc_id
        if doc_id is None and ref.source_path is not None:
            doc_id = self._paths.get(version, {}).get(ref.source_path)
        return self._docs.get((version, doc_id)) if doc_id is not None else None


def anchor_answers(answers: list[ParsedAnswer], texts: DocumentTexts) -> tuple[list[ParsedAnswer], list[LineError]]:
    """`answers` with every citation by document anchored into chunks; an error for each citation whose document
    is not in the version it cites, or that names no document (`ParsedAnswer.unmapped`). The answer still
    registers, with that citation invalid."""
    # id -> (version, citation, its document, given_index); marker form: a reference shared by claims anchors once
    wanted = {
        id(citation): (citation.corpus_version or answer.corpus_version, citation, citation.document, given_index)
        for answer in answers
        for claim in answer.claims
        for given_index, citation in enumerate(claim.citations)
        if citation.chunk_id is None and citation.document is not None
    }
    errors = [
        LineError(answer.line or 0, issue.field, issue.message) for answer in answers for issue in answer.unmapped
    ]
    if wanted:
        texts.load((version, ref) for version, _, ref, _ in wanted.values())
        anchored = {
            key: _anchor(citation, ref, version, texts, given_index)
            for key, (version, citation, ref, given_index) in wanted.items()
        }

        def missing(citation: ParsedCitation) -> bool:
            version, _, ref, _ = wanted[id(citation)]
            return texts.get(version, ref) is None

        answers = [_anchored_answer(answer, anchored, missing, errors) for answer in answers]
    return [_internal_quotes_withheld(answer, texts) for answer in answers], errors


def _internal_quotes_withheld(answer: ParsedAnswer, texts: DocumentTexts) -> ParsedAnswer:
    """`answer` with each unanchored quote that is withheld text of its version (internal_only, redacted or
    aggregate_only) marked with that level: it is evidence claimed from the corpus, so every shared output withholds
    it as it would the anchored quote."""
    if not any(c.anchored_by == UNANCHORED and c.quote for claim in answer.claims for c in claim.citations):
        return answer

    def checked(citation: ParsedCitation) -> ParsedCitation:
        version = citation.corpus_version or answer.corpus_version
        scope = (
            texts.withheld_scope(version, citation.quote)
            if citation.anchored_by == UNANCHORED and citation.quote
            else None
        )
        if scope is None:
            return citation
        note = f"{citation.anchor_note}; the quote is {scope} text of {version!r}, so it is withheld"
        return replace(citation, anchor_note=note, quote_access_scope=scope)

    return answer.with_claims(
        tuple(replace(claim, citations=tuple(map(checked, claim.citations))) for claim in answer.claims)
    )


def _anchored_answer(
    answer: ParsedAnswer,
    anchored: dict[int, list[ParsedCitation]],
    missing: Callable[[ParsedCitation], bool],
    errors: list[LineError],
) -> ParsedAnswer:
    if not any(id(c) in anchored for claim in answer.claims for c in claim.citations):
        return answer
    claims = []
    for claim_index, claim in enumerate(answer.claims):
        citations = []
        for given_index, citation in enumerate(claim.citations):
            pieces = anchored.get(id(citation))
            if pieces is None:  # named its chunk
                citations.append(replace(citation, given_index=given_index))
                continue
            if pieces[0].anchored_by == UNANCHORED and missing(citation):
                errors.append(
                    LineError(
                        answer.line or 0, f"claims.{claim_index}.citations.{given_index}", str(pieces[0].anchor_note)
                    )
                )
            citations.extend(_given_as(piece, given_index) for piece in pieces)
        claims.append(ParsedClaim(text=claim.text, citations=tuple(citations), source_claim_id=claim.source_claim_id))
    return answer.with_claims(tuple(claims))


def _given_as(piece: ParsedCitation, given_index: int) -> ParsedCitation:
    return piece if piece.given_index == given_index else replace(piece, given_index=given_index)


def _anchor(
    citation: ParsedCitation, ref: DocumentRef, version: str, texts: DocumentTexts, given_index: int
) -> list[ParsedCitation]:
    document = texts.get(version, ref)
    if document is None:
        where = (
            f"cited version {version!r}" if texts.has_version(version) else f"the store: its version {version!r} is not"
        )
        return [_unanchored(citation, f"document {ref.name!r} is not in {where}")]
    span = _span(document.text, citation.quote, ref)
    if isinstance(span, str):
        return [_unanchored(citation, span)]
    if span.method == "document":
        return [_piece(citation, chunk_id, None, span, given_index) for _, _, chunk_id in document.chunks] or [
            _unanchored(citation, f"document {ref.name!r} has no chunks in {version!r}")
        ]
    pieces = _pieces(document, span.start, span.end)
    if not pieces:
        return [_unanchored(citation, f"the span {span.start}-{span.end} of {ref.name!r} is in no chunk")]
    return [_piece(citation, chunk_id, document.text[start:end], span, given_index) for chunk_id, start, end in pieces]


def _span(text: str, quote: str | None, ref: DocumentRef) -> _Span | str:
    """Where the citation's evidence is in the document's text, or why it cannot be said."""
    if quote is None:
        if ref.start_char is None or ref.end_char is None:  # given together (CitationRecord)
            return _Span(0, len(text), "document")
        if ref.end_char > len(text):
            return f"offsets {ref.start_char}-{ref.end_char} run past the end of {ref.name!r} ({len(text)} characters)"
        return _Span(*snap_to_words(text, ref.start_char, ref.end_char), "offsets")
    exact = _nearest(text, quote, ref.start_char)
    if exact is not None:
        return _Span(exact, exact + len(quote), "exact")
    match = locate_quote(text, quote)
    if match is not None:
        return _Span(match.start, match.end, "normalized")
    if len(quote) <= len(text):
        fuzzy = fuzz.partial_ratio_alignment(quote, text, score_cutoff=FUZZY_THRESHOLD * 100)
        if fuzzy is not None:
            start, end = snap_to_words(text, fuzzy.dest_start, fuzzy.dest_end)
            if start < end:
                return _Span(start, end, "fuzzy", round(fuzzy.score / 100, 4))
    return f"quote is not in {ref.name!r}, not even fuzzily (threshold {FUZZY_THRESHOLD})"


def _nearest(text: str, quote: str, hint: int | None) -> int | None:
    """The exact occurrence of `quote` nearest the hint (the first without one). Searched outward from the hint, so
    a right hint costs the quote's length, not the document's."""
    if hint is None:
        found = text.find(quote)
        return None if found < 0 else found
    after = text.find(quote, hint)
    if after == hint:
        return after
    low = 0 if after < 0 else max(hint - (after - hint), 0)
    before = text.rfind(quote, low, hint + len(quote) - 1)
    if before < 0:
        return None if after < 0 else after
    return before if after < 0 or hint - before <= after - hint else after


def _pieces(document: _Document, start: int, end: int) -> list[tuple[str, int, int]]:
    """(chunk_id, start, end) of the chunks the span touches: the first chunk that holds it all, else a cover
    of the span, each piece trimmed of edge whitespace."""
    chunks, touching = document.chunks, []
    for i in range(max(bisect.bisect_right(document.starts, start) - 1, 0), len(chunks)):
        if chunks[i][0] >= end:
            break
        if chunks[i][1] > start:
            touching.append(chunks[i])
    whole = next((chunk for chunk in touching if chunk[0] <= start and chunk[1] >= end), None)
    if whole is not None:
        return [(whole[2], start, end)]
    pieces, at = [], start
    for chunk_start, chunk_end, chunk_id in touching:
        if chunk_end <= at:
            continue
        piece_start, piece_end = trim_span(document.text, max(at, chunk_start), min(end, chunk_end))
        if piece_start < piece_end:
            pieces.append((chunk_id, piece_start, piece_end))
        at = min(end, chunk_end)
    return pieces


def _piece(citation: ParsedCitation, chunk_id: str, quote: str | None, span: _Span, given_index: int) -> ParsedCitation:
    return ParsedCitation(
        chunk_id,
        quote,
        None,
        citation.corpus_version,
        citation.document,
        span.method,
        span.score,
        None,
        given_index,
        retrieved_at=citation.retrieved_at,
    )


def _unanchored(citation: ParsedCitation, note: str) -> ParsedCitation:
    return replace(citation, anchored_by=UNANCHORED, anchor_note=note)
