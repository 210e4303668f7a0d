"""The stale-citation report of the sample corpus v1 -> v2, opened in headless Chromium: it renders its
sections and plots, and a <script> planted in a cited document is shown as text, never run."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from PIL import Image

from citekeeper.store import CorpusStore
from pipelines.cli import main
from tests.conftest import SAMPLE_CORPUS, require_service

CHROMIUM = os.environ.get("CITEKEEPER_TEST_CHROMIUM", "/usr/bin/chromium")
# Would retitle the page and mark <body> if it ever ran.
PAYLOAD = "<script>document.title='PWNED';document.body.setAttribute('data-pwned','yes')</script>"
NOTE_V1 = f"NOTES\n\nOperators sometimes paste {PAYLOAD} into ticket notes; support staff must retype it.\n"
NOTE_V2 = f"NOTES\n\nOperators sometimes paste {PAYLOAD} into ticket notes; support staff must delete it.\n"


def _chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
    ]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120, check=True)


def _dump_dom(page: Path, profile: Path) -> str:
    return _chromium(["--virtual-time-budget=3000", "--dump-dom", page.as_uri()], profile).stdout


def _cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Sample corpus with a planted script in a cited plain-text paragraph that changes in v2."""
    require_service(Path(CHROMIUM).is_file(), f"Chromium ({CHROMIUM})")
    base = tmp_path_factory.mktemp("browser")
    for version, note in (("v1", NOTE_V1), ("v2", NOTE_V2)):
        shutil.copytree(SAMPLE_CORPUS / version, base / version)
        with (base / version / "sla.txt").open("a") as sla:
            sla.write("\n" + note)
    store_dir = str(base / "store")
    _cli("ingest", str(base / "v1"), "--version", "v1", "--store", store_dir)
    chunks = CorpusStore(store_dir).read_chunks("v1")
    planted = chunks.filter(
        pl.col("text").str.contains("<script>", literal=True) & (pl.col("source_path") == "sla.txt")
    )
    assert planted.height == 1, "the planted script must survive parsing as text"
    quote = "Operators sometimes paste " + PAYLOAD
    answers = (
        SAMPLE_CORPUS.joinpath("answers.jsonl").read_text()
        + json.dumps(
            {
                "answer_id": "pasted-notes",
                "question": "What should support do with pasted notes?",
                "answer": "Support staff must retype pasted notes [1].",
                "corpus_version": "v1",
                "references": [{"ref": 1, "chunk_id": planted["chunk_id"][0], "quote": quote}],
            }
        )
        + "\n"
    )
    (base / "answers.jsonl").write_text(answers)
    _cli("answers", "add", str(base / "answers.jsonl"), "--store", store_dir)
    _cli("stale", "--against", "v1", "--store", store_dir)
    _cli("ingest", str(base / "v2"), "--version", "v2", "--store", store_dir)
    _cli("stale", "--against", "v2", "--store", store_dir, "--report", str(base / "report.html"))
    return base / "report.html"


def test_chromium_runs_scripts_in_an_unescaped_page(tmp_path: Path):
    """Control: the same payload, unescaped, does run here, so the report test below can fail."""
    require_service(Path(CHROMIUM).is_file(), f"Chromium ({CHROMIUM})")
    page = tmp_path / "control.html"
    page.write_text(f"<!DOCTYPE html><html><head><title>control</title></head><body><p>x</p>{PAYLOAD}</body></html>")
    dom = _dump_dom(page, tmp_path / "profile")
    assert "<title>PWNED</title>" in dom and 'data-pwned="yes"' in dom


def test_report_renders_in_chromium_and_planted_script_does_not_run(report: Path, tmp_path: Path):
    require_service(Path(CHROMIUM).is_file(), f"Chromium ({CHROMIUM})")
    assert "&lt;script&gt;document.title=" in report.read_text()

    dom = _dump_dom(report, tmp_path / "profile-dom")
    for section in ('id="summary"', 'id="plots"', 'id="blast-radius"', 'id="answers"', 'id="answer-pasted-notes"'):
        assert section in dom, section
    assert dom.count("<svg") == 3  # statuses per version, stale over time, blast radius
    assert "PWNED" not in dom.split("</title>")[0]  # the title is the report's own
    assert 'data-pwned="yes"' not in dom  # the attribute the script would set (its text shows the quoted form)
    assert "&lt;script&gt;document.title='PWNED'" in dom  # shown as text in the evidence card

    screenshot = tmp_path / "report.png"
    _chromium(
        ["--window-size=1280,2000", "--hide-scrollbars", f"--screenshot={screenshot}", report.as_uri()],
        tmp_path / "profile-shot",
    )
    with Image.open(screenshot) as image:
        assert image.size == (1280, 2000)
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # text, badges and plots, not a blank page
