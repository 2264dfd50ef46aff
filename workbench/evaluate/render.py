"""The two renderings of an `EvalResult`: compact feedback text for the agent, a rich table for people.

Both show all five tiers; a stage that did not run is shown as not run, never as passed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from workbench.evaluate.gpu.occupancy import Limiter, Occupancy
from workbench.evaluate.gpu.timing import rates_text
from workbench.evaluate.result import (
    BuildStage,
    CorrectnessStage,
    DynamicStage,
    EvalResult,
    KernelLaunch,
    StageBase,
    StaticStage,
    Status,
    TimingStage,
    TimingStats,
)

if TYPE_CHECKING:
    from rich.console import RenderableType

MAX_ERRORS = 5
MAX_KERNELS = 4


def short_kernel(name: str) -> str:
    """`(anonymous namespace)::gemm(float const*, int)` -> `gemm`: the name without its parameters (nor
    the `void ` c++filt writes before a template's name)."""
    text = name
    if text.endswith(")"):
        depth = 0
        for index in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[index], 0)
            if depth == 0:
                text = text[:index] if index > 0 else text
                break
    return text.replace("(anonymous namespace)::", "").removeprefix("void ")


def _status_word(status: Status) -> str:
    return "not run" if status == Status.not_run else status.value


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.2f} s"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g} ms"


# Phases outside the stages, as a verdict names them; `begin` is left out: it is the sum of the
# worker's own phases (spawn … load) and the queue, each listed.
_PHASES = {
    "queue": "waiting for the worker",
    "spawn": "starting the runner",
    "runner_ready": "runner ready",
    "gpu_lock": "waiting for the GPU (another worker's candidate)",
    "judge_setup": "judge set-up",
    "baseline": "baseline",
    "load": "loading the candidate",
    "names": "naming kernels",
    "end": "ending",
}


def time_line(result: EvalResult) -> str | None:
    """Where the evaluation's wall time went: the build, the GPU tiers, and each phase outside the stages
    that took a hundredth of a second or more (the rest of a warm evaluation's time)."""
    if result.duration_s is None:
        return None
    seconds = {name: stage.duration_s or 0.0 for name, stage in result.stages_that_ran()}
    tiers = {name: seconds[name] for name in ("correctness", "timing", "dynamic") if name in seconds}
    build = seconds.get("build", 0.0) + seconds.get("static", 0.0)
    line = f"time {result.duration_s:.2f} s: build and static {build:.2f} s"
    if tiers:
        each = ", ".join(f"{name} {value:.2f}" for name, value in tiers.items())
        line += f", GPU tiers {sum(tiers.values()):.2f} s ({each})"
    outside = [
        f"{label} {result.phases_s[name]:.2f} s"
        for name, label in _PHASES.items()
        if result.phases_s.get(name, 0.0) >= 0.01
    ]
    if outside:
        line += "; outside the stages: " + ", ".join(outside)
    return line


# ---------------------------------------------------------------- per-stage detail lines (shared)


def build_lines(stage: BuildStage) -> list[str]:
    lines: list[str] = []
    if stage.status in (Status.compile_error, Status.banned, Status.unsupported) and stage.errors:
        lines.extend(error for error in stage.errors[:MAX_ERRORS] if error not in stage.message)
    for item in stage.resources[:MAX_KERNELS]:
        spills = item.spill_stores_bytes + item.spill_loads_bytes
        spill_text = (
            f"SPILLS {item.spill_stores_bytes} B stored / {item.spill_loads_bytes} B loaded"
            if spills
            else "no spills"
        )
        lines.append(
            f"ptxas {short_kernel(item.kernel)}: {item.registers if item.registers is not None else '?'} registers, "
            f"{spill_text}, stack {item.stack_frame_bytes} B, smem {item.shared_bytes} B"
        )
    if len(stage.resources) > MAX_KERNELS:
        lines.append(f"(+{len(stage.resources) - MAX_KERNELS} more kernels)")
    grouped: dict[tuple[str | None, str, str | None], list[str]] = {}
    for warning in stage.warnings:
        grouped.setdefault((warning.code, warning.kind, warning.kernel), []).append(warning.text)
    for (code, kind, _), texts in list(grouped.items())[:MAX_ERRORS]:
        times = f" (x{len(texts)})" if len(texts) > 1 else ""
        lines.append(f"warning {code + ' ' if code else ''}[{kind}]{times}: {texts[0]}")
    if len(grouped) > MAX_ERRORS:
        lines.append(f"(+{len(grouped) - MAX_ERRORS} more kinds of warning)")
    return lines


def static_lines(stage: StaticStage) -> list[str]:
    if stage.status == Status.not_run:
        return []
    lines = []
    if stage.families:
        lines.append(
            "families: " + ", ".join(f"{family} {count}" for family, count in stage.families.items())
        )
    # Present or missing only where the SASS was read: a stage that could not run found nothing.
    if stage.required_family and stage.status in (Status.passed, Status.static_missing_family):
        state = "present" if stage.required_present else "MISSING"
        lines.append(f"required {stage.required_family}: {state}")
    return lines


def correctness_lines(stage: CorrectnessStage) -> list[str]:
    lines: list[str] = []
    failed = [trial for trial in stage.trials if not trial.passed]
    if stage.trials:
        lines.append(
            f"{len(stage.trials) - len(failed)}/{len(stage.trials)} trials passed (atol {stage.atol}, rtol {stage.rtol})"
        )
    for trial in failed[:2]:
        for check in trial.outputs.values():
            if check.passed:
                continue
            parts = [
                f"trial seed {trial.seed}{' (fresh addresses)' if trial.fresh_addresses else ''}: {check.name}"
            ]
            if check.reason:
                parts.append(check.reason)
            if check.max_abs_error is not None:
                parts.append(f"max abs err {check.max_abs_error:.4g}")
            if check.max_rel_error is not None:
                parts.append(f"max rel err {check.max_rel_error:.4g}")
            if check.matched_ratio is not None:
                parts.append(f"matched {check.matched_ratio:.2%}")
            if check.worst_index is not None and "worst at" not in (check.reason or ""):  # said once
                worst = f"worst at {check.worst_index}"
                if check.worst_value is not None and check.worst_expected is not None:
                    worst += f": got {check.worst_value:.6g}, expected {check.worst_expected:.6g}"
                parts.append(worst)
            lines.append(", ".join(parts))
    return lines


def _bytes(value: int) -> str:
    return f"{value / 1024:.1f} KiB" if value >= 1024 else f"{value} B"


def launch_line(launch: KernelLaunch, names: dict[str, str]) -> str:
    """One launch configuration, its shared memory and theoretical occupancy."""
    head = f"{short_kernel(names.get(launch.kernel, launch.kernel))}" + (
        f" ×{launch.count}" if launch.count > 1 else ""
    )
    shape = []
    if launch.grid is not None and launch.block is not None:
        shape.append(f"{launch.grid:,} blocks × {launch.block} threads")
    if launch.registers is not None:
        shape.append(f"{launch.registers} regs")
    if launch.dynamic_smem is not None or launch.static_smem is not None:
        smem = f"smem {_bytes(launch.dynamic_smem or 0)} dynamic + {_bytes(launch.static_smem or 0)} static"
        if launch.shared_config:
            smem += f" (carveout {_bytes(launch.shared_config)})"
        shape.append(smem)
    line = f"{head}: {', '.join(shape)}" if shape else head
    if launch.blocks_per_sm is not None and launch.warps_per_sm is not None and launch.max_warps:
        # The record keeps Occupancy's own limiter as a string ("?" where it has none): it is only printed.
        limiter = cast(Limiter, launch.limiter or "?")
        occupancy = Occupancy(launch.blocks_per_sm, launch.warps_per_sm, launch.max_warps, limiter)
        line += f"; occupancy {occupancy.describe()}"
    return line


def dynamic_lines(stage: DynamicStage, names: dict[str, str] | None = None) -> list[str]:
    names = names or {}
    lines: list[str] = []
    if stage.kernels:
        shown = ", ".join(short_kernel(names.get(k, k)) for k in stage.kernels[:MAX_KERNELS])
        more = f" (+{len(stage.kernels) - MAX_KERNELS} more)" if len(stage.kernels) > MAX_KERNELS else ""
        lines.append(f"kernels profiled{f' with {stage.tool}' if stage.tool else ''}: {shown}{more}")
    if stage.executed_families:
        lines.append(
            "executed (predicate-true threads): "
            + ", ".join(f"{family} {count:,}" for family, count in stage.executed_families.items())
        )
    if stage.status != Status.not_run:
        lines.append(f"required family executed: {'yes' if stage.required_executed else 'NO'}")
    if stage.tensor_share is not None:
        detail = ""
        if stage.tensor_flops is not None and stage.task_flops is not None:
            detail = f" ({stage.tensor_flops:.3g} of {stage.task_flops:.3g} FLOP)"
        lines.append(f"tensor-pipe FLOP share: {stage.tensor_share:.1%}{detail}")
    if stage.other_work_share is not None:
        lines.append(
            f"the same work on other paths (at least): {stage.other_work_share:.1%} of the task's FLOPs"
        )
    if stage.negated_passed is not None:
        answer = (
            "still right: it does not depend on them" if stage.negated_passed else "wrong: it depends on them"
        )
        lines.append(
            f"{stage.instructions_per_flop or 0.0:.2f} instructions per FLOP beside the required family; built "
            f"with every wgmma's A negated, its answer was {answer}"
        )
    if stage.ordinary_load_share is not None:
        lines.append(
            f"bytes fetched by ordinary loads (LDG missing L1, LDGSTS, atomics): {stage.ordinary_load_share:.1%} of the "
            "task's minimum; the copy engine must carry the rest"
        )
    lines.extend(f"launch {launch_line(launch, names)}" for launch in stage.launches[:MAX_KERNELS])
    if stage.sm_throughput_pct is not None and stage.memory_throughput_pct is not None:
        lines.append(
            f"ncu's SpeedOfLight throughput: compute (SM) {stage.sm_throughput_pct:.0f}% · memory "
            f"{stage.memory_throughput_pct:.0f}% of peak"
        )
    waited = where_warps_waited(stage, names)
    if waited:
        lines.append(waited)
    return lines


def where_warps_waited(stage: DynamicStage, names: dict[str, str] | None = None, top: int = 5) -> str:
    """The instructions ncu's warp-state samples found warps at most often, each with its share of the
    samples and its main stall reasons: where the kernel's time goes, by line where the line table said."""
    names = names or {}
    rows = [(kernel, row) for kernel, counts in stage.source_counts.items() for row in counts if row.samples]
    total = sum(row.samples for _, row in rows)
    if not total:
        return ""
    several = len({kernel for kernel, _ in rows}) > 1
    shown = []
    for kernel, row in sorted(rows, key=lambda item: -item[1].samples)[:top]:
        where = (
            f"kernel.cu:{row.line} {row.opcode}" if row.line else f"{row.opcode} at +0x{row.offset or 0:x}"
        )
        if several:
            where = f"{short_kernel(names.get(kernel, kernel))} {where}"
        reasons = row.stall_text(2)
        shown.append(f"{where} {row.samples / total:.0%}" + (f" ({reasons})" if reasons else ""))
    return f"where the warps were (ncu's {total:,} warp samples): " + " · ".join(shown)


def _stats(stats: TimingStats) -> str:
    return f"{stats.name} median {_ms(stats.median_ms)} [p25 {_ms(stats.p25_ms)}, p75 {_ms(stats.p75_ms)}]"


def timing_lines(stage: TimingStage) -> list[str]:
    lines: list[str] = []
    if stage.status != Status.not_run and stage.method:
        flush = f", L2 flushed ({stage.l2_flush_bytes / 1e6:.0f} MB)" if stage.l2_flush_bytes else ""
        checked = (
            f", every timed call's outputs checked ({stage.calls_checked})" if stage.calls_checked else ""
        )
        lines.append(
            f"{stage.method} timestamps, {stage.warmup} warm-up + {stage.iterations} timed iterations{flush}{checked}"
        )
    if stage.settings_set_aside:
        lines.append(
            f"the candidate changed the context's {', '.join(stage.settings_set_aside)}: set back for the "
            "baselines' calls, given back for its own"
        )
    if stage.candidate is not None:
        lines.append(_stats(stage.candidate))
    lines.extend(_stats(baseline) for baseline in stage.baselines)
    if stage.speedup is not None:
        lines.append(
            f"speedup vs {stage.baselines[0].name if stage.baselines else 'baseline'}: {stage.speedup:.3f}x"
        )
    rates = rates_text(stage.tflops, stage.tbps, stage.light_bound)
    if stage.light_share is not None and stage.light_bound is not None:
        rates.append(f"{stage.light_share:.0%} of the speed of light ({stage.light_bound}-bound)")
    if rates:
        lines.append(" · ".join(rates))
    if stage.faster_than_light:
        lines.append(
            f"FASTER THAN THE SPEED OF LIGHT ({_ms(stage.speed_of_light_ms)}): the measurement is suspect"
        )
    return lines


def stage_lines(name: str, stage: StageBase, names: dict[str, str] | None = None) -> list[str]:
    # By the stage's class, which `Stages` fixes for each name, so each detail function gets its own type.
    if isinstance(stage, DynamicStage):
        return dynamic_lines(stage, names)
    if isinstance(stage, BuildStage):
        return build_lines(stage)
    if isinstance(stage, StaticStage):
        return static_lines(stage)
    if isinstance(stage, CorrectnessStage):
        return correctness_lines(stage)
    if isinstance(stage, TimingStage):
        return timing_lines(stage)
    raise KeyError(name)


# ---------------------------------------------------------------- agent feedback


def feedback_text(result: EvalResult) -> str:
    """What the agent reads after an evaluation: the verdict, then each tier in a few lines."""
    lines = [f"Verdict: {_status_word(result.status)} — {result.message}".rstrip(" —")]
    for name, stage in result.stages.in_order():
        head = f"[{name}] {_status_word(stage.status)}"
        if stage.status != Status.not_run and stage.message and not result.message.endswith(stage.message):
            head += f": {stage.message}"
        lines.append(head)
        lines.extend(f"  {line}" for line in stage_lines(name, stage, result.kernel_names))
    if result.seed is not None:
        lines.append(f"inputs from seed {result.seed} (ptxwb eval --seed {result.seed} replays them)")
    return "\n".join(lines)


# ---------------------------------------------------------------- terminal


_STYLE = {Status.passed: "bold green", Status.not_run: "dim"}


def rich_verdict(result: EvalResult) -> RenderableType:
    """A table of the five tiers with their details, under a one-line verdict."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    title = f"{result.task} · {result.target} · executor {result.executor}"
    if result.device:
        title += f" · {result.device}"
    if result.workload_axes:
        title += " · " + ", ".join(f"{k}={v}" for k, v in result.workload_axes.items())
    if result.seed is not None:
        title += f" · seed {result.seed}"
    table = Table(title=title, show_lines=True, expand=False)
    table.add_column("stage", style="bold")
    table.add_column("status")
    table.add_column("time", justify="right")
    table.add_column("details", overflow="fold")
    for name, stage in result.stages.in_order():
        style = _STYLE.get(stage.status, "bold red")
        details = [stage.message] if stage.message and stage.status != Status.not_run else []
        details.extend(stage_lines(name, stage, result.kernel_names))
        if isinstance(stage, BuildStage) and stage.cache_hit:
            details.append("(build cache hit)")
        table.add_row(
            name,
            Text(_status_word(stage.status), style=style),
            _seconds(stage.duration_s),
            Text("\n".join(details)),
        )
    partial = result.status == Status.not_run and result.stages_that_ran()
    style = "bold yellow" if partial else _STYLE.get(result.status, "bold red")
    verdict = Text(f"verdict: {_status_word(result.status)}", style=style)
    verdict.append(f" — {result.message}" if result.message else "", style="default")
    spent = time_line(result)
    return Group(table, verdict, Text(spent, style="dim")) if spent else Group(table, verdict)
