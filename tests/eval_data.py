"""Where the real evaluation data is, for the tests and the benchmarks alike.

It is not part of the repository: it sits beside the checkout in ../shared/eval (CI lays a copy there), or
wherever CITEKEEPER_EVAL_DIR points.
"""

import os
from pathlib import Path

EVAL_ENV = "CITEKEEPER_EVAL_DIR"
SHARED_EVAL = Path(os.environ.get(EVAL_ENV) or Path(__file__).resolve().parents[2] / "shared" / "eval").resolve()
HTTPX_DOCS = SHARED_EVAL / "httpx-docs"
WICE_DEV = SHARED_EVAL / "wice" / "claim-dev.jsonl"
VUE_DOCS_ZH = SHARED_EVAL / "vue-docs-zh"
REAL_CORPORA = SHARED_EVAL / "corpora"  # documentation sites at two releases each (its README.md)
