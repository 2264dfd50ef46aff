"""On a Hopper GPU with the cuDNN frontend (`nvidia-cudnn-frontend`, carried in `.whl`): cuDNN's sdpa_fp8
graph passes each FP8 attention task's own rule against the task's reference (the warm-up that offers it
as the baseline), then serves as the baseline through `make_baselines` at every workload of one task,
with its outputs poisoned once timed.

Run on the GPU host from the checkout:
`python -m pytest -m gpu -n 0 -s tests/gpu/test_cudnn_fp8_attention_gpu.py`.
"""

from __future__ import annotations

import pytest
import torch

from workbench.evaluate.gpu import cudnn_fp8_attention
from workbench.evaluate.gpu.baselines import make_baselines
from workbench.evaluate.gpu.correctness import compare_output, output_tolerance
from workbench.evaluate.gpu.inputs import compile_reference, fill_inputs, run_reference
from workbench.evaluate.gpu_spec import gpu_spec
from workbench.tasks import Catalogue, get_target

pytestmark = pytest.mark.gpu


def test_the_warm_up_passes_every_fp8_task_and_the_baseline_answers_by_the_tasks_rule() -> None:
    assert cudnn_fp8_attention.installed(), "carry nvidia-cudnn-frontend's wheel in .whl"
    assert cudnn_fp8_attention.warm() == 0
    catalogue = Catalogue.load()
    task = catalogue.get("fp8_mha_with_lse_d128_causal")
    reference = compile_reference(task.definition.reference)
    for workload in task.workloads:
        spec = gpu_spec(task, workload, get_target("hopper"), catalogue)
        (baseline,), notes = make_baselines(spec, device="cuda")
        assert baseline.name == cudnn_fp8_attention.NAME and notes == []
        fill_inputs(spec, baseline.inputs, seed=11)
        baseline.prepare()
        got = baseline.call()
        assert isinstance(got, tuple)
        values = [baseline.inputs[name] for name in task.definition.inputs]
        want = run_reference(reference, spec["definition"], spec["axes"], values)
        for name, actual, expected in zip(task.definition.outputs, got, want, strict=True):
            atol, rtol = output_tolerance(spec, name)
            status, check = compare_output(
                name, actual, expected, atol, rtol, spec["matched_ratio"], spec["outlier_bound"]
            )
            print(workload.axes, name, status, check.get("matched_ratio"))
            assert status == "passed", check.get("reason")
        # The time the baseline gives: a sanity bound against the FP8 peak, not a figure.
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        baseline.call()
        end.record()
        torch.cuda.synchronize()
        tflops = task.flops(workload) / (start.elapsed_time(end) * 1e-3) / 1e12
        print(workload.axes, f"{tflops:.0f} TFLOP/s")
        assert 0 < tflops < 1979  # H200 dense FP8 peak
        baseline.clear()
        assert all(bool(torch.isnan(tensor.float()).all()) for tensor in got)
