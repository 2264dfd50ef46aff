"""A CPU model of the Blackwell FP8 attention reference's numerics (fp8_mha_fwd_d128[_causal]_tcgen05.cu):
exact fp32 products, P stored as e4m3 of 256 p, O divided by the sum of the quantised P it multiplied, LSE
from the exact sum; the tensor core's own accumulation is not modelled. Judged with the task's own rule
(compare_output, its tolerances and matched ratio) against the task's reference at the smallest workload's
L, on B x H = 1 x 4 heads, three seeds.

    python references/fp8_attention/fa3_scheme_model.py
"""

import math

import torch

from workbench.evaluate.gpu.correctness import compare_output, output_tolerance
from workbench.evaluate.gpu.inputs import compile_reference, make_inputs, run_reference
from workbench.evaluate.gpu_spec import gpu_spec
from workbench.tasks import Catalogue, get_target


def modelled(
    spec: dict, q8: torch.Tensor, k8: torch.Tensor, v8: torch.Tensor, dq, dk, dv
) -> list[torch.Tensor]:
    q, k, v = q8.float(), k8.float(), v8.float()
    seq = q.shape[2]
    t = (q @ k.transpose(-1, -2)) * (math.log2(math.e) / math.sqrt(q.shape[-1]) * float(dq) * float(dk))
    if spec["causal"]:
        t = t.masked_fill(torch.ones(seq, seq, dtype=torch.bool).triu(1), float("-inf"))
    m = t.amax(-1, keepdim=True)
    p = torch.exp2(t - m)
    stored = (p * 256).to(torch.float8_e4m3fn).float()  # what the P V product multiplies
    o = (stored @ v) * float(dv) / stored.sum(-1, keepdim=True)
    lse = (m.squeeze(-1) + torch.log2(p.sum(-1))) * math.log(2)
    return [o.clamp(-448, 448).to(torch.float8_e4m3fn), lse]


def main() -> None:
    catalogue = Catalogue.load()
    for name in ("fp8_mha_with_lse_d128", "fp8_mha_with_lse_d128_causal"):
        task = catalogue.get(name)
        spec = gpu_spec(task, task.smallest_workload(), get_target("hopper"), catalogue)
        spec["axes"] = {**spec["axes"], "B": 1, "H": 4}
        reference = compile_reference(spec["definition"]["reference"])
        ratio = float(spec.get("matched_ratio", 1.0))
        for seed in (1, 2, 3):
            inputs = make_inputs(spec, seed, "cpu")
            expected = run_reference(reference, spec["definition"], spec["axes"], inputs)
            for out, got, want in zip(
                spec["definition"]["outputs"], modelled(spec, *inputs), expected, strict=True
            ):
                atol, rtol = output_tolerance(spec, out)
                status, check = compare_output(out, got, want, atol, rtol, ratio)
                print(f"{name} L={spec['axes']['L']} seed {seed} {out}: {status}, {check['matched_ratio']:.5f} inside "
                      f"(atol {atol}, rtol {rtol}, {ratio} needed)")  # fmt: skip


if __name__ == "__main__":
    main()
