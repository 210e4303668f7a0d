"""GPU check of the NLI tier: end-to-end verification throughput against a bare forward loop on the same device, per
architecture and precision, and the largest batch that fits. Random weights in the real shapes of DeBERTa-v3
xsmall (the default model's) and base; a tokenizer trained offline; nothing is downloaded.

Per (architecture, precision) it prints:
  pairs/s end to end  the engine (verifiers.engine.verify_tables) over claims citing httpx-docs paragraphs
                      (every pair reaches the model: no claim is decided lexically), tokenisation and
                      aggregation included
  pairs/s bare        the scorer's forward passes alone over the same batches, tokenised beforehand
  ratio               end to end / bare
  largest batch       the batch size doubled from 64 until the device runs out of memory (or --max-batch)

On a GPU machine:    python bench/gpu_check.py                 (cuda, bf16 and fp32, both architectures)
On the CPU (CI):     python bench/gpu_check.py --device cpu --pairs 8 --architectures deberta-v3-xsmall \
                         --precisions fp32 --max-batch 8 --checkers roberta:tiny t5:tiny qwen2:tiny
The fact-checker protocols (--checkers) run in MiniCheck-RoBERTa-Large's, MiniCheck-Flan-T5-Large's and Qwen2-0.5B's
shapes (Bespoke-MiniCheck-7B is a Qwen2-7B) with the same measures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_nli import encode_batches, frames, paragraphs
from tests.random_models import DEBERTA_V3, save_random_checker, save_random_nli_model
from tests.verify_helpers import verify
from verifiers.checkers.loading import load_scorer
from verifiers.devices import is_out_of_memory

# The fact-checker protocols in their published shapes (random weights): binary, seq2seq, causal-lm.
CHECKERS = {"roberta:roberta-large": "binary", "t5:flan-t5-large": "seq2seq", "qwen2:qwen2-0.5b": "causal-lm"}


def pairs_per_second(scorer, claims, citations) -> tuple[float, float]:
    """(end to end, bare forward loop) pairs/s on the same pairs and batches."""
    seen = {}
    score = scorer.score

    def recording(premises, hypotheses):
        seen["pairs"] = (list(premises), list(hypotheses))
        return score(premises, hypotheses)

    scorer.score = recording
    started = time.perf_counter()
    result = verify(claims, citations, "v1", scorer)
    end_to_end = result.stats["model_calls"] / (time.perf_counter() - started)
    scorer.score = score
    encoded = encode_batches(scorer, *seen["pairs"])
    _synchronise(scorer)
    started = time.perf_counter()
    for batch in encoded:
        scorer.forward(batch)
    _synchronise(scorer)
    return end_to_end, len(seen["pairs"][0]) / (time.perf_counter() - started)


def largest_batch(scorer, premises: list[str], hypotheses: list[str], limit: int) -> str:
    """The largest power-of-two batch (from 64, or `limit` if smaller) of the longest pairs that runs."""
    size, fits = min(64, limit), None
    long_premises = [max(premises, key=len)] * limit
    long_hypotheses = [max(hypotheses, key=len)] * limit
    while size <= limit:
        try:
            scorer.forward(scorer.encode(long_premises[:size], long_hypotheses[:size]))
            _synchronise(scorer)
        except Exception as error:
            if not is_out_of_memory(error):
                raise
            scorer.release_memory()
            return f"{fits} (out of memory at {size})"
        fits, size = size, size * 2
    return f"{fits} (--max-batch {limit} reached)"


def _synchronise(scorer) -> None:
    if scorer.placement.is_cuda:
        import torch

        torch.cuda.synchronize(scorer.placement.device)


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    parser.add_argument("--architectures", nargs="+", default=list(DEBERTA_V3), choices=list(DEBERTA_V3))
    parser.add_argument("--precisions", nargs="+", default=["bf16", "fp32"], choices=["bf16", "fp16", "fp32"])
    parser.add_argument("--pairs", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=None, help="default: the device's starting size")
    parser.add_argument("--max-batch", type=int, default=8192)
    parser.add_argument(
        "--checkers",
        nargs="*",
        default=list(CHECKERS),
        metavar="SHAPE:SIZE",
        help="fact-checker shapes (tests.random_models.save_random_checker), e.g. roberta:roberta-large",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    evidence = paragraphs(args.pairs)
    claims, citations = frames(evidence)
    for architecture in args.architectures:
        model_dir = save_random_nli_model(work / architecture, evidence, architecture=architecture)
        report(model_dir, lambda scorer, name=architecture: f"{name:<18}", args, evidence, claims, citations)
    for spec in args.checkers:
        shape, size = spec.split(":")
        model_dir = save_random_checker(work / spec.replace(":", "-"), evidence, shape, max_positions=2048, size=size)
        report(
            model_dir, lambda scorer, spec=spec: f"{spec:<18} {scorer.checker:<9}", args, evidence, claims, citations
        )


def report(model_dir: Path, label, args, evidence: list[str], claims, citations) -> None:
    """One line per precision for the model in `model_dir`, starting with `label(scorer)`."""
    for precision in args.precisions:
        scorer = load_scorer(str(model_dir), device=args.device, precision=precision, batch_size=args.batch_size)
        scorer.score(evidence[:2], evidence[2:4])  # warm-up: kernels, allocator
        end_to_end, bare = pairs_per_second(scorer, claims, citations)
        fits = largest_batch(scorer, evidence, claims["text"].to_list(), args.max_batch)
        print(
            f"{label(scorer)} {scorer.placement.device:<7} {scorer.precision:<5} batch {scorer.batch_size:>4}: "
            f"end to end {end_to_end:9.1f} pairs/s, bare forward {bare:9.1f} pairs/s, ratio "
            f"{end_to_end / bare:.2f}; largest batch {fits}",
            flush=True,
        )
        del scorer


if __name__ == "__main__":
    main()
