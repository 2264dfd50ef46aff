"""The plain-JSON description of a task's workload that the GPU worker and its children need.

Host side (it reads the catalogue); the worker side never imports pydantic, so everything it needs
travels in this dict: the Definition JSON, the resolved axes, the seed, tolerances (with the share of
elements that must meet them), FLOPs (and an attention task's query-key scores) and bytes with the tensor-core rate they count against, the
instruction families and the one `target` requires (resolve it with `Task.target`), the smallest
workload (for memcheck), and for a backward task the forward definition whose reference derives O and
LSE from the random Q, K, V.
"""

from __future__ import annotations

from workbench.evaluate.build.sass import FAMILIES
from workbench.evaluate.result import BuildStage, StaticStage
from workbench.tasks import Catalogue, Target, Task, Workload


def _forward_task(task: Task, catalogue: Catalogue | None) -> Task | None:
    """The forward definition of a backward attention task (mha_bwd_d128_causal -> mha_with_lse_d128_causal)."""
    if not task.facts or not task.facts.derived_inputs or not task.name.startswith("mha_bwd_"):
        return None
    name = "mha_with_lse_" + task.name.removeprefix("mha_bwd_")
    return (catalogue or Catalogue.load()).get(name)


def gpu_spec(
    task: Task,
    workload: Workload,
    target: Target,
    catalogue: Catalogue | None = None,
    source_counters: bool = False,
) -> dict:
    """`source_counters`: the dynamic tier also collects per-instruction executed counts."""
    definition = task.definition
    facts = task.facts
    spec: dict = {
        "task": task.name,
        "target": target.name,
        "definition": definition.model_dump(mode="json", exclude_none=True),
        "axes": definition.axis_values(dict(workload.axes)),
        "workload_uuid": workload.uuid,
        "workload_inputs": {name: kind.model_dump(mode="json") for name, kind in workload.inputs.items()},
        "seed": task.seed(workload),
        "family": facts.family if facts else None,
        "causal": bool(facts and facts.causal),
        "derived_inputs": list(facts.derived_inputs) if facts else [],
        "atol": facts.atol if facts else 1e-2,
        "rtol": facts.rtol if facts else 1e-2,
        "matched_ratio": facts.matched_ratio if facts else 1.0,
        "outlier_bound": facts.outlier_bound if facts else None,
        "output_tolerances": facts.output_tolerances_json() if facts else {},
        "flops": task.flops(workload),
        "scores": task.scores(workload),
        "compute_dtype": facts.compute_dtype if facts else "bfloat16",
        "min_bytes": task.min_bytes(workload),
        "families": {family: sorted(ops) for family, ops in FAMILIES.items()},
        "required_family": target.required_family,
        "device": "cuda",
        "source_counters": source_counters,
    }
    smallest = task.smallest_workload() if task.workloads else workload
    spec["smallest"] = {
        "workload_uuid": smallest.uuid,
        "axes": definition.axis_values(dict(smallest.axes)),
        "flops": task.flops(smallest),
    }
    forward = _forward_task(task, catalogue)
    if forward is not None:
        spec["forward"] = {
            "definition": forward.definition.model_dump(mode="json", exclude_none=True),
            "reference": forward.definition.reference,
            "inputs": list(forward.definition.inputs),
            "outputs": list(forward.definition.outputs),
        }
    return spec


def with_build(spec: dict, build: BuildStage, static: StaticStage) -> dict:
    """`spec` with what the worker takes from the candidate's build and static tier: each matrix multiply's
    fewest FLOPs per thread in its SASS, and its library (a Triton candidate's build entry) with every
    wgmma's A negated, or why there is none."""
    extra: dict = {
        "negated_library": build.negated_library_path,
        "negated_note": build.negated_note,
        "negated_hidden": build.negated_hidden,
    }
    if static.mma_flops_per_thread:
        extra["mma_flops_per_thread"] = static.mma_flops_per_thread
    return {**spec, **extra}
