import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

from tests.eval_data import EVAL_ENV, HTTPX_DOCS, REAL_CORPORA, SHARED_EVAL, VUE_DOCS_ZH, WICE_DEV  # noqa: F401 (re-exported)

os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
REQUIRE_EVAL_ENV = "CITEKEEPER_REQUIRE_EVAL"  # set by .ci/run: missing data fails instead of skipping
SAMPLE_CORPUS = REPO / "pipelines" / "sample_corpus"  # package data: the demo reads it from the package


def load_script(relative_path: str) -> ModuleType:
    """A script of the repo outside the packages (bench/, scripts/) loaded as a module."""
    path = REPO / relative_path
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


def require_eval(path: Path) -> Path:
    """`path` (a data set under SHARED_EVAL) for a real-data test. Missing: the test skips, one message for
    every such test, saying where the data goes; under .ci/run (CITEKEEPER_REQUIRE_EVAL=1) it fails."""
    if path.exists():
        return path
    where = f"set {EVAL_ENV}=/path/to/eval (default ../shared/eval beside the checkout)"
    if os.environ.get(REQUIRE_EVAL_ENV):
        pytest.fail(f"real evaluation data missing: {path} is required under .ci/run ({REQUIRE_EVAL_ENV}=1); {where}")
    name = path.relative_to(SHARED_EVAL) if path.is_relative_to(SHARED_EVAL) else path
    pytest.skip(f"real evaluation data {name} not found under {SHARED_EVAL}; {where}")


def require_service(available: bool, what: str) -> None:
    """Skip a test whose service (PostgreSQL, Chromium) is missing; under .ci/run, fail instead."""
    if available:
        return
    if os.environ.get("CITEKEEPER_REQUIRE_SERVICES"):
        pytest.fail(f"{what} is required under .ci/run (CITEKEEPER_REQUIRE_SERVICES=1) but missing")
    pytest.skip(f"{what} not available; .ci/run installs and starts it")
