"""The vendor baselines a candidate is timed against, in the candidate's process, on inputs of their own.

Each baseline owns its input tensors: every timed call of it gets values no call has seen (as the
candidate's calls do), and never the values the candidate is called with, so a baseline's output is
never a correct answer for the candidate. `prepare` runs outside the timed window on the new values
(a backward's forward pass, FlashInfer's layout copies); `clear` overwrites whatever the call produced
once it is timed. Torch only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from workbench.evaluate.inputs import DTYPES, fill_poison, shape_of


@dataclass
class Baseline:
    name: str
    inputs: dict[str, torch.Tensor]
    call: Callable[[], object]
    prepare: Callable[[], None] = lambda: None
    clear: Callable[[], None] = lambda: None
    state: dict = field(default_factory=dict)


def input_buffers(spec: dict, device: str) -> dict[str, torch.Tensor]:
    """One empty tensor per tensor input of the task (scalars travel as values)."""
    definition, axes = spec["definition"], spec["axes"]
    scalars = {
        name for name, kind in (spec.get("workload_inputs") or {}).items() if kind.get("type") == "scalar"
    }
    return {
        name: torch.empty(shape_of(tensor, axes), dtype=DTYPES[tensor["dtype"]], device=device)
        for name, tensor in definition["inputs"].items()
        if name not in scalars
    }


def _zero(values: object) -> None:
    for value in values if isinstance(values, (list, tuple)) else [values]:
        if isinstance(value, (list, tuple)):
            _zero(value)
        elif isinstance(value, torch.Tensor):
            value.zero_()


def _returning(name: str, inputs: dict[str, torch.Tensor], function: Callable[[], object]) -> Baseline:
    """A baseline whose call returns new tensors: they are zeroed once timed."""
    baseline = Baseline(name, inputs, call=lambda: None)

    def call() -> object:
        baseline.state["out"] = function()
        return baseline.state["out"]

    def clear() -> None:
        _zero(baseline.state.pop("out", None))

    baseline.call, baseline.clear = call, clear
    return baseline


def make_baselines(spec: dict, device: str = "cuda") -> tuple[list[Baseline], list[str]]:
    """The baselines for the task family (the first is the one speedup is measured against), and notes
    on baselines left out."""
    family = spec.get("family")
    inputs = input_buffers(spec, device)
    if family == "gemm":
        a, b = inputs["A"], inputs["B"]
        out = torch.empty(a.shape[0], b.shape[0], dtype=a.dtype, device=device)
        return [
            Baseline(
                "cuBLAS (torch.matmul)",
                inputs,
                call=lambda: torch.matmul(a, b.T, out=out),
                clear=lambda: fill_poison(out),
            )
        ], []
    if family not in ("attention_forward", "attention_backward"):
        return [], [f"no baseline for the task family {family!r}"]
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    causal = bool(spec.get("causal"))

    def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    if family == "attention_forward":
        from workbench.evaluate import flashinfer_baseline

        q, k, v = inputs["Q"], inputs["K"], inputs["V"]
        baselines = [_returning("cuDNN SDPA", inputs, lambda: forward(q, k, v))]
        missing = flashinfer_baseline.readiness(int(q.shape[-1]))
        if missing:
            return baselines, [f"second baseline left out: {missing}"]
        own = input_buffers(spec, device)
        layout: dict = {}
        second = _returning(flashinfer_baseline.NAME, own, lambda: layout["call"]())
        second.prepare = lambda: layout.update(
            call=flashinfer_baseline.forward_call(own["Q"], own["K"], own["V"], causal)
        )
        return [*baselines, second], []
    backward = Baseline("cuDNN SDPA backward", inputs, call=lambda: None)

    def prepare_backward() -> None:
        leaves = [inputs[name].detach().clone().requires_grad_(True) for name in ("Q", "K", "V")]
        backward.state.update(leaves=leaves, out=forward(*leaves))

    def call_backward() -> object:
        state = backward.state
        state["grads"] = torch.autograd.grad(state["out"], state["leaves"], inputs["dO"])
        return state["grads"]

    def clear_backward() -> None:
        _zero(backward.state.pop("grads", None))
        backward.state.clear()

    backward.prepare, backward.call, backward.clear = prepare_backward, call_backward, clear_backward
    return [backward], []
