"""The `static` executor: build and static SASS only, on any machine with nvcc; no GPU.

Correctness, dynamic and timing are reported as `not_run`, and so is the overall verdict when the
two static tiers pass: a static pass is not a pass.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from workbench.evaluate.build import build
from workbench.evaluate.pipeline import run_stages
from workbench.evaluate.request import EvalRequest, ProgressCallback
from workbench.evaluate.result import EvalResult, StageBase, Status
from workbench.evaluate.sass import static_stage
from workbench.tasks import get_target, resolve_task


def new_result(request: EvalRequest, executor: str) -> EvalResult:
    """An empty verdict for `request`: task, target, workload and source hash filled in."""
    task = resolve_task(request.task)
    workload = task.workload(request.workload)
    return EvalResult(
        task=task.name,
        target=request.target,
        workload_uuid=workload.uuid,
        workload_axes=dict(workload.axes),
        executor=executor,
        source_sha256=hashlib.sha256(request.source.encode()).hexdigest(),
    )


class StaticExecutor:
    """Build + static tier. `cache_dir` overrides `$PTXWB_CACHE` / ~/.cache/ptxwb/builds."""

    name = "static"

    def __init__(self, cache_dir: Path | None = None) -> None:
        self.cache_dir = cache_dir

    async def evaluate(self, request: EvalRequest, progress: ProgressCallback | None = None) -> EvalResult:
        target = get_target(request.target)
        result = new_result(request, self.name)

        async def build_step(_: EvalResult) -> StageBase:
            return await build(request.source, target, request.compile_timeout_s, self.cache_dir)

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
