"""Run evaluation stages in order; the empty verdict every executor starts from.

Stage-generic: an executor lists (name, coroutine function) pairs; each function reads the result so
far (a later stage needs the build's paths) and returns its stage model. The tiers are measured
independently (the paper asks three questions: correct? the target's instructions run? fast?): only a
failed build (banned, unbuildable) stops everything; a failed correctness stops timing and the dynamic
tier; a static tier without the required family leaves the dynamic tier nothing to prove. The verdict
is the first failing tier in the order correctness, family (static, dynamic), timing, after the build;
when every stage that ran passed but some did not run (the static executor), it is `not_run` — never
`passed` — and the message says which tiers are missing.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from workbench.errors import UserError
from workbench.evaluate.build.lineinfo import line_table
from workbench.evaluate.gpu.demangle import demangle
from workbench.evaluate.request import EvalRequest, Progress, ProgressCallback, StageName
from workbench.evaluate.result import EvalResult, StageBase, Status
from workbench.tasks import resolve_task

StageFunction = Callable[[EvalResult], Awaitable[StageBase]]


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


def _notify(progress: ProgressCallback | None, event: Progress) -> None:
    if progress is not None:
        progress(event)


async def run_stages(
    result: EvalResult,
    stages: Sequence[tuple[StageName, StageFunction]],
    progress: ProgressCallback | None = None,
) -> EvalResult:
    """Fill `result.stages` by running `stages` in order; set the top-level status and message."""
    started = time.perf_counter()
    if result.started_at is None:
        result.started_at = time.time()
    skipped: set[str] = set()
    for name, function in stages:
        if name in skipped:
            reason = _skip_reason(name, result)
            if reason is not None:
                getattr(result.stages, name).message = reason
            continue
        _notify(progress, Progress(stage=name, state="started"))
        stage_started = time.perf_counter()
        try:
            stage = await function(result)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug or a broken tool must end as a verdict, not kill the loop
            kind = type(getattr(result.stages, name))
            last = traceback.format_exception_only(exc)[-1].strip()
            stage = kind(status=Status.infrastructure_error, message=f"{name} stage crashed: {last}")
        if stage.duration_s is None:
            stage.duration_s = time.perf_counter() - stage_started
        setattr(result.stages, name, stage)
        _notify(progress, Progress(stage=name, state="finished", status=stage.status, message=stage.message))
        skipped |= skipped_after(name, stage)
    finalize(result)
    named = time.perf_counter()
    await asyncio.to_thread(name_kernels, result)  # c++filt: off the event loop a sweep shares
    await asyncio.to_thread(place_source_lines, result)  # nvdisasm, likewise
    result.phases_s["names"] = round(time.perf_counter() - named, 4)
    result.duration_s = (result.duration_s or 0.0) + time.perf_counter() - started
    return result


def skipped_after(name: str, stage: StageBase) -> set[str]:
    """The stages a finished stage leaves without anything to measure."""
    if stage.status in (Status.passed, Status.not_run):
        return set()
    if name == "build":
        return {"static", "correctness", "timing", "dynamic"}
    if name == "static":
        return {"dynamic"}
    if name == "correctness":
        return {"timing", "dynamic"}
    return set()


def _skip_reason(name: str, result: EvalResult) -> str | None:
    if name == "dynamic" and result.stages.static.status == Status.static_missing_family:
        return "not run: the static tier found none of the required family's instructions to prove"
    if name in ("timing", "dynamic") and result.stages.correctness.status not in (
        Status.passed,
        Status.not_run,
    ):
        return "not run: the kernel is not correct"
    return None


VERDICT_ORDER = ("build", "correctness", "static", "dynamic", "timing")


def name_kernels(result: EvalResult) -> None:
    """Readable names for the symbols ncu and CUPTI record (mangled), kept with the result so a
    replay on a machine without c++filt reads them too."""
    dynamic, timing = result.stages.dynamic, result.stages.timing
    symbols = [*dynamic.kernels, *dynamic.ignored_kernels, *(launch.kernel for launch in dynamic.launches)]
    for stats in (timing.candidate, *timing.baselines):
        if stats is not None:
            symbols.extend(stats.kernels)
    result.kernel_names = {k: v for k, v in demangle(symbols).items() if k != v}


def place_source_lines(result: EvalResult) -> None:
    """The kernel.cu line of each profiled instruction, where the evaluation asked for per-instruction
    counts and its cubin is on this machine (so the agent reads where its warps waited as lines of its
    own file)."""
    counts = result.stages.dynamic.source_counts
    cubin = result.stages.build.cubin_path
    if not counts or cubin is None or not Path(cubin).is_absolute() or not Path(cubin).is_file():
        return
    table = line_table(Path(cubin))
    if table is None:
        return
    for kernel, rows in counts.items():
        lines = table.get(kernel, {})
        for row in rows:
            if row.offset is not None:
                row.line = lines.get(row.offset)


def finalize(result: EvalResult) -> None:
    """Top-level status and message from the stages: the first failing tier in `VERDICT_ORDER`."""
    for name in VERDICT_ORDER:
        stage = getattr(result.stages, name)
        if stage.status not in (Status.passed, Status.not_run):
            result.status = stage.status
            result.message = f"{name}: {stage.message}" if stage.message else name
            return
    ran = [name for name, stage in result.stages.in_order() if stage.status == Status.passed]
    missing = [name for name, stage in result.stages.in_order() if stage.status == Status.not_run]
    if not ran:
        result.status, result.message = Status.not_run, "no stage ran"
    elif missing:
        result.status = Status.not_run
        result.message = f"{', '.join(ran)} passed; {', '.join(missing)} not run"
    else:
        result.status, result.message = Status.passed, "all stages passed"
