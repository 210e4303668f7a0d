"""bench/gpu_check.py, the GPU check of the NLI tier, run on the CPU with its flag: it must work wherever CI runs
so the script a GPU machine runs is never stale."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import HTTPX_DOCS, require_eval

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "gpu_check.py"


def test_gpu_check_runs_on_the_cpu():
    require_eval(HTTPX_DOCS)
    args = [
        "--device",
        "cpu",
        "--pairs",
        "8",
        "--architectures",
        "deberta-v3-xsmall",
        "--precisions",
        "fp32",
        "bf16",
        "--batch-size",
        "4",
        "--max-batch",
        "8",
        "--checkers",
        "roberta:tiny",
        "t5:tiny",
        "qwen2:tiny",
    ]
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("deberta-v3-xsmall")]
    assert [line.split()[2] for line in lines] == ["fp32", "bf16"]  # one line per precision, as asked
    for line in lines:
        end_to_end, bare = map(float, re.findall(r"([\d.]+) pairs/s", line))
        assert end_to_end > 0 and bare > 0 and "largest batch 8 (--max-batch 8 reached)" in line
    checkers = [line for line in done.stdout.splitlines() if line.startswith(("roberta:tiny", "t5:tiny", "qwen2:tiny"))]
    assert [line.split()[:3] for line in checkers[::2]] == [
        ["roberta:tiny", "binary", "cpu"],
        ["t5:tiny", "seq2seq", "cpu"],
        ["qwen2:tiny", "causal-lm", "cpu"],
    ]
    assert len(checkers) == 6 and all("largest batch 8 (--max-batch 8 reached)" in line for line in checkers)
