import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
# The shared evaluation data sits beside the checkout (CI lays a copy there); override to point elsewhere.
SHARED_EVAL = Path(os.environ.get("CITEKEEPER_EVAL_DIR", REPO.parent / "shared" / "eval")).resolve()
HTTPX_DOCS = SHARED_EVAL / "httpx-docs"
WICE_DEV = SHARED_EVAL / "wice" / "claim-dev.jsonl"
VUE_DOCS_ZH = SHARED_EVAL / "vue-docs-zh"
SAMPLE_CORPUS = REPO / "sample_corpus"


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


def require_service(available: bool, what: str) -> None:
    """Skip a test whose service (PostgreSQL, Chromium) is missing; under .ci/run, fail instead."""
    if available:
        return
    if os.environ.get("CITEKEEPER_REQUIRE_SERVICES"):
        pytest.fail(f"{what} is required under .ci/run (CITEKEEPER_REQUIRE_SERVICES=1) but missing")
    pytest.skip(f"{what} not available; .ci/run installs and starts it")
