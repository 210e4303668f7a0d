"""A CPU torch scorer's forward passes reuse the memory of the one before (issue #34): without it glibc maps each
large intermediate tensor fresh from the kernel and every pass page-faults it anew."""

from __future__ import annotations

import resource

from tests.random_models import save_random_nli_model
from verifiers.checkers.loading import load_scorer

TEXTS = [f"The client reads response number {i} from the connection pool and closes it." for i in range(40)]


def minor_faults(function, *args) -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    function(*args)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_a_cpu_forward_pass_reuses_the_memory_of_the_pass_before(tmp_path):
    scorer = load_scorer(str(save_random_nli_model(tmp_path / "model", TEXTS)), device="cpu", batch_size=1024)
    # 1024 pairs of 128 tokens: the feed-forward's (1024, 128, 64) fp32 tensors are 32 MiB, above any threshold
    # at which glibc would otherwise keep freed blocks in its heap.
    encoded = scorer.encode([" ".join(TEXTS)] * 1024, TEXTS * 25 + TEXTS[:24])
    assert encoded["input_ids"].shape == (1024, 128)
    scorer.forward(encoded)  # the heap grows to the pass's working set
    faults = [minor_faults(scorer.forward, encoded) for _ in range(3)]
    # Without: ~45,000 faults a pass (each 32 MiB tensor mapped and zeroed anew); the heap may still grow once.
    assert min(faults) < 1000, faults
