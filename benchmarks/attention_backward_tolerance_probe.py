"""Probe: how far an honest tensor-core attention backward lands from the mha_bwd tasks' exact fp32
reference, under the tasks' element rule (outside when |d| > atol and |d| / |y| > rtol). Runs on the CPU
with each workload's own inputs (its public seed; B and H as the workload has them, one head at a time).

The model is what any backward on bf16 tensor cores must do, with exact fp32 sums, so it shows the least
error such a kernel can have: P = exp(S - LSE) rounded to bf16 for dV = P^T dO, and dS = P (dP - delta)
rounded to bf16 for dQ = dS K and dK = dS^T Q (FlashAttention-2/3's products). Printed per task and
workload: each output's worst element as a share of its tolerance and how many elements lie outside.

`python benchmarks/attention_backward_tolerance_probe.py [task ...]` (default: the six mha_bwd tasks);
`--seeds N --length S` draws N more inputs at sequence length S only (seeds 7919, 2 * 7919, ...), for the
tail of the counts and shares.
"""

from __future__ import annotations

import argparse
import json
import math

import torch

from workbench.evaluate.gpu.correctness import output_tolerance
from workbench.evaluate.gpu.inputs import make_inputs
from workbench.evaluate.gpu_spec import gpu_spec
from workbench.tasks import Catalogue, get_target

TASKS = [f"mha_bwd_d{d}{mask}" for d in (64, 96, 128) for mask in ("", "_causal")]


def _bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).float()


def backward(inputs: list[torch.Tensor], causal: bool, tensor_cores: bool) -> list[torch.Tensor]:
    """dQ, dK, dV in fp32 for one head: exactly the task's reference (tensor_cores=False), or with P and
    dS rounded to bf16 before their products (tensor_cores=True)."""
    q, k, v, o, do = (t.float() for t in inputs[:5])
    lse = inputs[5]
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-1, -2) * scale
    if causal:
        seq = scores.shape[-1]
        scores = scores.masked_fill(~torch.ones(seq, seq, dtype=torch.bool).tril(), float("-inf"))
    probs = torch.exp(scores - lse.unsqueeze(-1))
    dv = (_bf16(probs) if tensor_cores else probs).transpose(-1, -2) @ do
    dscores = probs * (do @ v.transpose(-1, -2) - (do * o).sum(-1, keepdim=True))
    if tensor_cores:
        dscores = _bf16(dscores)
    return [dscores @ k * scale, dscores.transpose(-1, -2) @ q * scale, dv]


def probe(catalogue: Catalogue, name: str, seeds: int, length: int | None) -> None:
    task = catalogue.get(name)
    for workload in task.workloads:
        if length is not None and workload.axes["S"] != length:
            continue
        spec = gpu_spec(task, workload, get_target("hopper"), catalogue)
        for seed in [7919 * n for n in range(1, seeds + 1)] if seeds else [int(spec["seed"])]:
            _probe_inputs(spec, name, seed)


def _probe_inputs(spec: dict, name: str, seed: int) -> None:
    values = make_inputs(spec, seed, "cpu")
    tolerances = [output_tolerance(spec, out) for out in spec["definition"]["outputs"]]
    worst, outside = [0.0] * 3, [0] * 3
    batch, heads = values[0].shape[:2]
    for b in range(batch):
        for h in range(heads):
            head = [t[b, h] for t in values]
            exact = backward(head, bool(spec["causal"]), tensor_cores=False)
            model = backward(head, bool(spec["causal"]), tensor_cores=True)
            for i, (got, want, (atol, rtol)) in enumerate(zip(model, exact, tolerances, strict=True)):
                want = _bf16(want)  # the reference's outputs are bf16, like a kernel's
                limit = torch.maximum(torch.full_like(want, atol), rtol * want.abs())
                share = (_bf16(got) - want).abs() / limit
                worst[i] = max(worst[i], float(share.max()))
                outside[i] += int((share > 1).sum())
    row = {
        "task": name,
        "S": spec["axes"]["S"],
        "seed": seed,
        "elements": values[0].numel(),
        "worst_share": dict(zip(("dQ", "dK", "dV"), (round(w, 3) for w in worst), strict=True)),
        "outside": dict(zip(("dQ", "dK", "dV"), outside, strict=True)),
    }
    print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("tasks", nargs="*", default=TASKS)
    parser.add_argument("--seeds", type=int, default=0, help="draw this many more inputs per workload")
    parser.add_argument("--length", type=int, help="only the workloads of this sequence length")
    args = parser.parse_args()
    catalogue = Catalogue.load()
    for name in args.tasks:
        probe(catalogue, name, args.seeds, args.length)


if __name__ == "__main__":
    main()
