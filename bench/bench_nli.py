"""NLI verification benchmark on the real architecture of the default model, with random weights.

The model is cross-encoder/nli-deberta-v3-xsmall's architecture (DeBERTa-v3 xsmall: 12 layers, hidden 384,
vocab 128100, relative attention), built from its config with random weights; the tokenizer is trained
offline on the evidence text. Nothing is downloaded. Evidence: paragraphs of the httpx docs (0.28.1);
each claim is a sentence from another paragraph, so no pair is decided lexically and every pair reaches
the model. Prints:
  1. end-to-end verify throughput vs a bare forward-pass loop over the same batches   (target >= 0.95)
  2. ONNX Runtime int8 vs torch fp32 scoring throughput                              (target >= 1.5x)
  3. model calls when re-verifying after 1% of the chunks change vs affected pairs   (target <= 1.1)
  4. pairs/s of one process with 2 torch threads vs 2 shards (processes) of 1 thread each, on 2 cores
  5. per fact-checker protocol (binary, seq2seq, causal-lm; random models of 6 layers, hidden 384): end-to-end
     verify against the bare forward loop, as [1]                                   (target >= 0.95)

    .venv/bin/python bench/bench_nli.py [--pairs 48] [--batch-size 16] [--repeats 2] [--recheck-chunks 200]
                                        [--end-to-end-only]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from citekeeper.identity import text_hash
from citekeeper.text import split_sentences
from tests.eval_data import HTTPX_DOCS
from tests.random_models import save_random_checker, save_random_nli_model
from tests.verify_helpers import (
    verify,
    write_outputs,
)
from verifiers.checkers.loading import load_scorer
from verifiers.verdict_cache import VerdictCache

DOCS = HTTPX_DOCS / "0.28.1"
CHECKER_SHAPES = {"roberta": "binary", "t5": "seq2seq", "qwen2": "causal-lm"}


def paragraphs(n: int) -> list[str]:
    found = []
    for path in sorted(DOCS.rglob("*.md")):
        for block in path.read_text(encoding="utf-8").split("\n\n"):
            block = " ".join(block.split())
            if 120 <= len(block) <= 700 and not block.startswith(("```", "|", "#")):
                found.append(block)
    if not found:
        raise SystemExit(f"no evidence paragraphs under {DOCS}")
    return [found[i % len(found)] + ("" if i < len(found) else f" (copy {i // len(found)})") for i in range(n)]


def frames(evidence: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Claim i cites chunk i; its text is the first sentence of another paragraph."""
    n = len(evidence)
    claim_texts = [split_sentences(evidence[(i + 7) % n])[0] for i in range(n)]
    ids = [f"c{i:05d}" for i in range(n)]
    claims = pl.DataFrame(
        {
            "answer_id": [f"a{i // 4:05d}" for i in range(n)],
            "revision": [1] * n,
            "claim_id": ids,
            "claim_index": [i % 4 for i in range(n)],
            "text": claim_texts,
            "text_hash": [text_hash(t) for t in claim_texts],
            "n_citations": [1] * n,
        },
        schema_overrides={"revision": pl.Int32, "claim_index": pl.Int32, "n_citations": pl.Int32},
    )
    citations = pl.DataFrame(
        {
            "answer_id": claims["answer_id"],
            "revision": claims["revision"],
            "claim_id": ids,
            "citation_id": [f"k{i:05d}" for i in range(n)],
            "citation_index": [0] * n,
            "chunk_id": [f"chunk{i:05d}" for i in range(n)],
            "evidence_chunk_id": [f"chunk{i:05d}" for i in range(n)],
            "doc_id": [f"doc{i // 10:04d}" for i in range(n)],
            "chunk_text": evidence,
            "chunk_start_char": [0] * n,
        },
        schema_overrides={"citation_index": pl.Int32},
    )
    return claims, citations


@dataclass(frozen=True)
class Pass:
    """One forward pass: input shape and dtype, torch intra/inter-op threads, minor page faults (process), seconds."""

    shape: str
    dtype: str
    threads: str
    faults: int
    seconds: float


class Recorder:
    """Wraps a scorer: keeps the exact (premise, hypothesis) list the engine sent to the model, the wall time
    spent in forward passes (so a run can be split into model time and everything else), and what each pass was
    given and cost (`passes`), so that the two loops' passes can be told apart when their times differ."""

    def __init__(self, scorer):
        self.inputs: tuple[list[str], list[str]] = ([], [])
        self.forward_s = 0.0
        self.passes: list[Pass] = []
        self._score, self._forward = scorer.score, scorer.forward
        scorer.score, scorer.forward = self.score, self.forward

    def score(self, premises, hypotheses):
        self.inputs = (list(premises), list(hypotheses))
        return self._score(premises, hypotheses)

    def forward(self, encoded):
        import torch

        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        started = time.perf_counter()
        logits = self._forward(encoded)
        seconds = time.perf_counter() - started
        self.forward_s += seconds
        ids = encoded["input_ids"]
        self.passes.append(
            Pass(
                "x".join(map(str, ids.shape)),
                str(ids.dtype),
                f"{torch.get_num_threads()}/{torch.get_num_interop_threads()}",
                resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults,
                seconds,
            )
        )
        return logits


def describe_passes(runs: list[list[Pass]]) -> str:
    """The passes of one loop over its repeats: the shapes, dtypes and threads seen, median faults and seconds."""
    passes = [p for run in runs for p in run]
    shapes = ",".join(dict.fromkeys(p.shape for p in runs[-1]))
    dtypes = ",".join(sorted({p.dtype for p in passes}))
    threads = ",".join(sorted({p.threads for p in passes}))
    faults = statistics.median(sum(p.faults for p in run) for run in runs)
    seconds = statistics.median(sum(p.seconds for p in run) for run in runs)
    return f"shapes {shapes} {dtypes}, threads {threads}, {faults:,.0f} page faults and {seconds:.2f}s a run"


def length_batches(scorer, premises: list[str], hypotheses: list[str]) -> list:
    """The batches of pair indices the scorer sends through the model, in its order."""
    order = scorer.length_order(premises, hypotheses)
    return [order[i : i + scorer.batch_size] for i in range(0, len(order), scorer.batch_size)]


def encode_batches(scorer, premises: list[str], hypotheses: list[str]) -> list[dict]:
    """The length-bucketed batches the engine builds, tokenised up front (outside any timing)."""
    return [
        scorer.encode([premises[i] for i in batch], [hypotheses[i] for i in batch])
        for batch in length_batches(scorer, premises, hypotheses)
    ]


def forward_all(scorer, encoded: list[dict]) -> None:
    for batch in encoded:
        scorer.forward(batch)


def timed(function, *args):
    """(wall seconds, process CPU seconds, value)."""
    started = time.perf_counter(), time.process_time()
    value = function(*args)
    return time.perf_counter() - started[0], time.process_time() - started[1], value


def end_to_end(scorer, recorder, claims, citations, work: Path, repeats: int):
    """Verify end to end and the bare forward passes over the same batches, `repeats` times in alternating order
    (the machine is shared: compared per repeat, wall clock and process CPU time; the forward passes are also timed
    inside each run). Returns the ratios per repeat, pairs scored, the last run's seconds, its batch count and the
    forward passes of each loop per repeat (verify's, the bare loop's)."""
    rows = []
    passes: tuple[list[list[Pass]], list[list[Pass]]] = ([], [])
    for repeat in range(repeats):
        cache = VerdictCache(work / f"cache{repeat}")  # empty: every pair is scored

        def verify_and_write(cache=cache, repeat=repeat):
            result = verify(claims, citations, "v1", scorer, cache=cache, run_id=f"r{repeat}")
            write_outputs(result, work / "out")
            cache.flush(f"r{repeat}")
            return result

        def bare_loop():
            encoded = encode_batches(scorer, *recorder.inputs)
            recorder.passes = []
            measured = timed(forward_all, scorer, encoded)
            passes[1].append(recorder.passes)
            return measured

        bare_first = repeat % 2 == 1  # ABBA: neither side always runs on the warmer process
        bare = bare_loop() if bare_first else None
        recorder.forward_s, recorder.passes = 0.0, []
        e2e = timed(verify_and_write)
        inside = recorder.forward_s
        passes[0].append(recorder.passes)
        bare = bare or bare_loop()
        rows.append((e2e, bare, inside))
    wall = [bare[0] / e2e[0] for e2e, bare, _ in rows]
    cpu = [bare[1] / e2e[1] for e2e, bare, _ in rows]
    in_run = [inside / e2e[0] for e2e, _, inside in rows]
    n_batches = len(length_batches(scorer, *recorder.inputs))
    return wall, cpu, in_run, rows[-1][0][2].stats["model_calls"], rows[-1][0][0], n_batches, passes


def _fmt(values: list[float]) -> str:
    return "/".join(f"{v:.2f}" for v in values)


def main() -> None:
    warnings.filterwarnings("ignore")  # the ONNX exporter's tracer warnings about DeBERTa internals
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--recheck-chunks", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--end-to-end-only", action="store_true", help="run [1] alone")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-nli-"))
    evidence = paragraphs(args.pairs)
    started = time.perf_counter()
    model_dir = save_random_nli_model(work / "model", evidence, architecture="deberta-v3-xsmall")
    scorer = load_scorer(str(model_dir), batch_size=args.batch_size)
    n_params = sum(p.numel() for p in scorer.model.parameters())
    print(
        f"model: DeBERTa-v3-xsmall architecture, random weights, {n_params / 1e6:.1f}M parameters, "
        f"max {scorer.max_tokens} tokens; built in {time.perf_counter() - started:.1f}s"
    )
    claims, citations = frames(evidence)
    recorder = Recorder(scorer)
    scorer.score(evidence[:2], evidence[2:4])  # warm-up

    # 1. end-to-end (resolve, lexical tier, windows, cache lookups, batching, scoring, aggregation, Parquet)
    #    against forward passes alone over the same batches.
    wall, cpu, in_run, n_scored, seconds, n_batches, passes = end_to_end(
        scorer, recorder, claims, citations, work / "nli", args.repeats
    )
    premises, hypotheses = recorder.inputs
    print(
        f"[1] end-to-end verify vs bare forward loop over the same {n_batches} batches ({n_scored} pairs, "
        f"{n_scored / seconds:.2f} pairs/s end to end), throughput ratio per repeat: wall {_fmt(wall)}, CPU time "
        f"{_fmt(cpu)}; forward time inside each verify run / run time {_fmt(in_run)}; median CPU-time ratio "
        f"{statistics.median(cpu):.2f}, wall {statistics.median(wall):.2f} (target >= 0.95)"
    )
    # Why the two differ, when they do: what the passes were given and cost in each loop (issue #34: the same
    # shapes, dtype and threads, but each loop's passes page-faulted a different amount until the scorer kept
    # freed memory: verifiers.checkers.backends.keep_freed_memory).
    print(f"    forward passes inside verify: {describe_passes(passes[0])}")
    print(f"    forward passes of the bare loop: {describe_passes(passes[1])}")
    if args.end_to_end_only:
        return

    # 2. ONNX int8 vs torch fp32 on the same pairs, both including tokenisation
    export_s, _, onnx = timed(load_scorer, str(model_dir), "onnx", work / "onnx", args.batch_size)
    onnx.score(evidence[:2], evidence[2:4])  # warm-up
    torch_s, _, torch_probs = timed(recorder.score, premises, hypotheses)
    onnx_s, _, onnx_probs = timed(onnx.score, premises, hypotheses)
    agree = float((torch_probs.argmax(1) == onnx_probs.argmax(1)).mean())
    print(
        f"[2] torch fp32 {n_scored / torch_s:.2f} pairs/s, ONNX int8 {n_scored / onnx_s:.2f} pairs/s: "
        f"speed-up {torch_s / onnx_s:.2f}x (target >= 1.5x); export+quantise {export_s:.1f}s (cached on disk); "
        f"max |dp| {abs(torch_probs - onnx_probs).max():.3f}, argmax agreement {agree:.2f}"
    )

    # 3. re-verify after 1% of the chunks change (ONNX backend, to keep the first full run short)
    evidence = paragraphs(args.recheck_chunks)
    claims, citations = frames(evidence)
    cache = VerdictCache(work / "recheck-cache")
    first = verify(claims, citations, "v1", onnx, cache=cache, run_id="first")
    cache.flush("first")
    changed = list(range(0, len(evidence), 100))  # 1%
    edited = list(evidence)
    for i in changed:
        edited[i] = edited[i].replace(" the ", " this ", 1) + " This paragraph was revised."
    affected = len({(claims["text"][i], edited[i]) for i in changed})  # each claim is one sentence citing chunk i
    recheck = verify(
        claims, citations.with_columns(pl.Series("chunk_text", edited)), "v2", onnx, cache=cache, run_id="recheck"
    )
    calls = recheck.stats["model_calls"]
    print(
        f"[3] 1% corpus change ({len(changed)} of {len(evidence)} chunks; first run {first.stats['model_calls']} "
        f"model calls): re-verification made {calls} model calls for {affected} affected pairs, "
        f"{recheck.stats['cache_hits']} cache hits; ratio {calls / affected:.2f} (target <= 1.1)"
    )

    # 4. the same pairs: one process with 2 intra-op threads against 2 shards of 1 thread each
    one = in_processes(str(model_dir), premises, hypotheses, args.batch_size, n_shards=1, threads=2)
    two = in_processes(str(model_dir), premises, hypotheses, args.batch_size, n_shards=2, threads=1)
    print(
        f"[4] {len(premises)} pairs on 2 cores: 1 process x 2 threads {len(premises) / one:.2f} pairs/s, "
        f"2 shards x 1 thread {len(premises) / two:.2f} pairs/s -> {'shards' if two < one else 'threads'} "
        f"faster ({max(one, two) / min(one, two):.2f}x)"
    )

    # 5. each fact-checker protocol (verifiers.checkers), the same end-to-end comparison as [1]
    evidence = paragraphs(args.pairs)
    claims, citations = frames(evidence)
    for shape, protocol in CHECKER_SHAPES.items():
        checker_dir = save_random_checker(work / shape, evidence, shape, max_positions=512, size="bench")
        checker = load_scorer(str(checker_dir), batch_size=args.batch_size)
        n_params = sum(p.numel() for p in checker.model.parameters())
        recorder = Recorder(checker)
        checker.score(evidence[:2], evidence[2:4])  # warm-up
        wall, cpu, in_run, n_scored, seconds, _, _ = end_to_end(
            checker, recorder, claims, citations, work / shape, args.repeats
        )
        print(
            f"[5] {protocol} ({shape}, {n_params / 1e6:.1f}M parameters, random weights): {n_scored} pairs, "
            f"{n_scored / seconds:.2f} pairs/s end to end; end-to-end / bare forward per repeat: wall {_fmt(wall)}, "
            f"CPU time {_fmt(cpu)}; median wall {statistics.median(wall):.2f} (target >= 0.95)"
        )


def _shard_worker(model_dir, premises, hypotheses, batch_size, threads, barrier, seconds) -> None:
    scorer = load_scorer(model_dir, batch_size=batch_size, device="cpu", threads=threads)
    scorer.score(premises[:2], hypotheses[:2])  # warm-up, outside the timing
    barrier.wait()
    started = time.perf_counter()
    scorer.score(premises, hypotheses)
    seconds.put(time.perf_counter() - started)


def in_processes(model_dir: str, premises, hypotheses, batch_size: int, n_shards: int, threads: int) -> float:
    """Wall seconds for `n_shards` processes of `threads` torch threads each to score their share of the pairs
    (every i-th pair), all started together after loading the model."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    barrier, seconds = context.Barrier(n_shards), context.Queue()
    workers = [
        context.Process(
            target=_shard_worker,
            args=(model_dir, premises[i::n_shards], hypotheses[i::n_shards], batch_size, threads, barrier, seconds),
        )
        for i in range(n_shards)
    ]
    for worker in workers:
        worker.start()
    times = [seconds.get() for _ in workers]
    for worker in workers:
        worker.join()
    return max(times)


if __name__ == "__main__":
    main()
