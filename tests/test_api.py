"""The examples in citekeeper.api's docstrings run as written, in a directory where `citekeeper ingest docs` made
the small corpus they cite."""

import doctest

import citekeeper.api
from citekeeper.settings import DEFAULT_STORE
from citekeeper.store import CorpusStore
from parsers.ingest import ingest

FAQ = "# FAQ\n\nTimeouts default to five seconds.\n\nFailed requests are retried three times.\n"


def test_the_api_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "faq.md").write_text(FAQ)
    assert ingest("docs", CorpusStore(DEFAULT_STORE)).manifest.name == "v0001"
    with_examples = {test.name for test in doctest.DocTestFinder().find(citekeeper.api) if test.examples}
    assert with_examples >= {"citekeeper.api.register_answers", "citekeeper.api.answer_citations"}
    result = doctest.testmod(citekeeper.api)
    assert result.attempted > 0 and result.failed == 0, result
