"""Precision of the lexical fast path (tier 2) on WiCE dev, through the real verification engine.

Each WiCE claim becomes a claim citing one chunk: its evidence sentences. The engine runs without a model,
so a claim is decided only when every sentence is near-verbatim in the evidence (status `supported`, tier
`lexical`). precision = decided claims whose gold label is `supported` / decided claims (a gold
`partially_supported` counts as wrong); coverage = decided claims / all claims. Target: precision >= 0.95.

    .venv/bin/python bench/wice_lexical_precision.py [path/to/claim-dev.jsonl]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.lexical_fastpath import lexically_supported
from tests.eval_data import WICE_DEV

TARGET = 0.95


def read_wice(path: Path) -> pl.DataFrame:
    rows = []
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            rows.append(
                {
                    "line": line_no,
                    "label": record["label"],
                    "claim": record["claim"],
                    "evidence": "\n".join(record["evidence"]),
                }
            )
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            print(f"{path}:{line_no}: skipped ({type(exc).__name__}: {exc})", file=sys.stderr)
    return pl.DataFrame(rows)


def main(path: Path = WICE_DEV) -> dict:
    wice = read_wice(path).with_columns(pl.format("wice-{}", "line").alias("claim_id"))
    decided = lexically_supported(wice.select("claim_id", "claim", "evidence"), "wice-dev")
    gold = wice.filter(pl.col("claim_id").is_in(decided.implode())).select(
        "claim_id", "label", pl.col("claim").alias("text")
    )
    n, n_decided = wice.height, gold.height
    correct = gold.filter(pl.col("label") == "supported").height
    precision = correct / n_decided if n_decided else None
    figures = {"n": n, "decided": n_decided, "correct": correct, "precision": precision, "coverage": n_decided / n}
    wrong = gold.filter(pl.col("label") != "supported")
    print(f"WiCE dev lexical fast path: n={n} decided={n_decided} correct={correct}")
    print(
        f"precision={'n/a' if precision is None else f'{precision:.3f}'} (target >= {TARGET}) "
        f"coverage={figures['coverage']:.3f} ({n_decided}/{n} claims decided without a model)"
    )
    for row in wrong.iter_rows(named=True):
        print(f"  wrongly certified ({row['label']}): {row['text']}")
    return figures


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else WICE_DEV)
