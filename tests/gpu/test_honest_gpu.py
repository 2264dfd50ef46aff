"""On a Hopper GPU: every Hopper kernel of the honest corpus, CUDA and Triton, through every tier of the
`local` executor at the headline workload, one executor (one worker) for all of them, and none refused.

Run on the GPU host from the checkout: `python -m pytest -m gpu -n 0 -s tests/gpu/test_honest_gpu.py`.
The CUDA corpus is built once, concurrently, into the executor's build cache first, so each evaluation's
build is a cache hit and the GPU tiers run back to back (a Triton kernel's build is its own evaluation's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.honest_support import CUDA, TRITON, target_of, task_of
from workbench.evaluate.build.nvcc import build, build_toolchain
from workbench.evaluate.gpu.profile import NO_TENSOR_SHARE
from workbench.evaluate.local_executor import LocalExecutor
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import EvalResult, Status
from workbench.tasks import get_target

pytestmark = pytest.mark.gpu

HOPPER = [path for path in CUDA if target_of(path) == "hopper"]


class Judge:
    """One LocalExecutor on one event loop for the whole module."""

    def __init__(self, cache: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.executor = LocalExecutor(cache)
        self.cache = cache

    def prebuild(self) -> None:
        build_toolchain()
        target = get_target("hopper")

        async def all_of_them() -> None:
            await asyncio.gather(*(build(p.read_text(), target, 600, self.cache) for p in HOPPER))

        self.loop.run_until_complete(all_of_them())

    def evaluate(self, path: Path) -> EvalResult:
        language = "triton" if path.suffix == ".py" else "cuda"
        request = EvalRequest(task=task_of(path), target="hopper", source=path.read_text(), language=language)
        return self.loop.run_until_complete(self.executor.evaluate(request))

    def close(self) -> None:
        self.loop.run_until_complete(self.executor.close())
        self.loop.close()


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judge]:
    judge = Judge(tmp_path_factory.mktemp("honest-builds"))
    judge.prebuild()
    yield judge
    judge.close()


@pytest.mark.parametrize("path", HOPPER + TRITON, ids=lambda p: p.name)
def test_each_honest_hopper_kernel_passes_every_tier(judge: Judge, path: Path) -> None:
    result = judge.evaluate(path)
    stages = result.stages
    timing = stages.timing
    print(
        f"\n{path.name}: {result.status.value} · build {stages.build.status.value} · static"
        f" {stages.static.status.value} · correctness {stages.correctness.status.value} · dynamic"
        f" {stages.dynamic.status.value} (tensor share {stages.dynamic.tensor_share}, other paths"
        f" {stages.dynamic.other_work_share}, profiled/timed {stages.dynamic.profiled_over_timed}) · timing"
        f" {timing.status.value} (speedup {timing.speedup}, host overhead {timing.host_overhead_ms} ms against"
        f" the baseline's {timing.baseline_host_overhead_ms}, {timing.host_excess_ms} ms beyond the empty call (a Triton candidate: beyond the baseline's path),"
        f" {timing.host_charged_ms} ms counted in) · {result.message}"
        f"\n  dynamic (ncu {stages.dynamic.ncu_s} s after the go, its first range before the candidate:"
        f" {stages.dynamic.profiler_warmed}): {stages.dynamic.message[-600:]}"
        f"\n  {_work(stages.dynamic.executed_opcodes, stages.dynamic.task_flops)}"
        f"\n  beside the required family {stages.dynamic.instructions_per_flop} instructions per FLOP; the"
        f" negated build answered right: {stages.dynamic.negated_passed} (None: not run)"
    )
    assert stages.build.status == Status.passed, f"{stages.build.message} {stages.build.errors[:3]}"
    assert result.status == Status.passed, result.message
    assert result.correct
    if stages.static.required_family in NO_TENSOR_SHARE:  # a memory-bound family: no tensor share is asked
        assert stages.dynamic.tensor_share is None and stages.dynamic.required_executed
    else:
        assert stages.dynamic.tensor_share is not None and stages.dynamic.tensor_share > 0.9
    # Where its instructions per FLOP had its answer's dependence on its wgmma checked, it showed it.
    assert stages.dynamic.negated_passed is not True
    assert timing.speedup is not None and not timing.faster_than_light


def _work(opcodes: dict[str, int], task_flops: float | None) -> str:
    """Every executed instruction per task FLOP and the most executed opcodes: what a recount of the work
    accounting (`benchmarks/work_recount.py`) or a bound on instructions per FLOP is set against."""
    if not opcodes or not task_flops:
        return "no per-opcode profile"
    total = sum(opcodes.values())
    top = ", ".join(
        f"{op} {n / task_flops:.4f}" for op, n in sorted(opcodes.items(), key=lambda i: -i[1])[:12]
    )
    return f"instructions per task FLOP {total / task_flops:.4f}; by opcode: {top}"
