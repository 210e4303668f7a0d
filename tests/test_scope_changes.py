"""What a document is besides its bytes (access_scope, title, doc_id from a sidecar, front matter or the
configured scope globs) decides reuse and the tree's fingerprint; settings that cannot change a parse do not
force one."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from citekeeper.answers.store import AnswerStore
from citekeeper.store import CorpusStore, VersionExists
from parsers.ingest import ingest
from parsers.records import ParseConfig
from pipelines.cli import main
from tests.test_ingest_parallel import slow_markdown

FAQ = "# FAQ\n\nTimeouts default to five seconds. Retries are off unless asked for.\n"
GUIDE = "# Guide\n\nInstall the client with pip. Then import it.\n"
SERIAL = ParseConfig(workers=1)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    root.mkdir()
    (root / "faq.md").write_text(FAQ)
    (root / "guide.md").write_text(GUIDE)
    return root


def sidecar(document: Path, **metadata: str) -> None:
    document.with_name(document.name + ".citekeeper.json").write_text(json.dumps(metadata))


def scopes(store: CorpusStore, version: str) -> dict[str, set[str]]:
    chunks = store.read_chunks(version)
    return {doc_id: set(group["access_scope"]) for (doc_id,), group in chunks.group_by("doc_id")}


def register_answer_on_faq(store: CorpusStore, version: str, path: Path) -> None:
    faq = store.read_chunks(version).filter(pl.col("doc_id") == "faq.md")
    quote = "Timeouts default to five seconds."
    path.write_text(
        json.dumps(
            {
                "answer_id": "timeouts",
                "question": "What is the default timeout?",
                "corpus_version": version,
                "answer": quote,
                "claims": [{"text": quote, "citations": [{"chunk_id": faq["chunk_id"][0], "quote": quote}]}],
            }
        )
        + "\n"
    )
    assert AnswerStore(store.root).add(path).n_registered == 1


def test_a_sidecar_making_a_document_internal_makes_a_new_version_and_the_report_redacts_it(
    source: Path, tmp_path: Path
) -> None:
    store = CorpusStore(tmp_path / "store")
    ingest(source, store, version="v1", config=SERIAL)
    register_answer_on_faq(store, "v1", tmp_path / "answers.jsonl")

    sidecar(source / "faq.md", access_scope="internal_only")
    result = ingest(source, store, version="v2", config=SERIAL)
    assert result.created and result.equals is None
    assert (result.n_parsed, result.n_reused) == (1, 1)
    assert scopes(store, "v2") == {"faq.md": {"internal_only"}, "guide.md": {"user_visible"}}
    assert scopes(store, "v1")["faq.md"] == {"user_visible"}  # the old version is immutable
    assert store.read_documents("v2").filter(pl.col("doc_id") == "faq.md")["access_scope"].to_list() == [
        "internal_only"
    ]

    report = tmp_path / "report.html"
    stale = CliRunner().invoke(
        main, ["stale", "--against", "v2", "--report", str(report), "--store", str(store.root)], catch_exceptions=False
    )
    assert stale.exit_code == 0, stale.output
    html = report.read_text()
    assert "redacted: internal_only" in html
    # The document's text, as cited at v1 or as it is at v2, and the quote taken from it: all withheld (the
    # answer's own claim text is the answer's, not the document's, and stays).
    assert "Retries are off" not in html and "<q>Timeouts" not in html


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda root: sidecar(root / "faq.md", title="Frequently asked"), {"title": "Frequently asked"}),
        (lambda root: sidecar(root / "faq.md", doc_id="support/faq"), {"doc_id": "support/faq"}),
    ],
    ids=["title", "doc_id"],
)
def test_a_sidecar_title_or_doc_id_makes_a_new_version(source: Path, tmp_path: Path, change, expected) -> None:
    store = CorpusStore(tmp_path / "store")
    ingest(source, store, version="v1", config=SERIAL)
    change(source)
    result = ingest(source, store, version="v2", config=SERIAL)
    assert result.created and (result.n_parsed, result.n_reused) == (1, 1)
    faq = store.read_chunks("v2").filter(pl.col("source_path") == "faq.md")
    assert faq.height and all(set(faq[column]) == {value} for column, value in expected.items())


def test_scope_globs_in_the_settings_rescope_documents_without_a_full_reparse(source: Path, tmp_path: Path) -> None:
    store = CorpusStore(tmp_path / "store")
    ingest(source, store, version="v1", config=SERIAL)
    internal_faq = ParseConfig(workers=1, access_scope_overrides=(("faq.*", "internal_only"),))
    result = ingest(source, store, version="v2", config=internal_faq)
    assert result.created and (result.n_parsed, result.n_reused) == (1, 1) and result.reparse_reason is None
    assert scopes(store, "v2") == {"faq.md": {"internal_only"}, "guide.md": {"user_visible"}}
    again = ingest(source, store, config=internal_faq)
    assert not again.created and again.equals == "v2"


def test_settings_that_cannot_change_a_parse_reparse_nothing(source: Path, tmp_path: Path) -> None:
    store = CorpusStore(tmp_path / "store")
    ingest(source, store, version="v1", config=SERIAL)
    run_settings = ParseConfig(workers=2, parse_timeout_s=17.0, max_file_bytes=10**6, exclude=("*.tmp",))
    unchanged = ingest(source, store, config=run_settings)
    assert not unchanged.created and unchanged.equals == "v1" and unchanged.n_parsed == 0

    (source / "guide.md").write_text(GUIDE + "\nA new paragraph.\n")
    changed = ingest(source, store, version="v2", config=run_settings)
    assert changed.created and (changed.n_parsed, changed.n_reused) == (1, 1) and changed.reparse_reason is None
    assert "parse_timeout_s" not in store.manifest("v2").parse_settings
    assert store.manifest("v2").config_hash == store.manifest("v1").config_hash


def test_a_manifest_recording_every_setting_still_lets_its_documents_be_reused(source: Path, tmp_path: Path) -> None:
    """Stores written before the split kept every setting in parse_settings and hashed them all."""
    store = CorpusStore(tmp_path / "store")
    ingest(source, store, version="v1", config=SERIAL)
    path = store.layout.manifest("v1")
    manifest = json.loads(path.read_text())
    old_settings = json.loads(json.dumps(asdict(ParseConfig(parse_timeout_s=60.0))))
    for newer in ("include", "exclude", "workers"):
        del old_settings[newer]
    path.write_text(json.dumps(manifest | {"parse_settings": old_settings, "config_hash": "sha256:every-setting"}))

    result = ingest(source, store, version="v2", config=SERIAL)
    assert result.created and (result.n_parsed, result.n_reused) == (0, 2) and result.reparse_reason is None


def test_a_document_that_timed_out_is_parsed_once_the_limit_allows(source: Path, tmp_path: Path) -> None:
    """The tree and the parse settings are the same, but the version gains a document: not "unchanged"."""
    (source / "long.md").write_text(slow_markdown(2000))
    store = CorpusStore(tmp_path / "store")
    first = ingest(source, store, version="v1", config=ParseConfig(workers=2, parse_timeout_s=1.5))
    assert [(e.source_path, e.error_type) for e in first.errors] == [("long.md", "ParseTimeout")]
    assert not ingest(source, store, config=ParseConfig(workers=2, parse_timeout_s=1.5)).created  # fails again
    with pytest.raises(VersionExists, match="documents that failed there parse now"):
        ingest(source, store, version="v1", config=SERIAL)
    result = ingest(source, store, version="v2", config=SERIAL)
    assert result.created and (result.n_parsed, result.n_reused) == (1, 2) and result.errors == []
    assert "long.md" in set(store.read_documents("v2")["doc_id"])
