"""`ptxwb tasks` and `ptxwb task NAME|PATH.json`."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from workbench.cli.output import console, print_json
from workbench.tasks import TARGETS, Catalogue, Task, resolve_task
from workbench.tasks.baselines import BASELINE_TITLES
from workbench.units import fmt_bytes, fmt_flops

_SHORT_FAMILY = {"gemm": "gemm", "attention_forward": "attn fwd", "attention_backward": "attn bwd"}

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _summary(task: Task) -> dict[str, Any]:
    facts = task.facts
    return {
        "name": task.name,
        "op_type": task.definition.op_type,
        "family": facts.family if facts else None,
        "causal": facts.causal if facts else None,
        "headline": bool(facts and facts.headline),
        "baseline": facts.baseline if facts else None,
        "required": {target: task.target(target).required_family for target in TARGETS},
        "workloads": len(task.workloads),
    }


def _details(task: Task) -> dict[str, Any]:
    facts = task.facts
    definition = task.definition
    headline = facts.headline_workload if facts else None
    workloads = []
    for workload in task.workloads:
        workloads.append(
            {
                "uuid": workload.uuid,
                "axes": workload.axes,
                "headline": workload.uuid == headline,
                "seed": task.seed(workload),
                "flops": task.flops(workload),
                "min_bytes": task.min_bytes(workload),
                "speed_of_light_ms": task.speed_of_light_ms(workload),
            }
        )
    return {
        **_summary(task),
        "source": str(task.source) if task.source else None,
        "description": definition.description,
        "axes": {name: axis.model_dump(exclude_none=True) for name, axis in definition.axes.items()},
        "inputs": {n: s.model_dump(exclude_none=True) for n, s in definition.inputs.items()},
        "outputs": {n: s.model_dump(exclude_none=True) for n, s in definition.outputs.items()},
        "atol": facts.atol if facts else None,
        "rtol": facts.rtol if facts else None,
        "matched_ratio": facts.matched_ratio if facts else None,
        "outlier_bound": facts.outlier_bound if facts else None,
        "tolerance": facts.tolerance_text() if facts else None,
        "output_tolerances": facts.output_tolerances_json() if facts else {},
        "workloads": workloads,
    }


def tasks(as_json: JsonOpt = False) -> None:
    """List the task catalogue (the five headline tasks are the paper's benchmark)."""
    catalogue = Catalogue.load()
    rows = [_summary(task) for task in catalogue.tasks.values()]
    if as_json:
        print_json(rows)
        return
    table = Table(title=f"{len(rows)} tasks (★ headline: the paper's benchmark)", title_justify="left")
    table.add_column("task", no_wrap=True)
    # The required columns name the instruction family each target's SASS must hold for the task.
    for column in ("family", "causal", "baseline", *TARGETS, "workloads", "★"):
        table.add_column(column)
    for row in rows:
        family = _SHORT_FAMILY.get(row["family"], row["family"] or "?")
        table.add_row(
            row["name"],
            family,
            "yes" if row["causal"] else "",
            BASELINE_TITLES[row["baseline"]].short if row["baseline"] else "?",
            *(row["required"][target] for target in TARGETS),
            str(row["workloads"]),
            "★" if row["headline"] else "",
        )
    console().print(table)


def task(
    name: Annotated[str, typer.Argument(help="A catalogue task name or a Definition JSON file.")],
    as_json: JsonOpt = False,
) -> None:
    """Show one task: axes, tensors, workloads, FLOPs, minimum bytes, speed of light per GPU."""
    details = _details(resolve_task(name))
    if as_json:
        print_json(details)
        return
    out = console()
    star = "  ★ headline task" if details["headline"] else ""
    # The op type, and the family where it says more (a GEMM's is `gemm` twice).
    kinds = list(dict.fromkeys([details["op_type"], details["family"] or "unknown family"]))
    out.print(f"[bold]{details['name']}[/bold]  ({', '.join(kinds)}){star}")
    # Descriptions and shapes hold brackets (`kv_indices[kv_indptr[b]]`, `q[batch_size, ...]`): plain text.
    if details["description"]:
        out.print(details["description"], markup=False)
    axes = ", ".join(
        f"{n}={a['value']}" if a["type"] == "const" else f"{n} (var)" for n, a in details["axes"].items()
    )
    out.print(f"axes: {axes}")
    for group in ("inputs", "outputs"):
        specs = ", ".join(f"{n}[{', '.join(s['shape'])}] {s['dtype']}" for n, s in details[group].items())
        out.print(f"{group}: {specs}", markup=False)
    required = ", ".join(f"{family} on {target}" for target, family in details["required"].items())
    out.print(f"required: {required}")
    if details["baseline"]:
        out.print(f"baseline: {BASELINE_TITLES[details['baseline']].long}", markup=False)
    if details["tolerance"]:
        out.print(f"tolerance: {details['tolerance']}", markup=False)
    table = Table(title="workloads", title_justify="left")
    for column in ("uuid", "axes", "seed", "FLOPs", "min bytes", "SoL H100 ms", "SoL H200 ms", "SoL B200 ms"):
        table.add_column(column)
    for w in details["workloads"]:
        sol = w["speed_of_light_ms"]
        table.add_row(
            w["uuid"][:8] + (" ★" if w["headline"] else ""),
            ", ".join(f"{k}={v}" for k, v in w["axes"].items()),
            str(w["seed"]),
            fmt_flops(w["flops"]),
            fmt_bytes(w["min_bytes"]),
            *(f"{sol[d]:.3f}" if d in sol else "—" for d in ("H100", "H200", "B200")),
        )
    out.print(table)
