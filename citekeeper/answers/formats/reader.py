"""The contract of an answer format's module (see citekeeper.answers.formats): its `read(response)` returns the
response's answer text and each citation it makes (`Cited`), or raises ShapeError naming the first field not of
the format's shape. The helpers read a response's fields and name the field, as the input spells it, when one is
missing or of the wrong kind."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


class ShapeError(ValueError):
    """The response is not of its format's shape."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


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


# A format's reader: the response (its None fields absent) -> the answer text and the citations it makes.
Reader = Callable[[object], tuple[str, list[Cited]]]


def get_field(value: object, key: str, field: str, kind: type | tuple = object, required: bool = True):
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


def non_negative(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ShapeError(field, f"should be a non-negative integer, not {value!r:.40}")
    return value


def non_negative_or_none(value: object, field: str) -> int | None:
    """An index the response may leave out."""
    return None if value is None else non_negative(value, field)


def text_blocks(blocks: list) -> list[tuple[int, dict, int, int]]:
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


def joined(blocks: list[tuple[int, dict, int, int]]) -> str:
    return "".join(block["text"] for _, block, _, _ in blocks)
