"""The answer-format registry (citekeeper.answers.formats.RESPONSE_FORMATS) is the one list of formats: each entry
is the `read` of a module named for it, documented (docs/answers.md's formats table, docs/extending.md) and given a
sample response that tests/test_rag_formats.py takes end to end (its examples in docs/answers.md are read there)."""

import re

import pytest

from citekeeper.answers.formats import RESPONSE_FORMATS
from tests.conftest import REPO
from tests.test_rag_formats import CASES


def formats_table() -> list[str]:
    """The `--from` column of docs/answers.md's formats table, in order."""
    text = (REPO / "docs" / "answers.md").read_text(encoding="utf-8")
    table = text.split("\n| `--from` |", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", table, flags=re.M)


def extending_section() -> str:
    text = (REPO / "docs" / "extending.md").read_text(encoding="utf-8")
    return text.split("\n## An answer format\n", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("name", RESPONSE_FORMATS)
def test_each_format_is_the_read_of_its_own_module(name):
    reader = RESPONSE_FORMATS[name]
    assert (reader.__module__, reader.__name__) == (f"citekeeper.answers.formats.{name}", "read")


def test_docs_answers_has_a_row_for_each_format_in_registry_order():
    assert formats_table() == list(RESPONSE_FORMATS)


def test_docs_extending_names_each_formats_module():
    section = extending_section()
    assert [name for name in RESPONSE_FORMATS if f"`{name}.py`" not in section] == []


def test_each_format_has_a_sample_response_and_no_sample_is_unregistered():
    assert sorted(CASES) == sorted(RESPONSE_FORMATS)
