"""The home screen's task pane: what a task asks for, at the workload a run judges by default."""

from __future__ import annotations

from rich.text import Text

from workbench.tasks import TARGETS, Task
from workbench.tasks.baselines import BASELINE_TITLES
from workbench.units import fmt_bytes, fmt_flops


def render_task(task: Task) -> Text:
    definition, facts = task.definition, task.facts
    text = Text()
    text.append(task.name, style="bold")
    if facts and facts.headline:
        text.append("  ★ headline", style="yellow")
    family = facts.family.replace("_", " ") if facts else definition.op_type
    baseline = BASELINE_TITLES[facts.baseline].short if facts else "none"
    text.append(
        f"\n{family}{' · causal' if facts and facts.causal else ''} · baseline {baseline}", style="dim"
    )
    required = " · ".join(f"{task.target(target).required_family} on {target}" for target in TARGETS)
    text.append(f"\nrequired {required}", style="dim")
    if definition.description:
        text.append(f"\n{definition.description.strip().splitlines()[0]}")
    axes = ", ".join(
        f"{name}={axis.value}" if axis.type == "const" else f"{name} (var)"
        for name, axis in definition.axes.items()
    )
    text.append(f"\n\naxes     {axes}")
    for label, specs in (("inputs  ", definition.inputs), ("outputs ", definition.outputs)):
        shapes = ", ".join(f"{name}[{', '.join(spec.shape)}] {spec.dtype}" for name, spec in specs.items())
        text.append(f"\n{label} {shapes}")
    workload = task.workload()
    at = ", ".join(f"{k}={v}" for k, v in workload.axes.items()) or "no var axes"
    text.append(f"\n\nworkload {at}", style="bold")
    text.append(f"  · the default of {len(task.workloads)} workloads" if len(task.workloads) > 1 else "")
    text.append(
        f"\nFLOPs    {fmt_flops(task.flops(workload))} · min bytes {fmt_bytes(task.min_bytes(workload))}"
    )
    light = task.speed_of_light_ms(workload)
    if light:
        shown = " · ".join(f"{device} {ms:.3f} ms" for device, ms in light.items())
        text.append(f"\nspeed of light  {shown}")
    return text
