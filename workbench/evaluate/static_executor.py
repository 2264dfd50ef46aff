"""The `static` executor: build and static SASS only, on any machine with nvcc (or Triton); no GPU.

Correctness, dynamic and timing are reported as `not_run`, and so is the overall verdict when the
two static tiers pass: a static pass is not a pass.
"""

from __future__ import annotations

from pathlib import Path

from workbench.evaluate.build.abi import abi_checked
from workbench.evaluate.build.nvcc import build
from workbench.evaluate.build.sass import static_stage
from workbench.evaluate.build.triton_build import build_triton
from workbench.evaluate.pipeline import new_result, run_stages
from workbench.evaluate.request import EvalRequest, ProgressCallback
from workbench.evaluate.result import EvalResult, StageBase, Status
from workbench.tasks import resolve_task


class StaticExecutor:
    """Build + static tier. `cache_dir` overrides `$PTXWB_CACHE` / ~/.cache/ptxwb/builds."""

    name = "static"

    def __init__(self, cache_dir: Path | None = None) -> None:
        self.cache_dir = cache_dir

    async def evaluate(self, request: EvalRequest, progress: ProgressCallback | None = None) -> EvalResult:
        task = resolve_task(request.task)
        target = task.target(request.target)  # the static tier looks for the family this task requires
        result = new_result(request, self.name)

        async def build_step(_: EvalResult) -> StageBase:
            if request.language == "triton":
                return await build_triton(
                    request.source,
                    task,
                    task.workload(request.workload),
                    target,
                    request.compile_timeout_s,
                    self.cache_dir,
                )
            built = await build(request.source, target, request.compile_timeout_s, self.cache_dir)
            return abi_checked(built, request.source, task.definition)

        async def static_step(so_far: EvalResult) -> StageBase:
            return await static_stage(so_far.stages.build, target)

        await run_stages(result, [("build", build_step), ("static", static_step)], progress)
        if result.status == Status.not_run and result.stages.static.status == Status.passed:
            result.message = (
                "build and static passed; correctness, dynamic and timing not run (static executor, no GPU)"
            )
        return result

    async def close(self) -> None:
        """Nothing to release: builds run as one-off nvcc processes."""
