"""On a Hopper GPU: Triton candidates through every tier of the `local` executor, from the runtime cache
the workbench makes (`triton_runtime`); and two hostile ones, torch work the build's trace never saw and
a launch specialised otherwise on the GPU than in the trace.

Run on the GPU host from the checkout: `python -m pytest -m gpu -v -s tests/gpu/test_gpu_triton.py`
(`-s` prints each verdict's figures, for the record).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from workbench.evaluate.local_executor import LocalExecutor
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import EvalResult, Status

pytestmark = pytest.mark.gpu
pytest.importorskip("triton")

DATA = Path(__file__).parents[1] / "data" / "triton"
HOSTILE = Path(__file__).parent / "hostile" / "triton"
GEMM, ATTENTION = "gemm_n7168_k5120", "mha_with_lse_d128"


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory):
    """One executor (one worker) for the module, as a sweep holds one."""
    loop = asyncio.new_event_loop()
    executor = LocalExecutor(tmp_path_factory.mktemp("builds"))
    yield loop, executor
    loop.run_until_complete(executor.close())
    loop.close()


def judged(executor, path: Path, task: str) -> EvalResult:
    loop, local = executor
    request = EvalRequest(task=task, target="hopper", source=path.read_text(), language="triton")
    result = loop.run_until_complete(local.evaluate(request))
    timing = result.stages.timing
    print(
        f"\n{path.name} on {task}: {result.status.value} | {result.message}\n"
        f"  speedup {timing.speedup} | dynamic {result.stages.dynamic.status.value}: "
        f"{result.stages.dynamic.executed_families} share {result.stages.dynamic.tensor_share}\n"
        f"  phases {result.phases_s}"
    )
    return result


@pytest.mark.parametrize(("name", "task"), [("gemm_tma.py", GEMM), ("attention_fwd.py", ATTENTION)])
def test_a_triton_kernel_passes_every_tier_its_tensor_core_work_proven(
    executor, name: str, task: str
) -> None:
    result = judged(executor, DATA / name, task)
    assert result.status == Status.passed, result.message
    assert [t.fresh_addresses for t in result.stages.correctness.trials][-1]
    dynamic = result.stages.dynamic
    assert dynamic.required_executed and dynamic.kernels
    assert dynamic.tensor_share is not None and dynamic.tensor_share > 0.9
    timing = result.stages.timing
    assert timing.method == "cupti" and timing.speedup is not None and timing.speedup > 0
    assert all(k in dynamic.kernels for k in timing.candidate.kernels)


def test_torch_work_the_trace_never_saw_is_a_foreign_kernel(executor) -> None:
    result = judged(executor, HOSTILE / "hidden_torch.py", GEMM)
    assert result.stages.build.status == Status.passed  # the ban and the trace cannot see it
    assert result.status == Status.foreign_kernel, result.message
    assert "not defined in the candidate's module" in result.message


def test_a_launch_specialised_otherwise_than_traced_runs_nothing_unjudged(executor) -> None:
    result = judged(executor, HOSTILE / "respecialised.py", GEMM)
    assert result.stages.build.status == Status.passed and result.stages.static.status == Status.passed
    assert result.status == Status.runtime_error, result.message
    assert "only kernels the build compiled and judged may run" in result.message
