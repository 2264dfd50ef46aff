"""FLOPs and the fewest bytes a task's workload must move, per task family.

Conventions (those of FlashAttention and PTXBench): a GEMM is 2·M·N·K; attention forward is two
matrix products, 4·B·H·S²·D; backward is five, 10·B·H·S²·D. Causal variants count only the
S·(S+1)/2 query-key pairs that the mask keeps. A task whose sidecar entry gives `flops` or
`min_bytes` as an expression over its axes is counted by that expression instead (the paged, ragged
and recurrent tasks, whose work depends on how the workload splits its tokens into sequences).
"""

from __future__ import annotations

from workbench.tasks.models import DTYPE_BYTES, Definition, TaskFacts


def split(total: int, parts: int) -> list[int]:
    """How a workload splits `total` tokens over `parts` sequences: the i-th (from 0) gets a share
    proportional to i + 1, so lengths are ragged yet fixed by the axes. The tasks' input generators
    (their reference modules) split the same way; a test holds the two equal."""
    weight = parts * (parts + 1) // 2
    bounds = [total * i * (i + 1) // 2 // weight for i in range(parts + 1)]
    return [bounds[i + 1] - bounds[i] for i in range(parts)]


def causal_pairs(queries: list[int], keys: list[int]) -> int:
    """Query-key pairs a bottom-right causal mask keeps over requests of `queries[i]` queries and
    `keys[i]` keys: query r of a request sees keys j <= r + keys - queries."""
    total = 0
    for nq, nk in zip(queries, keys, strict=True):
        total += nq * (nk - nq) + nq * (nq + 1) // 2 if nk >= nq else nk * (nk + 1) // 2
    return total


_HELPERS = {"split": split, "causal_pairs": causal_pairs, "sum": sum, "min": min, "max": max}


def evaluate(expression: str, axes: dict[str, int]) -> float:
    """A sidecar expression over the axis values (and the helpers above), as a float."""
    code = compile(expression, "<task expression>", "eval")
    unknown = set(code.co_names) - set(axes) - set(_HELPERS)
    if unknown:
        raise ValueError(f"expression {expression!r} names {', '.join(sorted(unknown))}")
    # The catalogue's own expressions, with no builtins but the helpers above.
    return float(eval(code, {"__builtins__": {}, **_HELPERS}, dict(axes)))


def _pairs(seq: int, causal: bool) -> float:
    return seq * (seq + 1) / 2 if causal else float(seq * seq)


def flops(definition: Definition, facts: TaskFacts, var_values: dict[str, int]) -> float:
    ax = definition.axis_values(var_values)
    if facts.flops is not None:
        return evaluate(facts.flops, ax)
    if facts.family == "gemm":
        return 2.0 * ax["M"] * ax["N"] * ax["K"]
    per_pair = 4.0 if facts.family == "attention_forward" else 10.0
    return per_pair * ax["B"] * ax["H"] * ax["D"] * _pairs(ax["S"], facts.causal)


# Attention families: FLOPs the task counts per query-key score and unit of head dimension (forward's
# two products 4, backward's five 10), and the axis naming the head dimension.
PER_SCORE_PER_DIM = {
    "attention_forward": 4.0,
    "fp8_attention_forward": 4.0,
    "gqa_paged_prefill": 4.0,
    "gqa_ragged_prefill": 4.0,
    "gqa_paged_decode": 4.0,
    "attention_backward": 10.0,
}
HEAD_DIM_AXES = ("D", "head_dim")


def scores(definition: Definition, facts: TaskFacts, var_values: dict[str, int]) -> float:
    """The query-key scores an attention task computes (each softmaxed once, whatever the head
    dimension), from its FLOPs; 0 for a task that scores none."""
    per_dim = PER_SCORE_PER_DIM.get(facts.family)
    if per_dim is None:
        return 0.0
    ax = definition.axis_values(var_values)
    head_dim = next(ax[name] for name in HEAD_DIM_AXES if name in ax)
    return flops(definition, facts, var_values) / (per_dim * head_dim)


def min_bytes(definition: Definition, var_values: dict[str, int], facts: TaskFacts | None = None) -> float:
    """Every tensor input read once and every output written once, unless the task counts otherwise
    (a scalar input, shape [], travels by value)."""
    if facts is not None and facts.min_bytes is not None:
        return evaluate(facts.min_bytes, definition.axis_values(var_values))
    total = 0.0
    for which in ("inputs", "outputs"):
        specs = definition.inputs if which == "inputs" else definition.outputs
        for name, shape in definition.shapes(var_values, which).items():
            if not specs[name].shape:
                continue
            count = 1
            for dim in shape:
                count *= dim
            total += count * DTYPE_BYTES[specs[name].dtype]
    return total
