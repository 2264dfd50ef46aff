"""FLOPs and the fewest bytes a task's workload must move, per task family.

Conventions (those of FlashAttention and PTXBench): a GEMM is 2·M·N·K; attention forward is two
matrix products, 4·B·H·S²·D; backward is five, 10·B·H·S²·D. Causal variants count only the
S·(S+1)/2 query-key pairs that the mask keeps.
"""

from __future__ import annotations

from workbench.tasks.models import DTYPE_BYTES, Definition, TaskFacts


def _pairs(seq: int, causal: bool) -> float:
    return seq * (seq + 1) / 2 if causal else float(seq * seq)


def flops(definition: Definition, facts: TaskFacts, var_values: dict[str, int]) -> float:
    ax = definition.axis_values(var_values)
    if facts.family == "gemm":
        return 2.0 * ax["M"] * ax["N"] * ax["K"]
    per_pair = 4.0 if facts.family == "attention_forward" else 10.0
    return per_pair * ax["B"] * ax["H"] * ax["D"] * _pairs(ax["S"], facts.causal)


def min_bytes(definition: Definition, var_values: dict[str, int]) -> float:
    """Every input read once and every output written once."""
    total = 0.0
    for which in ("inputs", "outputs"):
        specs = definition.inputs if which == "inputs" else definition.outputs
        for name, shape in definition.shapes(var_values, which).items():
            count = 1
            for dim in shape:
                count *= dim
            total += count * DTYPE_BYTES[specs[name].dtype]
    return total
