"""On a Hopper GPU with flash-linear-attention (`fla-core` and `einops`, carried in `.whl`): its fused
recurrent gated delta rule, called as the GDN tasks' baseline, answers every GDN task at every workload
by the task's own rule against the task's reference, and its outputs are zeroed once timed.

Run on the GPU host from the checkout: `python -m pytest -m gpu -n 0 -s tests/gpu/test_fla_baseline_gpu.py`.
"""

from __future__ import annotations

import pytest
import torch

from workbench.evaluate.gpu.baselines import FLA_VERSION, make_baselines
from workbench.evaluate.gpu.correctness import compare_output, output_tolerance
from workbench.evaluate.gpu.inputs import compile_reference, fill_inputs, run_reference, scalar_inputs
from workbench.evaluate.gpu_spec import gpu_spec
from workbench.tasks import Catalogue, get_target

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(
    "task_name",
    ["gdn_decode_qk4_v8_d128_k_last", "gdn_decode_qk8_v16_d128_k_last", "gdn_mtp_qk4_v8_d128_k_last"],
)
def test_the_fla_baseline_answers_each_gdn_workload_by_the_tasks_rule(task_name: str) -> None:
    catalogue = Catalogue.load()
    task = catalogue.get(task_name)
    reference = compile_reference(task.definition.reference)
    for workload in task.workloads:
        spec = gpu_spec(task, workload, get_target("hopper"), catalogue)
        (baseline,), notes = make_baselines(spec, device="cuda")
        assert notes == [], notes
        assert baseline.name.startswith(f"flash-linear-attention {FLA_VERSION}")
        fill_inputs(spec, baseline.inputs, seed=11)
        before = {name: tensor.clone() for name, tensor in baseline.inputs.items()}
        baseline.prepare()
        got = baseline.call()
        assert isinstance(got, tuple)
        given = {**baseline.inputs, **scalar_inputs(spec)}
        values = [given[name] for name in task.definition.inputs]
        want = run_reference(reference, spec["definition"], spec["axes"], values)
        for name, actual, expected in zip(task.definition.outputs, got, want, strict=True):
            atol, rtol = output_tolerance(spec, name)
            status, check = compare_output(
                name, actual, expected, atol, rtol, spec["matched_ratio"], spec["outlier_bound"]
            )
            print(task_name, workload.axes, name, status, check.get("matched_ratio"))
            assert status == "passed", check.get("reason")
        assert all(torch.equal(before[name], tensor) for name, tensor in baseline.inputs.items())
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        baseline.prepare()
        start.record()
        timed = baseline.call()
        end.record()
        torch.cuda.synchronize()
        print(task_name, workload.axes, f"{start.elapsed_time(end) * 1e3:.1f} us")
        baseline.clear()
        assert isinstance(timed, tuple) and all(not bool(tensor.any()) for tensor in timed)
