"""Probe: how far apart honest FP8 attention kernels land from the fp8_mha_with_lse tasks' exact fp32
reference, under the tasks' element rule (outside when |d| > atol and |d| / |y| > rtol), for a range of
tolerances. Runs on the CPU (seeded: the same numbers every run).

Each scheme is an emulation in torch with exact fp32 sums, so it shows the least error such a kernel can
have (QGMMA's truncated sums only add to it). Every scheme quantizes P to e4m3 for P V, as FP8 attention
does (FlashAttention-3, cuDNN's FP8 SDPA):
- `p_as_is`: P = exp(S - rowmax) quantized as it is, O = P V / l with l from the unquantized P;
- `p_448`: P scaled by 448 (e4m3's largest value) before the quantization;
- `running_448`: per block of 128 keys under a running row max, P scaled by 448, the FA3 loop.
Printed per head dim, sequence length, mask and seed: the largest share of O outside over the schemes,
at each tolerance.

`python benchmarks/fp8_attention_tolerance_probe.py`
"""

from __future__ import annotations

import json
import math

import torch

from workbench.evaluate.gpu.correctness import compare_output
from workbench.evaluate.gpu.inputs import input_generator
from workbench.tasks import resolve_task

FP8_MAX = 448.0
BLOCK = 128
TOLERANCES = (0.01, 0.0625, 0.1)


def e4m3(o: torch.Tensor) -> torch.Tensor:
    return o.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)


def quantized(p: torch.Tensor, scale: float) -> torch.Tensor:
    return (p * scale).to(torch.float8_e4m3fn).float() / scale


def schemes(s: torch.Tensor, v: torch.Tensor) -> dict[str, torch.Tensor]:
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    l = p.sum(-1, keepdim=True)
    out = {
        "p_as_is": e4m3(quantized(p, 1.0) @ v / l),
        "p_448": e4m3(quantized(p, FP8_MAX) @ v / l),
    }
    acc = torch.zeros(*s.shape[:-1], v.shape[-1])
    total = torch.zeros(*s.shape[:-1], 1)
    running = torch.full((*s.shape[:-1], 1), -math.inf)
    for start in range(0, s.shape[-1], BLOCK):
        block = s[..., start : start + BLOCK]
        new = torch.maximum(running, block.amax(-1, keepdim=True))
        rescale = torch.nan_to_num(torch.exp(running - new))  # a fully masked row so far: nothing to keep
        pj = torch.nan_to_num(torch.exp(block - new))
        acc = acc * rescale + quantized(pj, FP8_MAX) @ v[..., start : start + BLOCK, :]
        total = total * rescale + pj.sum(-1, keepdim=True)
        running = new
    out["running_448"] = e4m3(acc / total)
    return out


def main() -> int:
    for head_dim in (64, 128, 256):
        definition = resolve_task(f"fp8_mha_with_lse_d{head_dim}").definition
        generate = input_generator(definition.reference)
        assert generate is not None
        for seq in (512, 2048, 4096):
            for causal in (False, True):
                for seed in range(2):
                    axes = {"B": 1, "H": 2, "D": head_dim, "L": seq, "one": 1}
                    inputs = generate(axes, torch.Generator().manual_seed(77 + seed), "cpu")
                    q, k, v = (inputs[name][0].float() for name in ("Q", "K", "V"))
                    dq, dk, dv = (float(inputs[name]) for name in ("descale_q", "descale_k", "descale_v"))
                    s = (q * dq) @ (k * dk).transpose(-1, -2) / math.sqrt(head_dim)
                    if causal:
                        s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), -math.inf)
                    exact = e4m3(torch.softmax(s, -1) @ (v * dv))
                    found = schemes(s, v * dv)
                    worst = {
                        str(tol): round(
                            max(
                                1 - compare_output("O", o, exact, tol, tol)[1]["matched_ratio"]
                                for o in found.values()
                            ),
                            4,
                        )
                        for tol in TOLERANCES
                    }
                    row = {"D": head_dim, "L": seq, "causal": causal, "seed": seed, "worst_outside": worst}
                    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
