"""Seeded inputs for one trial of a task, and the task's reference run on them, in torch on the GPU.

Child-side (torch only, no pydantic). The task arrives as the plain `spec` dict the host built
(`gpu_spec.py`): the Definition JSON, resolved axis values, the facts, and for a backward task the
forward reference that derives O and LSE from the random Q, K, V.

References run chunked over the leading axes that every tensor shares (B and H for attention), so an
S=4096 attention reference never holds the whole B·H·S² score tensor at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3": torch.float8_e4m3fn,
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


def compile_reference(source: str) -> Callable:
    """The `run` function a definition's reference source defines."""
    namespace: dict = {"__name__": "ptxwb_reference"}
    exec(compile(source, "<reference>", "exec"), namespace)  # noqa: S102 - the task's own reference code
    return namespace["run"]


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


def _as_list(value: object) -> list[torch.Tensor]:
    if isinstance(value, (tuple, list)):
        return list(value)
    return [value]  # type: ignore[list-item]


def make_inputs(spec: dict, seed: int, device: str = "cuda") -> list[object]:
    """Inputs in definition order for one trial: random tensors from `seed`, scalars as given, and the
    derived ones (O, LSE of a backward task) from the forward reference on the random ones."""
    definition, axes = spec["definition"], spec["axes"]
    generator = torch.Generator(device=device).manual_seed(int(seed))
    derived = set(spec.get("derived_inputs") or [])
    workload_inputs = spec.get("workload_inputs") or {}
    values: dict[str, object] = {}
    for name, tensor in definition["inputs"].items():
        kind = workload_inputs.get(name, {"type": "random"})
        if name in derived:
            continue
        if kind.get("type") == "scalar":
            values[name] = kind["value"]
        elif kind.get("type", "random") == "random":
            values[name] = _random(shape_of(tensor, axes), DTYPES[tensor["dtype"]], generator, device)
        else:
            raise ValueError(f"input {name}: workload input type {kind.get('type')!r} is not supported here")
    if derived:
        forward = spec["forward"]
        function = compile_reference(forward["reference"])
        args = [values[name] for name in forward["inputs"]]
        outputs = run_reference(function, forward["definition"], axes, args)
        for name, value in zip(forward["outputs"], outputs, strict=True):
            if name in derived:
                wanted = DTYPES[definition["inputs"][name]["dtype"]]
                values[name] = value.to(wanted).reshape(shape_of(definition["inputs"][name], axes))
    return [values[name] for name in definition["inputs"]]


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


def refill(inputs: Sequence[object], fresh: Sequence[object]) -> None:
    """Copy new values into the existing input tensors (same addresses, new values)."""
    for old, new in zip(inputs, fresh, strict=True):
        if isinstance(old, torch.Tensor):
            old.copy_(new)
