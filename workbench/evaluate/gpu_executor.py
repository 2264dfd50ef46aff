"""What the `local` and `ssh://` executors share: all five tiers, the GPU ones through a worker.

Build and static run where the executor says (`_cuda_steps`: here for `local`; `ssh://` overrides it to
build on the remote host; a Triton candidate always builds here, `_triton_steps`);
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
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import UserError
from workbench.evaluate.build.abi import abi_checked
from workbench.evaluate.build.nvcc import build, with_negated
from workbench.evaluate.build.sass import static_stage
from workbench.evaluate.build.triton_build import SOURCE_NAME as TRITON_SOURCE
from workbench.evaluate.build.triton_build import build_triton, run_tool, with_negated_triton
from workbench.evaluate.gpu.kernel_names import module_kernels
from workbench.evaluate.gpu.protocol import BEGIN_MARGIN_S, STAGE_MARGIN_S, GpuStage
from workbench.evaluate.gpu.triton_runtime import RuntimeRefused, own_kernels
from workbench.evaluate.gpu_spec import gpu_spec, with_build
from workbench.evaluate.pipeline import StageFunction, finalize, new_result, run_stages
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
from workbench.evaluate.worker_client import WorkerConnection, WorkerError
from workbench.tasks import Target, Task, Workload, resolve_task

STAGE_MODELS: dict[GpuStage, type[StageBase]] = {
    "correctness": CorrectnessStage,
    "timing": TimingStage,
    "dynamic": DynamicStage,
}


async def _prepared(entry: Path, timeout_s: float) -> str | None:
    """Fill the Triton runtime cache of the build `entry` (`triton_runtime`), or say why it was not."""
    command = [sys.executable, "-m", "workbench.evaluate.gpu.triton_runtime", str(entry)]
    finished = await run_tool(command, entry, timeout_s)
    if finished.returncode is None:
        return f"preparing Triton's runtime cache took over {timeout_s:g} s"
    if finished.returncode != 0:
        lines = finished.output.strip().splitlines()
        return f"preparing Triton's runtime cache failed: {lines[-1] if lines else f'exit {finished.returncode}'}"
    return None


async def _triton_runtime(build: BuildStage, timeout_s: float) -> tuple[Path, list[str]] | str:
    """The Triton runtime cache of a built candidate (`triton_runtime`) and its kernels' names, or why
    there is none (an infrastructure error: the build passed)."""
    if build.cubin_path is None:
        return "the Triton build left no kernels"
    entry = Path(build.cubin_path).parent
    failed = await _prepared(entry, timeout_s)
    if failed is not None:
        return failed
    try:
        return entry, own_kernels(entry)
    except (OSError, ValueError, RuntimeRefused) as exc:
        return f"the Triton trace cannot be read: {exc}"


@dataclass
class GpuRun:
    """One evaluation on its way: what the build and static steps hand the GPU tiers."""

    request: EvalRequest
    task: Task
    target: Target  # with the family this task requires there, in every tier
    workload: Workload
    result: EvalResult
    kernels: list[str] | None = None  # the candidate's own kernels, to tell them from foreign ones
    static: StaticStage | None = None  # the static tier, when it came back with a remote build
    triton_entry: Path | None = None  # a Triton candidate's runtime cache: the runner loads from it
    refused: str | None = None  # why the GPU tiers cannot begin though the build passed
    begun: dict | None = None  # the worker's reply to `begin`, once it has begun the candidate


class GpuExecutor:
    """Base of `local` and `ssh://`: subclasses give the worker command and where builds happen."""

    name = "gpu"

    def __init__(self, client: WorkerConnection, cache_dir: Path | None = None) -> None:
        self.client = client
        self.cache_dir = cache_dir
        self.worker_profiles = False  # its worker has ncu: the dynamic tier runs, and may need the twin

    async def evaluate(self, request: EvalRequest, progress: ProgressCallback | None = None) -> EvalResult:
        task = resolve_task(request.task)
        run = GpuRun(
            request=request,
            task=task,
            target=task.target(request.target),
            workload=task.workload(request.workload),
            result=new_result(request, self.name),
        )
        if not await self._start_worker(run.result):
            return run.result
        if request.language == "triton":
            build_and_static = self._triton_steps(run)
        else:
            build_and_static = self._cuda_steps(run)
        gpu_tiers = [(name, self._gpu_step(run, name)) for name in STAGE_MODELS]
        try:
            await run_stages(run.result, [*build_and_static, *gpu_tiers], progress)
        finally:
            await self._end(run)
        return run.result

    async def _start_worker(self, result: EvalResult) -> bool:
        """Whether the worker is ready (when not, `result` says why); a host without a GPU is bad input."""
        try:
            hello = await self.client.start()
        except WorkerError as exc:
            # An unreachable or broken host is a verdict a sweep records and retries, not bad input.
            result.stages.build = BuildStage(status=Status.infrastructure_error, message=f"GPU worker: {exc}")
            finalize(result)
            return False
        self.worker_profiles = bool(hello.get("ncu"))
        if not hello.get("gpus"):
            await self.client.close_unusable()
            where = "this machine" if self.name == "local" else hello.get("host", "the worker host")
            raise UserError(
                f"--executor {self.name}: no NVIDIA GPU on {where} (nvidia-smi lists none); "
                "use --executor static for the build and static tiers only, or ssh://HOST with a GPU"
            )
        return True

    def _cuda_steps(self, run: GpuRun) -> list[tuple[StageName, StageFunction]]:
        """A .cu candidate built and checked on this machine; the worker loads the library."""

        async def build_here(_: EvalResult) -> StageBase:
            request = run.request
            built = await build(request.source, run.target, request.compile_timeout_s, self.cache_dir)
            return abi_checked(built, request.source, run.task.definition)

        async def static_here(so_far: EvalResult) -> StageBase:
            # The library's negated twin, for the dynamic tier's dependence check, beside the static tier
            # (where there is a dynamic tier: its worker has ncu).
            if self.worker_profiles:
                stage, so_far.stages.build = await asyncio.gather(
                    static_stage(so_far.stages.build, run.target),
                    with_negated(so_far.stages.build, run.target, self.cache_dir),
                )
            else:
                stage = await static_stage(so_far.stages.build, run.target)
            library = so_far.stages.build.library_path
            if library:
                run.kernels = await asyncio.to_thread(module_kernels, library, stage.sass_path)
            return stage

        return [("build", build_here), ("static", static_here)]

    def _triton_steps(self, run: GpuRun) -> list[tuple[StageName, StageFunction]]:
        """A Triton candidate built and traced on this machine; the worker runs its kernel.py."""

        async def build_triton_here(_: EvalResult) -> StageBase:
            request = run.request
            return await build_triton(
                request.source, run.task, run.workload, run.target, request.compile_timeout_s, self.cache_dir
            )

        async def negated_twin(build: BuildStage) -> BuildStage:
            """The negated twin with its own runtime cache, for the dynamic tier's dependence check (where
            there is one: its worker has ncu)."""
            if not self.worker_profiles:
                return build
            twin = await with_negated_triton(build, run.target, self.cache_dir)
            if twin.negated_library_path is None:
                return twin
            failed = await _prepared(Path(twin.negated_library_path), run.request.compile_timeout_s)
            if failed is None:
                return twin
            return twin.model_copy(update={"negated_library_path": None, "negated_note": failed})

        async def static_and_runtime(so_far: EvalResult) -> StageBase:
            stage, runtime, so_far.stages.build = await asyncio.gather(
                static_stage(so_far.stages.build, run.target),
                _triton_runtime(so_far.stages.build, run.request.compile_timeout_s),
                negated_twin(so_far.stages.build),
            )
            if isinstance(runtime, str):
                run.refused = runtime
            else:
                run.triton_entry, run.kernels = runtime
            return stage

        return [("build", build_triton_here), ("static", static_and_runtime)]

    def _gpu_step(self, run: GpuRun, name: GpuStage) -> StageFunction:
        """One GPU tier in the worker; the first one to run begins the candidate there."""
        model = STAGE_MODELS[name]

        async def step(_: EvalResult) -> StageBase:
            try:
                if run.refused is None and run.begun is None:
                    await self._begin(run)
                if run.refused is not None:
                    return model(status=Status.infrastructure_error, message=run.refused)
                reply = await self.client.request(
                    {
                        "op": "stage",
                        "stage": name,
                        "trials": run.request.trials,
                        "warmup": run.request.warmup,
                        "iterations": run.request.iterations,
                    },
                    timeout_s=run.request.profile_timeout_s + STAGE_MARGIN_S,
                )
            except WorkerError as exc:
                return model(status=Status.infrastructure_error, message=f"GPU worker: {exc}")
            return model.model_validate(reply["result"])

        return step

    async def _begin(self, run: GpuRun) -> None:
        """Hand the worker the built candidate and its workload; it readies the runner and the tools."""
        request = run.request
        spec = with_build(
            gpu_spec(run.task, run.workload, run.target, source_counters=request.source_counters),
            run.result.stages.build,
            run.result.stages.static,
        )
        library = run.result.stages.build.library_path
        if run.triton_entry is not None:
            spec["triton_entry"] = str(run.triton_entry)
            library = str(run.triton_entry / TRITON_SOURCE)
        timeouts: dict[str, float] = {"dynamic_s": request.profile_timeout_s}
        if request.call_timeout_s is not None:
            timeouts["call_s"] = request.call_timeout_s
        started = time.perf_counter()
        begun = await self.client.request(
            {
                "op": "begin",
                "library": library,
                "kernels": run.kernels,
                "spec": spec,
                "stages": list(STAGE_MODELS),
                "timeouts": timeouts,
                "sanitize": request.sanitize,
                "seed": request.seed,
            },
            timeout_s=request.profile_timeout_s + BEGIN_MARGIN_S,
        )
        run.begun = begun
        result = run.result
        result.device = begun.get("device") or result.device
        result.seed = begun.get("seed")
        result.phases_s.update(begun.get("phases_s") or {})
        result.phases_s["begin"] = round(time.perf_counter() - started, 4)

    async def _end(self, run: GpuRun) -> None:
        """Release the candidate's processes in the worker, once, whatever happened."""
        if run.begun is None or self.client.hello is None:
            return
        started = time.perf_counter()
        try:
            await self.client.request({"op": "end"}, timeout_s=120)
        except WorkerError:
            pass
        run.result.phases_s["end"] = round(time.perf_counter() - started, 4)

    async def close(self) -> None:
        await self.client.close()
