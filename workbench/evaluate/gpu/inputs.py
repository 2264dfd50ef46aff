"""Seeded inputs for one trial of a task, and the task's reference run on them, in torch on the GPU.

Child-side (torch only, no pydantic). The task arrives as the plain `spec` dict the host built
(`gpu_spec.py`): the Definition JSON, resolved axis values, the facts, and for a backward task the
forward reference that derives O and LSE from the random Q, K, V.

References run chunked over the leading axes that every tensor shares (B and H for attention), so an
S=4096 attention reference never holds the whole B·H·S² score tensor at once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import torch

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3": torch.float8_e4m3fn,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "bool": torch.bool,
}
# Elements of one S x S fp32 score block a chunk may hold (1 GiB): bounds reference memory.
CHUNK_SCORE_ELEMENTS = 1 << 28


def shape_of(tensor: dict, axes: dict[str, int]) -> list[int]:
    return [int(axes[name]) for name in tensor["shape"]]


def _reference_module(source: str) -> dict:
    namespace: dict = {"__name__": "ptxwb_reference"}
    exec(compile(source, "<reference>", "exec"), namespace)  # noqa: S102 - the task's own reference code
    return namespace


def compile_reference(source: str) -> Callable:
    """The `run` function a definition's reference source defines."""
    return _reference_module(source)["run"]


@functools.cache
def input_generator(source: str) -> Callable | None:
    """The reference module's `generate_inputs(axes, generator, device)`, where it defines one: the inputs
    a task needs beyond independent normals (page tables, block-scaled FP8, decay gates)."""
    return _reference_module(source).get("generate_inputs")


def _random(shape: list[int], dtype: torch.dtype, generator: torch.Generator, device: str) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator, device=device, dtype=torch.float32).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator, device=device).bool()
    return torch.randint(-8, 8, shape, generator=generator, device=device, dtype=dtype)


def _shared_leading_axes(definition: dict) -> list[str]:
    """Axis names that lead every input's and output's shape, in order (B, H for attention)."""
    shapes = [t["shape"] for group in ("inputs", "outputs") for t in definition[group].values()]
    shared: list[str] = []
    for position in range(min(len(s) for s in shapes)):
        names = {s[position] for s in shapes}
        if len(names) != 1:
            break
        shared.append(names.pop())
    return shared[:2]


def run_reference(
    function: Callable,
    definition: dict,
    axes: dict[str, int],
    inputs: Sequence[object],
    chunk_elements: int = CHUNK_SCORE_ELEMENTS,
) -> list[torch.Tensor]:
    """The reference outputs, in definition order; attention (an `S` axis under shared B, H) runs in
    chunks of heads so that one chunk's S x S scores stay near `chunk_elements`."""
    leading = _shared_leading_axes(definition)
    seq = int(axes.get("S", 0))
    if len(leading) < 2 or seq == 0:
        return _as_list(function(*inputs))
    per_chunk = max(1, chunk_elements // (seq * seq))
    batch, heads = int(axes[leading[0]]), int(axes[leading[1]])
    rows: list[list[list[torch.Tensor]]] = []
    for b in range(batch):
        row = []
        for h in range(0, heads, per_chunk):
            part = [x[b : b + 1, h : h + per_chunk] if isinstance(x, torch.Tensor) else x for x in inputs]
            row.append(_as_list(function(*part)))
        rows.append(row)
    count = len(rows[0][0])
    return [
        torch.cat([torch.cat([chunk[index] for chunk in row], dim=1) for row in rows], dim=0)
        for index in range(count)
    ]


def _as_list(value: torch.Tensor | tuple[torch.Tensor, ...] | list[torch.Tensor]) -> list[torch.Tensor]:
    """A reference's outputs as a list: it returns one tensor, or a tuple or list of them."""
    if isinstance(value, (tuple, list)):
        return list(value)
    return [value]


def random_inputs(spec: dict, seed: int, device: str = "cuda") -> dict[str, torch.Tensor]:
    """The random tensor inputs of one trial, drawn from `seed` in definition order: the same values in
    every process on the same device (the judge redraws them to check what the candidate was given)."""
    definition, axes = spec["definition"], spec["axes"]
    generator = torch.Generator(device=device).manual_seed(int(seed))
    derived = set(spec.get("derived_inputs") or [])
    workload_inputs = spec.get("workload_inputs") or {}
    values: dict[str, torch.Tensor] = {}
    wanted = []
    for name, tensor in definition["inputs"].items():
        kind = workload_inputs.get(name, {"type": "random"}).get("type", "random")
        if name in derived or kind == "scalar":
            continue
        if kind != "random":
            raise ValueError(f"input {name}: workload input type {kind!r} is not supported here")
        wanted.append(name)
    generate = input_generator(definition["reference"])
    if generate is not None:
        made = generate(axes, generator, device)
        return {name: made[name] for name in wanted}
    for name in wanted:
        tensor = definition["inputs"][name]
        values[name] = _random(shape_of(tensor, axes), DTYPES[tensor["dtype"]], generator, device)
    return values


def scalar_inputs(spec: dict) -> dict[str, object]:
    workload_inputs = spec.get("workload_inputs") or {}
    return {
        name: kind["value"]
        for name, kind in workload_inputs.items()
        if kind.get("type") == "scalar" and name in spec["definition"]["inputs"]
    }


def derive(spec: dict, values: dict[str, object], fast: bool = False) -> dict[str, torch.Tensor]:
    """The derived inputs (O and LSE of a backward task) from the random ones: the task's forward
    reference, or with `fast` (timed calls, which need fresh values every call) the flash-attention
    forward on a GPU, the same in the runner and the judge."""
    derived = list(spec.get("derived_inputs") or [])
    if not derived:
        return {}
    definition, axes = spec["definition"], spec["axes"]
    forward = spec["forward"]
    args = [values[name] for name in forward["inputs"]]
    if (
        fast
        and spec.get("family") == "attention_backward"
        and isinstance(args[0], torch.Tensor)
        and args[0].is_cuda
    ):
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention(
            *args[:3], 0.0, bool(spec.get("causal")), False
        )[:2]
        produced = {"O": out, "LSE": lse}
    else:
        function = compile_reference(forward["reference"])
        produced = dict(
            zip(forward["outputs"], run_reference(function, forward["definition"], axes, args), strict=True)
        )
    result = {}
    for name in derived:
        wanted = DTYPES[definition["inputs"][name]["dtype"]]
        result[name] = produced[name].to(wanted).reshape(shape_of(definition["inputs"][name], axes))
    return result


def make_inputs(spec: dict, seed: int, device: str = "cuda") -> list[object]:
    """Inputs in definition order for one trial: random tensors from `seed`, scalars as given, and the
    derived ones (O, LSE of a backward task) from the forward reference on the random ones."""
    values: dict[str, object] = {**random_inputs(spec, seed, device), **scalar_inputs(spec)}
    values.update(derive(spec, values))
    return [values[name] for name in spec["definition"]["inputs"]]


def fill_inputs(spec: dict, buffers: dict[str, torch.Tensor], seed: int, fast: bool = False) -> None:
    """New values from `seed` into the existing input tensors (same addresses)."""
    device = str(next(iter(buffers.values())).device) if buffers else "cpu"
    drawn = random_inputs(spec, seed, device)
    # The buffers hold tensor inputs only (`input_buffers`): drawn or derived, never a scalar.
    fresh = {**drawn, **derive(spec, {**drawn, **scalar_inputs(spec)}, fast)}
    for name, buffer in buffers.items():
        buffer.copy_(fresh[name])


def make_outputs(spec: dict, device: str = "cuda") -> list[torch.Tensor]:
    """Destination tensors in definition order, filled with NaN (or the dtype's max) to expose unwritten
    elements."""
    definition, axes = spec["definition"], spec["axes"]
    outputs = []
    for tensor in definition["outputs"].values():
        dtype = DTYPES[tensor["dtype"]]
        out = torch.empty(shape_of(tensor, axes), dtype=dtype, device=device)
        fill_poison(out)
        outputs.append(out)
    return outputs


def fill_poison(tensor: torch.Tensor) -> None:
    if tensor.dtype.is_floating_point:
        tensor.fill_(float("nan"))
    elif tensor.dtype == torch.bool:
        tensor.fill_(True)
    else:
        tensor.fill_(torch.iinfo(tensor.dtype).max)
