"""A library's answer for checking every timed call where the task's own reference is slow.

The attention references build the whole score matrix in float32: checking each of 50 timed calls of
the backward's headline workload against it took the timing stage on the H200 from 3.2 s to 13.0-15.8 s
warm (21.2 s cold), about 0.25 s a check by that growth (benchmarks/results/
2026-12-04_integrity_costs_bwd_696ce2d_h200.log). torch's
flash-attention kernels answer within a share of the tolerance in milliseconds. They stand in only under
two conditions the judge keeps (judge.py):
- trust is earned per candidate: on every correctness trial, judged against the task's reference, the
  library's outputs must lie within half the task's tolerance of that reference, or it is not used;
- a timed call passes against the library only within the other half; anything else is judged against
  the task's reference in full, so the library can never fail a call, only pass one sooner.

Attention forward (`Q, K, V -> O, LSE`) and backward (`Q, K, V, O, dO, LSE -> dQ, dK, dV`) in the
[B, H, S, D] layout, bf16 or fp16, on a GPU; anything else has none.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from workbench.evaluate.gpu.correctness import passes_quickly

FORWARD = (("Q", "K", "V"), ("O", "LSE"))
BACKWARD = (("Q", "K", "V", "O", "dO", "LSE"), ("dQ", "dK", "dV"))
HALF_PRECISION = (torch.bfloat16, torch.float16)


def _shape(definition: dict) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(definition["inputs"]), tuple(definition["outputs"])


def has_fast_reference(spec: dict, device: str) -> bool:
    """Whether this task, on this device, has a library answer (the names and layout checked)."""
    definition = spec["definition"]
    wanted = {"attention_forward": FORWARD, "attention_backward": BACKWARD}.get(str(spec.get("family")))
    if device == "cpu" or wanted is None or _shape(definition) != wanted:
        return False
    return all(
        definition["inputs"][name]["shape"] == ["B", "H", "S", "D"]
        and definition["inputs"][name]["dtype"] in ("bfloat16", "float16")
        for name in ("Q", "K", "V")
    )


def fast_reference(spec: dict, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """The outputs in definition order, from torch's flash-attention kernels (scale 1/sqrt(D))."""
    q, k, v = inputs["Q"], inputs["K"], inputs["V"]
    if q.dtype not in HALF_PRECISION:
        raise ValueError(f"flash attention takes bf16 or fp16, not {q.dtype}")
    causal = bool(spec.get("causal"))
    scale = 1.0 / math.sqrt(q.shape[-1])
    # Forward: (out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed, philox_offset, mask).
    forward = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=scale)
    if spec.get("family") == "attention_forward":
        return [forward[0], forward[1]]
    # The backward on the O and LSE the call was given, as the task's reference uses them.
    grads = torch.ops.aten._scaled_dot_product_flash_attention_backward(
        inputs["dO"], q, k, v, inputs["O"], inputs["LSE"], *forward[2:6], 0.0, causal, *forward[6:8],
        scale=scale,
    )  # fmt: skip
    return list(grads)


def within_half(
    actual: Sequence[torch.Tensor],
    answers: Sequence[torch.Tensor],
    tolerances: Sequence[tuple[float, float]],
    ratio: float = 1.0,
    bound: float | None = None,
) -> bool:
    """Whether every output lies within half its (atol, rtol) of the answer: half for each link, so that a
    call within half of a library answer that is itself within half of the task's reference is within the
    task's tolerance of the reference (and an element allowed outside, within half of `bound` times it)."""
    return all(
        passes_quickly(a, b.to(a.dtype), atol / 2, rtol / 2, ratio, bound)
        for a, b, (atol, rtol) in zip(actual, answers, tolerances, strict=True)
    )
