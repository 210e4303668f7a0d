"""The four visibility levels (issue #31; docs/answers.md, "Visibility levels"): the strictest of front matter,
sidecar and the configured overrides holds; a citation is re-anchored only into levels no stricter than its own; and
each shared output shows of a document what its level allows: everything (user_visible), title, link and summary
but no text (redacted), locators but no text (internal_only), nothing that names it (aggregate_only)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from citekeeper.scope import ACCESS_SCOPES, AGGREGATE_MARK, AGGREGATE_REASON, WITHHELD_TEXT, visible_from
from citekeeper.store import CorpusStore
from parsers.ingest import ingest
from parsers.records import ParseConfig
from pipelines.cli import main

SENTENCE = "The {level} page says retries back off twice."


def _page(level: str) -> str:
    return f"---\ntitle: The {level} page\n---\n# Heading\n\n{SENTENCE.format(level=level)}\n"


def _sidecar(path: Path, **fields: str) -> None:
    path.with_name(path.name + ".citekeeper.json").write_text(json.dumps(fields))


def test_the_strictest_of_front_matter_sidecar_and_override_holds(tmp_path: Path) -> None:
    root = tmp_path / "src"
    root.mkdir()
    expected = {}
    for front, side, override in itertools.product(ACCESS_SCOPES, repeat=3):
        name = f"{front}-{side}-{override}.md"
        (root / name).write_text(f"---\naccess_scope: {front}\n---\n# {name}\n\nA page of its own: {name}.\n")
        _sidecar(root / name, access_scope=side)
        expected[name] = max((front, side, override), key=ACCESS_SCOPES.index)
    overrides = tuple((f"*-*-{level}.md", level) for level in ACCESS_SCOPES)
    store = CorpusStore(tmp_path / "store")
    ingest(root, store, version="v1", config=ParseConfig(workers=1, access_scope_overrides=overrides))
    stored = dict(store.read_documents("v1", columns=["source_path", "access_scope"]).iter_rows())
    assert stored == expected


def test_a_citation_is_re_anchored_only_into_levels_no_stricter_than_its_own() -> None:
    assert [visible_from(level) for level in ACCESS_SCOPES] == [
        ACCESS_SCOPES[: i + 1] for i in range(len(ACCESS_SCOPES))
    ]
    assert visible_from(None) == visible_from("no such level") == ("user_visible",)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, pl.DataFrame]:
    """One page per level (title in front matter; the redacted one's link and summary in its sidecar, a link for
    every page), an answer quoting each, and every table export, answers export and stale --out."""
    base = tmp_path_factory.mktemp("levels")
    root, store_dir, out = base / "src", base / "store", base / "out"
    root.mkdir()
    for level in ACCESS_SCOPES:
        (root / f"{level}.md").write_text(_page(level))
        _, _, url, summary = _source(level)
        _sidecar(root / f"{level}.md", access_scope=level, source_url=url, summary=summary)
    runner = CliRunner()

    def run(*args: str) -> None:
        result = runner.invoke(main, [*args, "--store", str(store_dir)])
        assert result.exit_code == 0, (args, result.output)

    run("ingest", str(root), "--version", "v1", "--workers", "1")
    chunks = CorpusStore(store_dir).read_chunks("v1", columns=["chunk_id", "access_scope"])
    claims = [
        {"text": f"{level} retries.", "citations": [{"chunk_id": chunk_id, "quote": SENTENCE.format(level=level)}]}
        for chunk_id, level in chunks.sort("access_scope").iter_rows()
    ]
    (base / "answers.jsonl").write_text(
        json.dumps({"answer_id": "a", "answer": "...", "corpus_version": "v1", "claims": claims}) + "\n"
    )
    run("answers", "add", str(base / "answers.jsonl"))
    for table in ("chunks", "documents"):
        run("export", table, "--version", "v1", "--out", str(out / f"{table}.parquet"))
    run("answers", "export", "--out", str(out / "answers.parquet"))
    run("stale", "--against", "v1", "--out", str(out / "status.parquet"))
    return {name: pl.read_parquet(out / f"{name}.parquet") for name in ("chunks", "documents", "answers", "status")}


def _source(level: str) -> tuple[str, str, str, str]:
    """The page's title, path, link and summary, as ingested."""
    return f"The {level} page", f"{level}.md", f"https://docs.example.com/{level}/", f"What {level} holds."


def _by_level(frame: pl.DataFrame, columns: list[str]) -> dict[str, tuple]:
    return {row[0]: row[1:] for row in frame.select("access_scope", *columns).rows()}


def test_the_corpus_exports_show_each_level_what_it_allows(outputs) -> None:
    for table, text in (("chunks", "text"), ("documents", "text")):
        shown = _by_level(outputs[table], [text, "title", "source_path", "source_url", "summary"])
        assert SENTENCE.format(level="user_visible") in shown["user_visible"][0]
        assert shown["user_visible"][1:] == _source("user_visible")
        assert shown["redacted"] == (WITHHELD_TEXT["redacted"], *_source("redacted"))
        assert shown["internal_only"] == (
            WITHHELD_TEXT["internal_only"],
            *_source("internal_only")[:3],
            None,
        )  # no summary
        assert shown["aggregate_only"] == (
            WITHHELD_TEXT["aggregate_only"],
            AGGREGATE_MARK,
            AGGREGATE_MARK,
            AGGREGATE_MARK,
            None,
        )
    documents = _by_level(outputs["documents"], ["doc_id", "front_matter"])
    assert documents["aggregate_only"] == (AGGREGATE_MARK, WITHHELD_TEXT["aggregate_only"])
    assert documents["redacted"][1] == WITHHELD_TEXT["redacted"] and "user_visible" in documents["user_visible"][1]
    chunk = _by_level(outputs["chunks"], ["doc_id", "section_path"])
    assert chunk["aggregate_only"] == (AGGREGATE_MARK, None) and chunk["internal_only"] == (
        "internal_only.md",
        ["Heading"],
    )


def test_the_answer_and_status_exports_show_each_level_what_it_allows(outputs) -> None:
    answers = _by_level(outputs["answers"], ["quote", "title", "source_path", "doc_id", "source_url", "summary"])
    assert answers["user_visible"][0] == SENTENCE.format(level="user_visible")
    title, path, url, summary = _source("redacted")
    assert answers["redacted"] == (WITHHELD_TEXT["redacted"], title, path, path, url, summary)
    assert answers["internal_only"][:4] == (
        WITHHELD_TEXT["internal_only"],
        "The internal_only page",
        "internal_only.md",
        "internal_only.md",
    )
    assert answers["internal_only"][5] is None
    assert answers["aggregate_only"] == (
        WITHHELD_TEXT["aggregate_only"],
        AGGREGATE_MARK,
        AGGREGATE_MARK,
        AGGREGATE_MARK,
        AGGREGATE_MARK,
        None,
    )
    status = _by_level(outputs["status"], ["quote", "old_text", "source_path", "doc_id", "old_locator", "reason"])
    assert status["user_visible"][0] == SENTENCE.format(level="user_visible") in status["user_visible"][1]
    assert status["user_visible"][5] == "chunk unchanged"
    assert status["redacted"][:4] == (
        WITHHELD_TEXT["redacted"],
        WITHHELD_TEXT["redacted"],
        "redacted.md",
        "redacted.md",
    )
    assert status["internal_only"][:4] == (
        WITHHELD_TEXT["internal_only"],
        WITHHELD_TEXT["internal_only"],
        "internal_only.md",
        "internal_only.md",
    )
    assert status["aggregate_only"] == (WITHHELD_TEXT["aggregate_only"],) * 2 + (
        AGGREGATE_MARK,
        AGGREGATE_MARK,
        None,
        AGGREGATE_REASON,
    )
