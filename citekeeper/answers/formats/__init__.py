"""Answers as RAG systems return them: an LLM API's or framework's response in its envelope (`--from FORMAT`),
turned into an answer record whose citations name documents, anchored at registration (citekeeper.answers.anchoring;
docs/answers.md, "Answers as LLM APIs return them"). Each format is a module of its own whose `read` fulfils the
contract of citekeeper.answers.formats.reader; RESPONSE_FORMATS registers it under its `--from` name, and every
list of formats (the CLI's help, AnswersResource's check, the docs' test) reads it (docs/extending.md)."""

from __future__ import annotations

import functools
from collections.abc import Callable

from citekeeper.answers.formats import anthropic, cohere, gemini, langchain, llamaindex, openai
from citekeeper.answers.formats.envelope import parse_response
from citekeeper.answers.formats.reader import Reader
from citekeeper.answers.records import ParsedAnswer

# `--from NAME` -> its reader; listed in this order wherever the formats are named.
RESPONSE_FORMATS: dict[str, Reader] = {
    "anthropic": anthropic.read,
    "openai": openai.read,
    "cohere": cohere.read,
    "gemini": gemini.read,
    "llamaindex": llamaindex.read,
    "langchain": langchain.read,
}


class UnknownFormat(ValueError):
    pass


def converter(response_format: str | None) -> Callable[..., ParsedAnswer] | None:
    """What turns a line of `response_format` into an answer record (None: lines are answer records already)."""
    if response_format is None:
        return None
    if response_format not in RESPONSE_FORMATS:
        raise UnknownFormat(f"unknown response format {response_format!r}: use one of {', '.join(RESPONSE_FORMATS)}")
    return functools.partial(parse_response, response_format=response_format, read=RESPONSE_FORMATS[response_format])
