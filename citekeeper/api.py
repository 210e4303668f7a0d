"""The Python API for RAG code: register answers as they are produced, and read them back, without files
(docs/answers.md, "From Python")."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import polars as pl

from citekeeper.answers.export import citation_rows
from citekeeper.answers.store import AddResult, AnswerStore
from citekeeper.store import CorpusStore


def register_answers(
    store_dir: Path | str,
    records: Iterable[dict],
    source: str = "api",
    response_format: str | None = None,
    audience: Iterable[str] | None = None,
) -> AddResult:
    """Register answer records (structured or marker form; with `response_format`, responses of that LLM API or
    framework in their envelope, citekeeper.answers.formats) in the store's answer store: new answers, new revisions
    of changed ones, nothing for identical ones; citations by document are anchored into the version they cite.
    Bad records are reported in `result.errors` (LineError(line=N, field=..., message=...), N counting the
    records from 1), the good ones register. `audience`: the groups the answers were given to, as `answers add
    --audience` takes them (a record without one gets them; one with its own keeps the groups in both).

    In a directory where `citekeeper ingest docs` made version v0001 of docs/faq.md ("Timeouts default to five
    seconds. Failed requests are retried three times."), an answer in marker form citing it by document, and one
    record without its answer:

    >>> result = register_answers(
    ...     ".citekeeper/store",
    ...     [
    ...         {
    ...             "answer_id": "timeouts",
    ...             "question": "What is the default timeout?",
    ...             "corpus_version": "v0001",
    ...             "answer": "Timeouts default to five seconds. [1]",
    ...             "references": [{"ref": 1, "doc_id": "faq.md", "quote": "five seconds"}],
    ...         },
    ...         {"answer_id": "proxy", "question": "Is there a proxy setting?", "corpus_version": "v0001"},
    ...     ],
    ... )
    >>> result.added, result.errors
    (['timeouts'], [LineError(line=2, field='answer', message='Field required')])
    """
    given = tuple(audience) if audience is not None else None
    return AnswerStore(store_dir).add_records(records, source, response_format=response_format, audience=given)


def answer_citations(
    store_dir: Path | str, answer_id: str | None = None, include_internal_text: bool = False
) -> pl.DataFrame:
    """What `citekeeper answers export` writes (schema ANSWER_EXPORT), as a frame: one row per citation.

    With the store of register_answers' example, an answer in structured form, then its citation:

    >>> _ = register_answers(
    ...     ".citekeeper/store",
    ...     [
    ...         {
    ...             "answer_id": "retries",
    ...             "question": "Are failed requests retried?",
    ...             "corpus_version": "v0001",
    ...             "answer": "Yes, three times.",
    ...             "claims": [
    ...                 {
    ...                     "text": "Failed requests are retried three times.",
    ...                     "citations": [{"doc_id": "faq.md", "quote": "retried three times"}],
    ...                 }
    ...             ],
    ...         }
    ...     ],
    ... )
    >>> answer_citations(".citekeeper/store", "retries").select("claim_text", "source_path", "quote").rows()
    [('Failed requests are retried three times.', 'faq.md', 'retried three times')]
    """
    return citation_rows(CorpusStore(store_dir), answer_id, include_internal_text)
