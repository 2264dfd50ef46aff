"""On a GPU: torch's flash-attention kernels, which may answer for the task's reference when every timed
call of an attention task is checked (fast_reference.py), lie within half the task's tolerance of that
reference at every workload of the bf16 attention tasks; a call half a tolerance off them is judged in full.

Run on the GPU host from the checkout: `python -m pytest -m gpu -n 0 -s tests/gpu/test_fast_reference_gpu.py`.
"""

from __future__ import annotations

import pytest
import torch

from workbench.evaluate.gpu.correctness import passes_quickly
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
        tolerances = [
            (
                float((spec["output_tolerances"].get(out) or {}).get("atol", spec["atol"])),
                float((spec["output_tolerances"].get(out) or {}).get("rtol", spec["rtol"])),
            )
            for out in spec["definition"]["outputs"]
        ]
        dtypes = [DTYPES[t["dtype"]] for t in spec["definition"]["outputs"].values()]
        shares = []
        for f, want, (atol, rtol) in zip(fast, expected, tolerances, strict=True):
            error = (f.float() - want.float()).abs()
            limit = torch.maximum(torch.full_like(error, atol), rtol * want.float().abs())
            shares.append(round(float((error / limit).max()), 3))
        print(f"{name} {spec['axes']}: library error, worst share of the tolerance per output {shares}")
        assert within_half([f.to(d) for f, d in zip(fast, dtypes, strict=True)], expected, tolerances)
        # A call half a tolerance off the library's answer is not passed quickly against it.
        atol, rtol = tolerances[0]
        off = fast[0].float() + torch.maximum(
            torch.full_like(fast[0].float(), atol), rtol * fast[0].float().abs()
        )
        assert not passes_quickly(off.to(fast[0].dtype), fast[0], atol / 2, rtol / 2)
