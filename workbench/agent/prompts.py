"""The system prompt and the first user message, rendered from the template files beside this module."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template

from workbench.agent.config import AgentConfig
from workbench.evaluate.gpu.profile import MAX_ORDINARY_LOAD_SHARE
from workbench.knowledge import load_pack
from workbench.tasks import Task, Workload
from workbench.tasks.baselines import BASELINE_TITLES
from workbench.tasks.targets import Target
from workbench.units import fmt_bytes, fmt_flops

REQUIRED_WHAT = {
    "GMMA": "`wgmma.mma_async`, SASS HGMMA/QGMMA/IGMMA",
    "TCGEN05_MMA": "`tcgen05.mma`, SASS UTCHMMA/UTCQMMA/UTCIMMA/UTCOMMA",
    "QGMMA": "`wgmma.mma_async` with e4m3/e5m2 operands, SASS QGMMA",
    "UTCQMMA": "`tcgen05.mma` kind::f8f6f4, SASS UTCQMMA",
    "ASYNC_COPY": (
        "`cp.async.bulk` or `cp.async.bulk.tensor` from global memory, SASS UBLKCP/UTMALDG; the work is "
        "moving the task's bytes, so the copies must carry them: ordinary loads (LDG, cp.async) fetching "
        f"more than {MAX_ORDINARY_LOAD_SHARE:.0%} of the task's minimum bytes fail"
    ),
}


@cache
def template(name: str) -> str:
    """A template file's text (`templates/<name>`)."""
    return resources.files("workbench.agent").joinpath("templates", name).read_text(encoding="utf-8")


def render(template_name: str, **values: object) -> str:
    return Template(template(template_name)).substitute({k: str(v) for k, v in values.items()}).strip() + "\n"


@dataclass(frozen=True)
class Prompts:
    system: str
    task: str
    pack_id: str | None
    pack_hash: str | None


def target_values(target: Target) -> dict[str, object]:
    return {
        "target_name": target.name,
        "target_title": target.description.split(":")[0],
        "sm": target.sm,
        "gencode": target.gencode,
        "required_family": target.required_family,
        "required_what": REQUIRED_WHAT.get(target.required_family, target.required_family),
    }


def system_prompt(task: Task, target: Target, config: AgentConfig) -> tuple[str, str | None, str | None]:
    """Fixed instructions + the target's knowledge pack + the ABI example, for the run's language.

    The pack carries the kernel contract as its ABI chapter (`knowledge_packs/common/abi.md`; for
    Triton `common/triton_contract.md` in the pack's Triton section), so the agent's own ABI example
    (`templates/abi_example.md`, `abi_example_triton.md`) goes in only when the pack is off.
    """
    baseline = BASELINE_TITLES[task.facts.baseline].long if task.facts else "the vendor library"
    triton = config.language == "triton"
    instructions = "system_triton.md" if triton else "system.md"
    parts = [render(instructions, baseline=baseline, turns=config.turns, **target_values(target))]
    pack_id = pack_hash = None
    if config.pack:
        pack = load_pack(target.name, config.pack_variant, config.language)
        parts.append(pack.prompt_text())
        pack_id, pack_hash = pack.pack_id(), pack.sha256()
    else:
        parts.append(template("abi_example_triton.md" if triton else "abi_example.md"))
    return "\n".join(parts), pack_id, pack_hash


def _work(task: Task, workload: Workload) -> str:
    """The FLOPs, and the bytes a kernel must at least move (what bounds a memory-bound task)."""
    least = task.min_bytes(workload)
    flops = task.flops(workload)
    return (fmt_flops(flops) if flops is not None else "unknown") + (
        f", at least {fmt_bytes(least)} moved" if least else ""
    )


def _tolerance(task: Task) -> str:
    return task.facts.tolerance_text() if task.facts else "atol 0.01, rtol 0.01"


def task_prompt(task: Task, target: Target, config: AgentConfig) -> str:
    """The task definition JSON plus the target (with the family the task requires there) and workload
    facts."""
    definition = task.definition
    workload = task.workload(config.workload)
    axes = definition.axis_values(workload.axes)
    shapes_in = definition.shapes(workload.axes, "inputs")
    shapes_out = definition.shapes(workload.axes, "outputs")
    facts = task.facts
    baseline = BASELINE_TITLES[facts.baseline].long if facts else "none known"

    def fmt(shapes: dict[str, list[int]]) -> str:
        return ", ".join(f"{name} {list(shape)}" for name, shape in shapes.items())

    return render(
        "task.md",
        name=definition.name,
        description=definition.description or "",
        definition=json.dumps(definition.model_dump(mode="json", exclude_none=True), indent=2),
        signature=", ".join([*definition.inputs, *definition.outputs]),
        workload_axes=", ".join(f"{k}={v}" for k, v in axes.items()),
        input_shapes=fmt(shapes_in),
        output_shapes=fmt(shapes_out),
        flops=_work(task, workload),
        baseline=baseline,
        tolerance=_tolerance(task),
        target_speedup=f"{config.target_speedup:g}",
        turns=config.turns,
        **target_values(target),
    )


def build(task: Task, target: Target, config: AgentConfig) -> Prompts:
    system, pack_id, pack_hash = system_prompt(task, target, config)
    return Prompts(
        system=system, task=task_prompt(task, target, config), pack_id=pack_id, pack_hash=pack_hash
    )
