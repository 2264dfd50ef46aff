"""The verdict pane: the five tiers of one `EvalResult` with their evidence.

Build, static SASS, correctness, executed instructions (Nsight Compute) and timing; a tier that did
not run says "not run" and why, never "passed".
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from workbench.evaluate.gpu.timing import rates_text
from workbench.evaluate.render import launch_line, time_line
from workbench.evaluate.request import Progress
from workbench.evaluate.result import EvalResult, OutputCheck, Status
from workbench.tui.artifacts import first_error_line
from workbench.tui.families import families_for

TIER_TITLES = {
    "build": "build",
    "static": "SASS",
    "correctness": "correct",
    "dynamic": "executed",
    "timing": "timing",
}


MAX_LAUNCHES = 3


def status_style(status: Status) -> str:
    if status == Status.passed:
        return "bold green"
    if status == Status.not_run:
        return "dim"
    return "bold red"


def status_icon(status: Status) -> str:
    return {Status.passed: "✔", Status.not_run: "·"}.get(status, "✘")


def _count(value: float) -> str:
    return f"{value:,.0f}"


def why_not_run(message: str) -> str:
    """A skipped stage's reason without its own "not run" (the pane already says it once)."""
    stripped = message.strip()
    if stripped.lower().startswith("not run"):
        stripped = stripped[len("not run") :].lstrip(" :;,—-")
    return stripped


def build_evidence(result: EvalResult) -> str:
    build = result.stages.build
    if build.status not in (Status.passed, Status.not_run):
        line = first_error_line(result)
        first = build.errors[0] if build.errors else build.message
        where = f"line {line}: " if line else ""
        return f"{where}{first.strip()}" if first else build.message
    if not build.resources:
        return build.message
    parts = []
    for kernel in build.resources[:2]:
        spills = kernel.spill_stores_bytes + kernel.spill_loads_bytes
        parts.append(
            f"{kernel.registers if kernel.registers is not None else '?'} regs"
            + (f", {spills} B spilled" if spills else "")
            + (f", {kernel.shared_bytes:,} B static smem" if kernel.shared_bytes else "")
        )
    more = f" (+{len(build.resources) - 2} kernels)" if len(build.resources) > 2 else ""
    cache = " · cached" if build.cache_hit else ""
    return "; ".join(parts) + more + cache


def static_evidence(result: EvalResult) -> str:
    static = result.stages.static
    if static.status == Status.not_run:
        return why_not_run(static.message)
    family = static.required_family or "?"
    count = static.families.get(family, 0)
    if static.required_present:
        return f"{family} present ({count} instruction{'' if count == 1 else 's'})"
    return static.message or f"required {family} missing from the SASS"


def output_evidence(name: str, checks: list[OutputCheck]) -> str:
    """One output's worst errors over the trials: each number is this output's, never another's."""
    worst_abs = max((c.max_abs_error for c in checks if c.max_abs_error is not None), default=None)
    worst_rel = max((c.max_rel_error for c in checks if c.max_rel_error is not None), default=None)
    matched = min((c.matched_ratio for c in checks if c.matched_ratio is not None), default=None)
    parts = []
    if worst_abs is not None:
        parts.append(f"max abs err {worst_abs:.3g}")
    if worst_rel is not None:
        parts.append(f"rel {worst_rel:.3g}")
    if matched is not None:
        parts.append(f"matched {matched:.2%}")
    failing = [c.reason for c in checks if not c.passed and c.reason]
    if failing:
        parts.append(failing[0])
    return f"{name}: {' · '.join(parts) or 'checked'}"


def correctness_evidence(result: EvalResult) -> str:
    stage = result.stages.correctness
    if stage.status == Status.not_run:
        return why_not_run(stage.message)
    passed = sum(1 for t in stage.trials if t.passed)
    by_output: dict[str, list[OutputCheck]] = {}
    for trial in stage.trials:
        for name, check in trial.outputs.items():
            by_output.setdefault(name, []).append(check)
    lines = [output_evidence(name, checks) for name, checks in by_output.items()]
    head = f"{passed}/{len(stage.trials)} trials"
    if len(lines) == 1:
        return f"{head} · {lines[0]}"
    return "\n".join([head, *lines])


def dynamic_evidence(result: EvalResult) -> str:
    stage = result.stages.dynamic
    if stage.status == Status.not_run:
        return why_not_run(stage.message)
    family = result.stages.static.required_family
    parts = []
    if family:
        threads = stage.executed_families.get(family, 0)
        parts.append(
            f"{family} executed by {_count(threads)} threads" if threads else f"{family} never executed"
        )
    if stage.tensor_share is not None:
        parts.append(f"tensor-FLOP share {stage.tensor_share:.1%}")
    if stage.ordinary_load_share is not None:
        parts.append(f"ordinary loads {stage.ordinary_load_share:.1%} of the bytes")
    head = " · ".join(parts) or stage.message
    launches = [launch_line(launch, result.kernel_names) for launch in stage.launches[:MAX_LAUNCHES]]
    return "\n".join([head, *launches])


def timing_evidence(result: EvalResult) -> str:
    stage = result.stages.timing
    if stage.status == Status.not_run or stage.candidate is None:
        return why_not_run(stage.message)
    c = stage.candidate
    parts = [f"{c.median_ms:.4g} ms (p25–p75 {c.p25_ms:.4g}–{c.p75_ms:.4g})"]
    if stage.speedup is not None and stage.baselines:
        parts.append(f"{stage.speedup:.2f}× vs {stage.baselines[0].name}")
    parts.extend(rates_text(stage.tflops, stage.tbps, stage.light_bound))
    if stage.light_share is not None:
        parts.append(f"{stage.light_share:.0%} of light")
    if stage.faster_than_light:
        parts.append("FASTER THAN LIGHT: suspect")
    return " · ".join(parts)


EVIDENCE = {
    "build": build_evidence,
    "static": static_evidence,
    "correctness": correctness_evidence,
    "dynamic": dynamic_evidence,
    "timing": timing_evidence,
}


def family_table(result: EvalResult) -> Table | None:
    """Family counts in the SASS next to predicate-true threads that executed them."""
    static = result.stages.static
    dynamic = result.stages.dynamic
    names = list(families_for(result.target))
    names += [f for f in (*static.families, *dynamic.executed_families) if f not in names]
    rows = [(f, static.families.get(f), dynamic.executed_families.get(f)) for f in names]
    rows = [r for r in rows if r[1] or r[2] or r[0] == static.required_family]
    if not rows or static.status == Status.not_run:
        return None
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    table.add_column("family")
    table.add_column("in SASS", justify="right")
    table.add_column("executed (threads)", justify="right")
    ran = dynamic.status != Status.not_run
    for family, in_sass, executed in rows:
        mark = " ◀ required" if family == static.required_family else ""
        table.add_row(
            Text(family + mark, style="bold" if mark else ""),
            _count(in_sass or 0),
            _count(executed or 0) if ran else Text("not run", style="dim"),
        )
    return table


def render_verdict(result: EvalResult | None, progress: list[Progress] | None = None) -> RenderableType:
    if result is None:
        if progress:
            return render_progress(progress)
        return Text("no verdict yet for this turn", style="dim italic")
    head = Text()
    head.append(f" {result.status.value} ", style=f"reverse {status_style(result.status)}")
    if result.message:
        head.append(f"  {result.message}")
    head.append(
        f"   [{result.executor}" + (f" on {result.device}" if result.device else "") + "]", style="dim"
    )
    tiers = Table.grid(padding=(0, 1))
    tiers.add_column(width=1)
    tiers.add_column(min_width=8, style="bold", no_wrap=True)
    tiers.add_column(ratio=1)
    for name, stage in result.stages.in_order():
        style = status_style(stage.status)
        evidence = Text()
        if stage.status not in (Status.passed, Status.not_run):
            evidence.append(f"{stage.status.value} ", style=style)
        elif stage.status == Status.not_run:
            evidence.append("not run ", style="dim")
        evidence.append(EVIDENCE[name](result))
        tiers.add_row(Text(status_icon(stage.status), style=style), TIER_TITLES[name], evidence)
    parts: list[RenderableType] = [head, tiers]
    families = family_table(result)
    if families is not None:
        parts += [Text(""), families]
    warnings = result.stages.build.warnings
    if warnings:
        parts.append(Text(""))
        for warning in warnings[:4]:
            parts.append(Text(f"⚠ {warning.kind}: {warning.text}", style="yellow"))
    spent = time_line(result)
    if spent:
        parts += [Text(""), Text(spent, style="dim")]
    return Group(*parts)


def render_progress(progress: list[Progress]) -> RenderableType:
    table = Table.grid(padding=(0, 1))
    latest: dict[str, Progress] = {}
    for step in progress:
        latest[step.stage] = step
    for stage, step in latest.items():
        if step.state == "started":
            table.add_row("…", TIER_TITLES[stage], Text("running", style="bold yellow"), step.message)
        else:
            status = step.status or Status.not_run
            table.add_row(
                Text(status_icon(status), style=status_style(status)),
                TIER_TITLES[stage],
                Text(status.value, style=status_style(status)),
                step.message,
            )
    return Group(Text("evaluating…", style="bold yellow"), table)


class VerdictPane(VerticalScroll):
    """Shows the selected turn's verdict; the screen calls `show` whenever it changes."""

    ALLOW_MAXIMIZE = True  # `z` zooms the pane
    DEFAULT_CSS = """
    VerdictPane > Static { width: 1fr; }
    """

    def compose(self) -> ComposeResult:
        yield Static(Text("no verdict yet", style="dim italic"), id="verdict-body")

    def show(self, result: EvalResult | None, progress: list[Progress] | None = None) -> None:
        self.query_one("#verdict-body", Static).update(render_verdict(result, progress))
