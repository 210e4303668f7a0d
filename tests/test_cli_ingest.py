"""citekeeper ingest | versions | export through the real click group."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from citekeeper import schema
from citekeeper.store import CorpusStore
from parsers.discover import RACY_WINDOW_NS
from pipelines.cli import main
from tests.conftest import REPO


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    root.mkdir()
    for name in ("alpha", "beta"):
        (root / f"{name}.md").write_text(f"# {name}\n\nThe {name} document says one thing. Then another.\n")
    return root


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


# A command run in a fresh interpreter; an exit handler registered before the command line is imported runs after
# the command line's own, and prints whether the objects then alive were frozen, out of the exit's collections.
FRESH_COMMAND_EXIT = """
import atexit
import gc
import sys

atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count() > 0))
from pipelines.cli import main

main(sys.argv[1:], prog_name="citekeeper")
"""


def test_ingest_versions_and_export(source: Path, store_dir: Path, tmp_path: Path) -> None:
    first = run("ingest", str(source), "--store", str(store_dir), "--version", "r1")
    assert first.exit_code == 0, first.output
    assert "created corpus version r1" in first.output
    assert "parsed 2, reused 0, removed 0, quarantined 0" in first.output

    (source / "beta.md").unlink()
    (source / "gamma.md").write_text("# gamma\n\nA new document.\n")
    (source / "empty.md").write_bytes(b"")
    second = run("ingest", str(source), "--store", str(store_dir))
    assert second.exit_code == 0, second.output
    assert "created corpus version v0001 (parent: r1)" in second.output
    assert "parsed 1, reused 1, removed 1, quarantined 1" in second.output
    assert "quarantined empty.md:" in second.output

    unchanged = run("ingest", str(source), "--store", str(store_dir))
    assert unchanged.exit_code == 0 and "equals corpus version v0001" in unchanged.output

    listing = run("versions", "--json", "--store", str(store_dir))
    versions = json.loads(listing.output)
    assert [(v["name"], v["parent"], v["n_documents"], v["n_errors"]) for v in versions] == [
        ("r1", None, 2, 0),
        ("v0001", "r1", 2, 1),
    ]
    assert "r1" in run("versions", "--store", str(store_dir)).output

    r1 = CorpusStore(store_dir).manifest("r1")
    assert r1.n_chunks >= 2
    for table, expected, rows in (
        ("chunks", schema.CHUNKS, r1.n_chunks),
        ("documents", schema.DOCUMENTS, 2),
        ("errors", schema.INGEST_ERRORS, 0),
    ):
        out = tmp_path / f"{table}.parquet"
        exported = run("export", table, "--version", "r1", "--out", str(out), "--store", str(store_dir))
        assert exported.exit_code == 0, exported.output
        written = pq.read_table(out)
        assert written.schema.remove_metadata().equals(expected) and written.num_rows == rows
    exported = run(
        "export", "errors", "--version", "v0001", "--out", str(tmp_path / "e.parquet"), "--store", str(store_dir)
    )
    assert exported.exit_code == 0, exported.output
    assert pq.read_table(tmp_path / "e.parquet").column("source_path").to_pylist() == ["empty.md"]


def test_store_from_environment(source: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITEKEEPER_STORE", str(store_dir))
    assert run("ingest", str(source)).exit_code == 0
    assert [v.name for v in CorpusStore(store_dir).versions()] == ["v0001"]


def test_unknown_version_is_a_clear_error(source: Path, store_dir: Path, tmp_path: Path) -> None:
    run("ingest", str(source), "--store", str(store_dir), "--version", "r1")
    result = run(
        "export", "chunks", "--version", "nope", "--out", str(tmp_path / "x.parquet"), "--store", str(store_dir)
    )
    assert result.exit_code == 1
    assert "unknown corpus version 'nope'" in result.output and "known: r1" in result.output
    assert not (tmp_path / "x.parquet").exists()


def test_strict_exits_nonzero_on_quarantined_files(source: Path, store_dir: Path) -> None:
    (source / "broken.pdf").write_bytes(b"\x00\x01 not a pdf")
    lenient = run("ingest", str(source), "--store", str(store_dir / "lenient"))
    assert lenient.exit_code == 0 and "quarantined broken.pdf" in lenient.output
    strict = run("ingest", str(source), "--strict", "--store", str(store_dir / "strict"))
    assert strict.exit_code == 1
    assert "--strict: 1 file(s) quarantined" in strict.output and "broken.pdf" in strict.output
    assert CorpusStore(store_dir / "strict").versions() == []


def test_reusing_a_name_for_other_content_fails(source: Path, store_dir: Path) -> None:
    assert run("ingest", str(source), "--store", str(store_dir), "--version", "r1").exit_code == 0
    (source / "alpha.md").write_text("# alpha\n\nChanged.\n")
    result = run("ingest", str(source), "--store", str(store_dir), "--version", "r1")
    assert result.exit_code == 1 and "already exists with different content" in result.output


def test_include_and_exclude_skip_files_and_keep_strict_usable(source: Path, store_dir: Path) -> None:
    (source / "drafts").mkdir()
    (source / "drafts" / "wip.md").write_text("# wip\n\nNot ready.\n")
    (source / "drafts" / "scan.svg").write_text("<svg/>")  # no parser for it
    (source / "Makefile").write_text("all:\n")
    quarantining = run("ingest", str(source), "--strict", "--store", str(store_dir / "all"))
    assert quarantining.exit_code == 1 and "Makefile" in quarantining.output and "scan.svg" in quarantining.output

    selected = run(
        "ingest",
        str(source),
        "--strict",
        "--include",
        "**/*.md",
        "--exclude",
        "drafts/**",
        "--workers",
        "1",
        "--store",
        str(store_dir / "selected"),
    )
    assert selected.exit_code == 0, selected.output
    assert "parsed 2, reused 0, removed 0, quarantined 0, skipped 3" in selected.output
    documents = CorpusStore(store_dir / "selected").read_documents("v0001")
    assert documents["doc_id"].to_list() == ["alpha.md", "beta.md"]

    included_svg = run("ingest", str(source), "--include", "drafts/*", "--store", str(store_dir / "drafts"))
    assert included_svg.exit_code == 0, included_svg.output
    assert "parsed 1, reused 0, removed 0, quarantined 1, skipped 3" in included_svg.output
    assert "quarantined drafts/scan.svg: discover: UnsupportedFileType" in included_svg.output


def test_ocr_languages_come_from_the_command_line(tmp_path: Path, store_dir: Path) -> None:
    """--ocr-lang reaches the OCR step: a language pack that is not installed quarantines the image, named."""
    import shutil

    from PIL import Image

    from tests.conftest import require_service

    require_service(shutil.which("tesseract") is not None, "Tesseract (apt-get install tesseract-ocr)")
    source = tmp_path / "scans"
    source.mkdir()
    Image.new("RGB", (64, 32), "white").save(source / "blank.png")
    result = run(
        "ingest", str(source), "--store", str(store_dir), "--ocr-lang", "eng", "--ocr-lang", "zzz", "--workers", "1"
    )
    store = CorpusStore(store_dir)
    (error,) = store.read_errors(store.latest().name).to_dicts()
    assert error["error_type"] == "MissingSystemTool" and "zzz" in error["reason"], result.output


def test_each_parse_setting_is_declared_once_and_made_into_an_option_and_a_resource_field(source: Path) -> None:
    """ParseConfig declares the parse settings (parsers.records.SETTINGS); the `ingest` options and the ingest
    resource's fields are made from them, and the same values give both the same ParseConfig."""
    import click

    from assets.resources import IngestResource
    from parsers.records import SETTINGS, ParseConfig
    from pipelines.cli_ingest import given_parse_config, ingest_command

    options = {param.name: param for param in ingest_command.params if isinstance(param, click.Option)}
    for setting in SETTINGS:
        field = IngestResource.model_fields[setting.resource_field]
        assert (field.default, field.description) == (setting.default, setting.help), setting.name
        option = options[setting.name]
        assert setting.option in option.opts and (setting.name == "authority_levels" or setting.help in option.help)
    assert given_parse_config(ingest_command.make_context("ingest", [str(source)]).params) == ParseConfig()
    assert IngestResource().parse_config() == ParseConfig()

    args = [
        *("--max-chunk-chars", "80", "--workers", "2", "--parse-timeout", "9.5", "--ocr-lang", "eng"),
        *("--include", "docs/**", "--source-url-template", "https://d.example/{path}"),
        *("--source-default", "api/**", "authority=community", "--source-field", "updated_at=modified,lastmod"),
        *("--source-field", "source_url=", "--authority-levels", "spec,community"),
    ]
    from_cli = given_parse_config(ingest_command.make_context("ingest", [str(source), *args]).params)
    from_resource = IngestResource(
        max_chunk_chars=80,
        parse_workers=2,
        parse_timeout_s=9.5,
        ocr_languages=["eng"],
        include=["docs/**"],
        source_url_template="https://d.example/{path}",
        source_defaults=[["api/**", "authority", "community"]],
        source_fields_map={"updated_at": ["modified", "lastmod"], "source_url": []},
        authority_levels=["spec", "community"],
    ).parse_config()
    assert from_cli == from_resource != ParseConfig()
    assert from_cli.source_fields_map == (("updated_at", ("modified", "lastmod")), ("source_url", ()))
    for bad, message in [
        (["--max-chunk-chars", "10"], "10 is not in the range x>=50"),
        (["--source-default", "api/**", "authority"], "expected NAME=VALUE, got 'authority'"),
    ]:
        result = run("ingest", str(source), *bad)
        assert result.exit_code == 2 and message in result.output, result.output


def test_an_ingest_leaves_its_objects_out_of_the_exit_collections(source: Path, store_dir: Path) -> None:
    """Issue #34: the interpreter's last collections walked everything the run loaded (~1 s after a small reindex
    that parsed here); frozen, they skip it, and the command's output and exit status stay the same."""
    command = [sys.executable, "-c", FRESH_COMMAND_EXIT, "ingest", str(source), "--store", str(store_dir)]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "created corpus version v0001 (parent: none): 2 documents" in run.stdout
    assert run.stdout.splitlines()[-1] == "frozen at exit: True"


def test_an_ingest_reads_and_commits_the_store_without_importing_lancedb(source: Path, store_dir: Path) -> None:
    """Issue #34: a nightly run reads the parent's documents and commits its change through pylance; lancedb's
    import (~1 s of every run, its namespace client's pydantic models) is left to the search index."""
    reporting = "import atexit, sys\natexit.register(lambda: print('lancedb:', 'lancedb' in sys.modules))\n"
    command = [sys.executable, "-c", reporting + FRESH_COMMAND_EXIT, "ingest", str(source), "--store", str(store_dir)]

    def fresh_ingest() -> list[str]:
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    first = fresh_ingest()
    assert "created corpus version v0001 (parent: none): 2 documents, 2 chunks" in first and "lancedb: False" in first
    with (source / "alpha.md").open("a", encoding="utf-8") as out:
        out.write("\n\nA paragraph added later.\n")
    changed = fresh_ingest()
    assert "parsed 1, reused 1, removed 0, quarantined 0, skipped 0" in changed and "lancedb: False" in changed
    time.sleep(RACY_WINDOW_NS / 1e9 + 0.2)  # past the racy window: every file's stat is trusted
    unchanged = fresh_ingest()
    assert (
        "source tree unchanged: it equals corpus version v0002; no new version created" in unchanged
        and "lancedb: False" in unchanged
    )
    assert CorpusStore(store_dir).read_chunks("v0002")["text"].str.contains("added later").sum() == 1
