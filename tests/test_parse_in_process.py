"""A run too small to pay for starting the parse pool parses in the ingesting process (parsers.parse_pool,
_parses_here): no forkserver, no worker, the same outcomes, and parse_timeout_s still quarantines a slow
document. Larger runs, runs holding a document whose format needs a worker's isolation and runs started off
the main thread still go to the pool."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from parsers import parse_pool
from parsers.discover import discover_sources
from parsers.parse_pool import IN_PROCESS_MAX_BYTES, IN_PROCESS_MAX_DOCUMENTS
from parsers.records import IngestError, ParseConfig, SourceFile
from tests.conftest import REPO, SAMPLE_CORPUS
from tests.test_ingest_parallel import parse_sources

POOLED = ParseConfig(workers=2)

# In a fresh interpreter, as the `citekeeper` command runs an ingest: parse the tree in argv[1] with two workers,
# then print how many outcomes came back, the processes this one started that are still alive (the pool's
# forkserver lives as long as its parent) and whether the markdown parser was loaded here.
FRESH_PROCESS_RUN = """
import sys
from pathlib import Path

import psutil

from parsers.discover import discover_sources
from parsers.parse_pool import iter_outcomes
from parsers.records import ParseConfig

sources, _ = discover_sources(Path(sys.argv[1]), ParseConfig())
outcomes = list(iter_outcomes(sources, ParseConfig(workers=2)))
children = [child.cmdline() for child in psutil.Process().children(recursive=True)]
print(len(outcomes), children, "unstructured.partition.md" in sys.modules)
"""

# In a fresh interpreter: parse the small tree in argv[1] here, then print whether every document parsed, whether
# torch was imported and whether langdetect loaded its language profiles.
FRESH_PROCESS_LOADS = """
import sys
from pathlib import Path

from parsers.discover import discover_sources
from parsers.parse_pool import iter_outcomes
from parsers.records import ParseConfig, ParsedDocument

sources, _ = discover_sources(Path(sys.argv[1]), ParseConfig())
outcomes = [outcome for _, outcome in iter_outcomes(sources, ParseConfig())]
from langdetect import detector_factory

parsed = len(outcomes) == len(sources) and all(isinstance(outcome, ParsedDocument) for outcome in outcomes)
print(parsed, "torch" in sys.modules, detector_factory._factory is not None)
"""


def note(i: int) -> str:
    return f"# Note {i}\n\nNote {i} records one thing. It was checked on day {i}.\n\n## More\n\nItem {i} is fine.\n"


def markdown_tree(root: Path, n_docs: int) -> Path:
    root.mkdir()
    for i in range(n_docs):
        (root / f"note-{i:03d}.md").write_text(note(i))
    return root


def sources_of(tree: Path) -> list[SourceFile]:
    sources, _ = discover_sources(tree, ParseConfig())
    return sources


@pytest.fixture
def pools_started(monkeypatch) -> list[int]:
    """The size of every parse pool started while the test runs (the real pool, counted)."""
    started: list[int] = []

    class CountedPool(parse_pool._Pool):
        def __init__(self, size: int, config: ParseConfig):
            started.append(size)
            super().__init__(size, config)

    monkeypatch.setattr(parse_pool, "_Pool", CountedPool)
    return started


def test_a_small_run_of_markdown_starts_no_process(tmp_path: Path) -> None:
    tree = markdown_tree(tmp_path / "src", 3)
    run = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS_RUN, str(tree)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[-2] == "3 [] True"  # no forkserver, no worker: parsed here


def test_a_small_run_of_markdown_and_html_loads_neither_torch_nor_language_profiles(tmp_path: Path) -> None:
    """Issue #34: the parsers' first load is most of a small reindex. spaCy's pipeline runs on thinc without torch
    (parsers.formats.thinc_without_torch: ~1.8 s of imports), and no document's language is detected (~0.7 s to
    load langdetect's profiles), which only unstructured's element metadata held."""
    tree = markdown_tree(tmp_path / "src", 2)
    shutil.copy(SAMPLE_CORPUS / "v1" / "security.html", tree)
    run = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS_LOADS, str(tree)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[-2] == "True False False"


def test_a_run_above_the_threshold_of_documents_goes_to_the_pool(tmp_path: Path, pools_started) -> None:
    sources = sources_of(markdown_tree(tmp_path / "src", IN_PROCESS_MAX_DOCUMENTS + 1))
    assert sum(source.size_bytes for source in sources) <= IN_PROCESS_MAX_BYTES  # only the count is over
    outcomes = parse_sources(sources, POOLED)
    assert pools_started == [2]
    assert [outcome.source.doc_id for outcome in outcomes] == [source.doc_id for source in sources]


def test_a_run_above_the_threshold_of_bytes_goes_to_the_pool(tmp_path: Path, pools_started) -> None:
    tree = markdown_tree(tmp_path / "src", 2)
    (tree / "long.md").write_text("\n\n".join(note(i) for i in range(IN_PROCESS_MAX_BYTES // len(note(0)) + 1)))
    sources = sources_of(tree)
    total_bytes = sum(source.size_bytes for source in sources)
    assert len(sources) <= IN_PROCESS_MAX_DOCUMENTS and total_bytes > IN_PROCESS_MAX_BYTES  # only the bytes are over
    parse_sources(sources, POOLED)
    assert pools_started == [2]


def test_a_small_run_with_a_document_that_needs_isolation_goes_to_the_pool(tmp_path: Path, pools_started) -> None:
    """A PDF (OCR for pages without a text layer, Poppler and Tesseract) parses in a worker whose process group
    the pool kills and whose memory it caps; the whole run goes with it, as the pool's start is paid anyway."""
    tree = markdown_tree(tmp_path / "src", 2)
    shutil.copy(SAMPLE_CORPUS / "v1" / "backups.pdf", tree)
    sources = sources_of(tree)
    pooled = parse_sources(sources, POOLED)
    assert pools_started == [2]
    assert pooled == parse_sources(sources, ParseConfig(workers=1))
    assert {outcome.source.filetype for outcome in pooled} == {"md", "pdf"}


def test_a_small_run_off_the_main_thread_goes_to_the_pool(tmp_path: Path, pools_started) -> None:
    """parse_timeout_s is a SIGALRM, which only the main thread can take: elsewhere a worker is killed instead."""
    sources = sources_of(markdown_tree(tmp_path / "src", 2))
    outcomes: list = []
    thread = threading.Thread(target=lambda: outcomes.extend(parse_sources(sources, POOLED)))
    thread.start()
    thread.join()
    assert pools_started == [2] and len(outcomes) == 2


def test_a_small_run_parsed_here_gives_what_the_pool_gives(tmp_path: Path, pools_started, monkeypatch) -> None:
    tree = markdown_tree(tmp_path / "src", 2)
    (tree / "front.md").write_text("---\ntitle: Front matter\n---\n# Heading\n\nThe body says one thing.\n")
    (tree / "only-front.md").write_text("---\ntitle: Nothing else\n---\n")  # nothing to cite: skipped
    (tree / "empty.html").write_text("<html><body></body></html>")  # no text: skipped
    (tree / "broken.xlsx").write_bytes(b"not a ZIP archive")  # an error
    (tree / "rows.csv").write_text("name,amount\nwidgets,3\ngadgets,4\n")
    for name in ("security.html", "sla.txt"):
        shutil.copy(SAMPLE_CORPUS / "v1" / name, tree)
    sources = sources_of(tree)
    here = parse_sources(sources, POOLED)
    assert pools_started == []
    monkeypatch.setattr(parse_pool, "IN_PROCESS_MAX_DOCUMENTS", 0)
    pooled = parse_sources(sources, POOLED)
    assert pools_started == [2]
    assert here == pooled
    kinds = {type(outcome).__name__ for outcome in here}
    assert kinds == {"ParsedDocument", "SkippedDocument", "IngestError"}


def test_a_document_past_its_time_limit_is_quarantined_when_parsed_here(tmp_path: Path, pools_started) -> None:
    """Many short, distinct paragraphs (spaCy runs on each; a repeated one hits unstructured's cache) make a
    parse of seconds from a file under the byte threshold."""
    tree = markdown_tree(tmp_path / "src", 2)
    paragraphs = (f"Line {i} is short. So is {i + 1}." for i in range(IN_PROCESS_MAX_BYTES))
    (tree / "slow.md").write_text("\n\n".join(paragraphs)[: IN_PROCESS_MAX_BYTES - 1024])
    sources = sources_of(tree)
    outcomes = parse_sources(sources, ParseConfig(workers=2, parse_timeout_s=0.5))
    assert pools_started == []
    errors = [outcome for outcome in outcomes if isinstance(outcome, IngestError)]
    assert [(e.source_path, e.stage, e.error_type) for e in errors] == [("slow.md", "parse", "ParseTimeout")]
    assert "longer than 0.5 s (parse_timeout_s); file skipped" in errors[0].reason
    assert len(outcomes) == 3


# In a fresh interpreter: ingest the tree in argv[1] twice into the store in argv[2], with n_new notes (argv[3])
# added before the second run; print, for each run, whether the pool's forkserver was running when parsing began.
FRESH_PROCESS_WARMUP = """
import multiprocessing.forkserver
import sys
from pathlib import Path

import parsers.ingest
from citekeeper.store import CorpusStore
from parsers.records import ParseConfig

running_at_parse = []
parse = parsers.ingest.iter_outcomes

def recording(*args, **kwargs):
    running_at_parse.append(multiprocessing.forkserver._forkserver._forkserver_pid is not None)
    return parse(*args, **kwargs)

parsers.ingest.iter_outcomes = recording
tree, store = Path(sys.argv[1]), CorpusStore(Path(sys.argv[2]))
parsers.ingest.ingest(tree, store, config=ParseConfig(workers=2))
for i in range(100, 100 + int(sys.argv[3])):
    (tree / f"note-{i:03d}.md").write_text(f"# Note {i}\\n\\nNote {i} was added later. It says one thing.\\n")
result = parsers.ingest.ingest(tree, store, config=ParseConfig(workers=2))
print(running_at_parse, result.n_parsed)
"""


def test_a_run_that_reads_too_much_to_parse_here_starts_the_pool_during_discovery(tmp_path: Path) -> None:
    """Issue #34: the pool's start (a fresh interpreter importing the parsers) overlaps discovery and the reuse
    check once the documents discovery read are too many to parse here; a small run starts none."""
    tree = markdown_tree(tmp_path / "src", 3)
    n_new = IN_PROCESS_MAX_DOCUMENTS + 1
    command = [sys.executable, "-c", FRESH_PROCESS_WARMUP, str(tree), str(tmp_path / "store"), str(n_new)]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[-2] == f"[False, True] {n_new}"
