"""On a GPU: how far torch's flash-attention kernels lie from each bf16 attention task's reference, per
workload (printed as the worst element's share of the tolerance). Where they lie within half of it, the
judge may check timed calls against them (fast_reference.py), and a call within the other half of them is
within the task's tolerance of the reference; a call half a tolerance off them is judged in full. At
4d54247 on the H200 the non-causal forward was within half at every workload (0.10-0.20); causal
outputs and the backward's dQ/dK/dV at S=512 were not (0.75-0.98): those are judged in full. At
38e5a3e, at every workload, the causal backward reached 1.04-1.50x the tolerance on a few elements; the
test now also asserts that the library passes each task's own rule (the causal backward's matched ratio
and outlier bound are there for that).

Run on the GPU host from the checkout: `python -m pytest -m gpu -n 0 -s tests/gpu/test_fast_reference_gpu.py`.
"""

from __future__ import annotations

import pytest
import torch

from workbench.evaluate.gpu.correctness import compare_output, output_tolerance, passes_quickly
from workbench.evaluate.gpu.fast_reference import fast_reference, has_fast_reference, within_half
from workbench.evaluate.gpu.inputs import DTYPES, compile_reference, make_inputs, run_reference
from workbench.evaluate.gpu_spec import gpu_spec
from workbench.tasks import Catalogue, get_target

pytestmark = pytest.mark.gpu

TASKS = [
    "mha_with_lse_d64", "mha_with_lse_d128", "mha_with_lse_d128_causal", "mha_with_lse_d256_causal",
    "mha_bwd_d64_causal", "mha_bwd_d96", "mha_bwd_d128", "mha_bwd_d128_causal",
]  # fmt: skip


@pytest.mark.parametrize("name", TASKS)
def test_the_library_answer_is_within_half_the_tolerance_of_the_reference(name: str) -> None:
    catalogue = Catalogue.load()
    task = catalogue.get(name)
    for workload in task.workloads:
        spec = gpu_spec(task, workload, get_target("hopper"), catalogue)
        assert has_fast_reference(spec, "cuda")
        values = make_inputs(spec, int(spec["seed"]), "cuda")
        arguments = dict(zip(spec["definition"]["inputs"], values, strict=True))
        with torch.no_grad():
            expected = run_reference(
                compile_reference(spec["definition"]["reference"]), spec["definition"], spec["axes"], values
            )
            fast = fast_reference(spec, arguments)
        tolerances = [output_tolerance(spec, out) for out in spec["definition"]["outputs"]]
        dtypes = [DTYPES[t["dtype"]] for t in spec["definition"]["outputs"].values()]
        shares = []
        for f, want, (atol, rtol) in zip(fast, expected, tolerances, strict=True):
            error = (f.float() - want.float()).abs()
            limit = torch.maximum(torch.full_like(error, atol), rtol * want.float().abs())
            shares.append(round(float((error / limit).max()), 3))
        print(f"{name} {spec['axes']}: library error, worst share of the tolerance per output {shares}")
        library = [f.to(d) for f, d in zip(fast, dtypes, strict=True)]
        # The library itself passes each task's rule: the causal backward's few elements outside 1e-2
        # (up to 1.5x at 38e5a3e) are what its matched ratio and outlier bound let through.
        rule = (spec["matched_ratio"], spec["outlier_bound"])
        for out, lib, want, (atol, rtol) in zip(
            spec["definition"]["outputs"], library, expected, tolerances, strict=True
        ):
            status, check = compare_output(out, lib, want.to(lib.dtype), atol, rtol, *rule)
            assert status == "passed", (out, check.get("reason"))
        if within_half(library, expected, tolerances):
            # The chain the judge relies on: a call as far from the library as the quick check allows.
            call = [  # in float32: the chain is arithmetic, bf16's rounding of the call aside
                f.float() + 0.49 * torch.maximum(torch.full_like(f.float(), a), r * f.float().abs())
                for f, (a, r) in zip(library, tolerances, strict=True)
            ]
            assert within_half(call, library, tolerances)
            doubled = [(2 * a, 2 * r) for a, r in tolerances]
            assert within_half(call, expected, doubled)  # within the task's full tolerance
        else:
            # Only the non-causal forward was measured within half everywhere: a change there is news.
            assert spec["family"] != "attention_forward" or spec["causal"], shares
        # A call half a tolerance off the library's answer is not passed quickly against it.
        atol, rtol = tolerances[0]
        off = fast[0].float() + torch.maximum(
            torch.full_like(fast[0].float(), atol), rtol * fast[0].float().abs()
        )
        assert not passes_quickly(off.to(fast[0].dtype), fast[0], atol / 2, rtol / 2)
