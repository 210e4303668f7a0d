"""Registering answers in an LLM API's shape: `answers add --from anthropic` against the native form, same answers.

The store is bench_diff's synthetic corpus (default 100,000 chunks: 1,000 documents of 100). Each of N answers
(default 100,000) cites one chunk by a quote of it. The same answers are written twice:
  native     structured records citing the chunk_id (the baseline)
  anthropic  Messages API responses (a text block with one char_location citation: document_index into
             `documents`, cited_text, start/end_char_index), so registration anchors each quote in its document
Each is registered by AnswerStore.add (what `citekeeper answers add FILE [--from anthropic]` runs) in a fresh child
process into an empty answer store, so its peak RSS is its own, --repeats times each, interleaved. Prints each run's
wall time, time per answer and peak RSS, then the targets on the median times: anthropic time per answer
<= 1.5x native; peak RSS <= 2 GB; every anthropic citation anchored exactly, to the chunk the native record names.

    .venv/bin/python bench/bench_answer_formats.py [--answers 100000] [--chunks 100000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_diff import generate

VERSION = "old"
RATIO_TARGET = 1.5
RSS_TARGET_MB = 2048


def build(root: Path, n_chunks: int, n_answers: int) -> None:
    """Child process: the corpus, and both answers files (not registered: that is measured)."""
    from citekeeper.store import CorpusStore

    generate(root, n_chunks, 0.01)
    chunks = CorpusStore(root).read_chunks(VERSION, columns=["chunk_id", "doc_id", "text", "start_char", "source_path"])
    picked = chunks[np.random.default_rng(5).integers(0, chunks.height, n_answers)].with_row_index("i")
    with (root.parent / "native.jsonl").open("w") as native, (root.parent / "anthropic.jsonl").open("w") as anthropic:
        for row in picked.iter_rows(named=True):
            quote = row["text"][9:]  # "paragraph N revision 0: the ... follow here."
            claim = f"Answer {row['i']} rests on paragraph {row['chunk_id'][-6:]}."
            head = {
                "answer_id": f"ans_{row['i']:07d}",
                "question": f"What does {row['doc_id']} say?",
                "corpus_version": VERSION,
            }
            native.write(
                json.dumps(
                    head
                    | {
                        "answer": claim,
                        "claims": [{"text": claim, "citations": [{"chunk_id": row["chunk_id"], "quote": quote}]}],
                    }
                )
                + "\n"
            )
            start = row["start_char"] + 9
            block = {
                "type": "text",
                "text": claim,
                "citations": [
                    {
                        "type": "char_location",
                        "cited_text": quote,
                        "document_index": 0,
                        "document_title": row["doc_id"],
                        "start_char_index": start,
                        "end_char_index": start + len(quote),
                    }
                ],
            }
            response = {
                "id": f"msg_{row['i']}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [block],
                "stop_reason": "end_turn",
            }
            anthropic.write(
                json.dumps(head | {"documents": [{"source_path": row["source_path"]}], "response": response}) + "\n"
            )


def register(form: str, root: Path, out: multiprocessing.Queue) -> None:
    """Child process: one add into an empty answer store, timed."""
    import lancedb  # noqa: F401  (paid alike by both forms on first import: not timed)

    from citekeeper.answers.store import AnswerStore

    shutil.rmtree(root / "answers", ignore_errors=True)
    started = time.perf_counter()
    result = AnswerStore(root).add(root.parent / f"{form}.jsonl", response_format=None if form == "native" else form)
    seconds = time.perf_counter() - started
    citations = AnswerStore(root).citations().select("answer_id", "chunk_id", "anchored_by")
    citations.write_parquet(root.parent / f"{form}-citations.parquet")
    out.put(
        (seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, result.n_registered, len(result.errors))
    )


def in_child(target, *args):
    out = multiprocessing.Queue()
    process = multiprocessing.Process(target=target, args=(*args, out) if target is register else args)
    process.start()
    result = out.get() if target is register else None
    process.join()
    if process.exitcode != 0:
        raise SystemExit(f"{target.__name__}{args[:1]} failed (exit {process.exitcode})")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=100_000)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each form; the median time is compared")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-answer-formats-") as tmp:
        root = Path(tmp) / "store"
        started = time.perf_counter()
        in_child(build, root, args.chunks, args.answers)
        print(f"built {args.chunks:,} chunks and 2 x {args.answers:,} answers in {time.perf_counter() - started:.1f}s")
        runs = {"native": [], "anthropic": []}
        for _ in range(args.repeats):  # interleaved, so a slow spell of a shared machine hits both forms
            for form, measured in runs.items():
                seconds, rss, registered, errors = run = in_child(register, form, root)
                measured.append(run)
                print(
                    f"{form:9s}  {seconds:7.2f} s  {seconds / args.answers * 1e6:6.1f} us/answer  "
                    f"peak RSS {rss:7.0f} MB  {registered:,} registered, {errors} errors"
                )
        measured = {form: (statistics.median(r[0] for r in runs[form]), max(r[1] for r in runs[form])) for form in runs}
        native, anthropic = (
            pl.read_parquet(root.parent / f"{form}-citations.parquet") for form in ("native", "anthropic")
        )
        same = native.join(anthropic, on="answer_id", suffix="_anthropic")
        anchored = same.filter(
            (pl.col("chunk_id") == pl.col("chunk_id_anthropic")) & (pl.col("anchored_by_anthropic") == "exact")
        ).height
    ratio = measured["anthropic"][0] / measured["native"][0]
    print(f"median of {args.repeats}: native {measured['native'][0]:.2f} s, anthropic {measured['anthropic'][0]:.2f} s")
    rss = max(m[1] for m in measured.values())
    verdict = "OK" if ratio <= RATIO_TARGET else "MISSED"
    print(f"anthropic / native time per answer: {ratio:.2f}x (target <= {RATIO_TARGET}x): {verdict}")
    print(f"peak RSS {rss:.0f} MB (target <= {RSS_TARGET_MB} MB): {'OK' if rss <= RSS_TARGET_MB else 'MISSED'}")
    verdict = "OK" if anchored == args.answers else "MISSED"
    print(f"anchored exactly to the native record's chunk: {anchored:,} of {args.answers:,}: {verdict}")


if __name__ == "__main__":
    main()
