"""What the `local` and `ssh://` executors share: all five tiers, the GPU ones through a worker.

Build and static run where the executor says (here for `local`, on the remote host for `ssh://`);
correctness, timing and the dynamic tier (in that order: the dynamic proof is checked against the timed
calls) run in the worker (`worker.py`). The stages go through the same `run_stages` as the static
executor, so progress, which tiers stop which, and the verdict match. Asking a GPU executor of a host
without a GPU is bad input: one line naming the host, before anything is built; a host that cannot be
reached is an `infrastructure_error` verdict.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from workbench.errors import UserError
from workbench.evaluate.build.abi import abi_checked
from workbench.evaluate.build.nvcc import build
from workbench.evaluate.build.sass import static_stage
from workbench.evaluate.build.triton_build import SOURCE_NAME as TRITON_SOURCE
from workbench.evaluate.build.triton_build import build_triton, run_tool
from workbench.evaluate.gpu.kernel_names import module_kernels
from workbench.evaluate.gpu.triton_runtime import RuntimeRefused, own_kernels
from workbench.evaluate.gpu_spec import gpu_spec
from workbench.evaluate.pipeline import finalize, new_result, run_stages
from workbench.evaluate.request import EvalRequest, ProgressCallback, StageName
from workbench.evaluate.result import (
    BuildStage,
    CorrectnessStage,
    DynamicStage,
    EvalResult,
    StageBase,
    StaticStage,
    Status,
    TimingStage,
)
from workbench.evaluate.worker_client import WorkerClient, WorkerError
from workbench.tasks import resolve_task

STAGE_MODELS: dict[StageName, type[StageBase]] = {
    "correctness": CorrectnessStage,
    "timing": TimingStage,
    "dynamic": DynamicStage,
}


async def _triton_runtime(build: BuildStage, timeout_s: float) -> tuple[Path, list[str]] | str:
    """The Triton runtime cache of a built candidate (`triton_runtime`) and its kernels' names, or why
    there is none (an infrastructure error: the build passed)."""
    if build.cubin_path is None:
        return "the Triton build left no kernels"
    entry = Path(build.cubin_path).parent
    command = [sys.executable, "-m", "workbench.evaluate.gpu.triton_runtime", str(entry)]
    finished = await run_tool(command, entry, timeout_s)
    if finished.returncode is None:
        return f"preparing Triton's runtime cache took over {timeout_s:g} s"
    if finished.returncode != 0:
        lines = finished.output.strip().splitlines()
        return f"preparing Triton's runtime cache failed: {lines[-1] if lines else f'exit {finished.returncode}'}"
    try:
        return entry, own_kernels(entry)
    except (OSError, ValueError, RuntimeRefused) as exc:
        return f"the Triton trace cannot be read: {exc}"


class GpuExecutor:
    """Base of `local` and `ssh://`: subclasses give the worker command and where builds happen."""

    name = "gpu"
    remote_build = False

    def __init__(self, client: WorkerClient, cache_dir: Path | None = None) -> None:
        self.client = client
        self.cache_dir = cache_dir

    async def evaluate(self, request: EvalRequest, progress: ProgressCallback | None = None) -> EvalResult:
        task = resolve_task(request.task)
        target = task.target(request.target)  # the family this task requires there, in every tier
        workload = task.workload(request.workload)
        result = new_result(request, self.name)
        state: dict = {}
        try:
            hello = await self.client.start()
        except WorkerError as exc:
            # An unreachable or broken host is a verdict a sweep records and retries, not bad input.
            result.stages.build = BuildStage(status=Status.infrastructure_error, message=f"GPU worker: {exc}")
            finalize(result)
            return result
        if not hello.get("gpus"):
            where = "this machine" if self.name == "local" else hello.get("host", "the worker host")
            raise UserError(
                f"--executor {self.name}: no NVIDIA GPU on {where} (nvidia-smi lists none); "
                "use --executor static for the build and static tiers only, or ssh://HOST with a GPU"
            )

        async def build_step(_: EvalResult) -> StageBase:
            if request.language == "triton":
                return await build_triton(
                    request.source, task, workload, target, request.compile_timeout_s, self.cache_dir
                )
            if not self.remote_build:
                built = await build(request.source, target, request.compile_timeout_s, self.cache_dir)
                return abi_checked(built, request.source, task.definition)
            result.device = ", ".join(hello.get("gpus") or []) or None
            reply = await self.client.request(
                {
                    "op": "build",
                    "source": request.source,
                    "target": request.target,
                    "required_family": target.required_family,
                    "timeout_s": request.compile_timeout_s,
                },
                timeout_s=request.compile_timeout_s + 300,
            )
            state["remote_static"] = reply.get("static")
            state["kernels"] = reply.get("kernels")
            return abi_checked(BuildStage.model_validate(reply["build"]), request.source, task.definition)

        async def static_step(so_far: EvalResult) -> StageBase:
            if self.remote_build:
                return StaticStage.model_validate(state["remote_static"])
            stage = await static_stage(so_far.stages.build, target)
            library = so_far.stages.build.library_path
            if request.language == "triton":
                state["triton"] = await _triton_runtime(so_far.stages.build, request.compile_timeout_s)
            elif library:
                state["kernels"] = await asyncio.to_thread(module_kernels, library, stage.sass_path)
            return stage

        async def begin() -> dict:
            if "begun" not in state and isinstance(state.get("triton"), str):
                state["refused"] = state["triton"]
                return {"ok": False}
            if "begun" not in state:
                spec = gpu_spec(task, workload, target, source_counters=request.source_counters)
                library = result.stages.build.library_path
                if request.language == "triton":
                    entry, state["kernels"] = state["triton"]
                    spec["triton_entry"] = str(entry)
                    library = str(entry / TRITON_SOURCE)
                timeouts: dict[str, float] = {"dynamic_s": request.profile_timeout_s}
                if request.call_timeout_s is not None:
                    timeouts["call_s"] = request.call_timeout_s
                started = time.perf_counter()
                state["begun"] = await self.client.request(
                    {
                        "op": "begin",
                        "library": library,
                        "kernels": state.get("kernels"),
                        "spec": spec,
                        "stages": list(STAGE_MODELS),
                        "timeouts": timeouts,
                        "sanitize": request.sanitize,
                        "seed": request.seed,
                    },
                    timeout_s=request.profile_timeout_s + 600,
                )
                result.device = state["begun"].get("device") or result.device
                result.seed = state["begun"].get("seed")
                result.phases_s.update(state["begun"].get("phases_s") or {})
                result.phases_s["begin"] = round(time.perf_counter() - started, 4)
            return state["begun"]

        def gpu_step(name: StageName):
            async def step(_: EvalResult) -> StageBase:
                model = STAGE_MODELS[name]
                try:
                    await begin()
                    if "refused" in state:
                        return model(status=Status.infrastructure_error, message=state["refused"])
                    reply = await self.client.request(
                        {
                            "op": "stage",
                            "stage": name,
                            "trials": request.trials,
                            "warmup": request.warmup,
                            "iterations": request.iterations,
                        },
                        timeout_s=request.profile_timeout_s + 1800,
                    )
                except WorkerError as exc:
                    return model(status=Status.infrastructure_error, message=f"GPU worker: {exc}")
                return model.model_validate(reply["result"])

            return step

        try:
            await run_stages(
                result,
                [
                    ("build", build_step),
                    ("static", static_step),
                    *((name, gpu_step(name)) for name in STAGE_MODELS),
                ],
                progress,
            )
        finally:
            if "begun" in state and self.client.hello is not None:
                started = time.perf_counter()
                try:
                    await self.client.request({"op": "end"}, timeout_s=120)
                except WorkerError:
                    pass
                result.phases_s["end"] = round(time.perf_counter() - started, 4)
        return result

    async def close(self) -> None:
        await self.client.close()
