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

from workbench.evaluate.gpu.inputs import DTYPES, compile_reference, fill_poison, scalar_inputs, shape_of


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


def reference_baseline(spec: dict, inputs: dict[str, torch.Tensor], why: str) -> tuple[Baseline, str]:
    """The task's own torch reference as the baseline, labelled so, where no library runs the task here
    (`why` says what is missing); and the note that says it."""
    function = compile_reference(spec["definition"]["reference"])
    scalars = scalar_inputs(spec)
    arguments = [inputs[name] if name in inputs else scalars[name] for name in spec["definition"]["inputs"]]
    return (
        _returning("torch reference (no library baseline)", inputs, lambda: function(*arguments)),
        f"timed against the task's torch reference: {why}",
    )


def make_baselines(spec: dict, device: str = "cuda") -> tuple[list[Baseline], list[str]]:
    """The baselines for the task family (the first is the one speedup is measured against), and notes
    on baselines left out."""
    family = spec.get("family")
    inputs = input_buffers(spec, device)
    if family in LIBRARY_BASELINES:
        try:
            return [LIBRARY_BASELINES[family](spec, inputs, device)], []
        except BaselineUnavailable as unavailable:
            baseline, note = reference_baseline(spec, inputs, str(unavailable))
            return [baseline], [note]
    if family == "gemm":
        return [_cublas_gemm(inputs, device)], []
    if family == "attention_forward":
        return _attention_forward(spec, inputs, device)
    if family == "attention_backward":
        return [_attention_backward(inputs, _cudnn_sdpa(bool(spec.get("causal"))))], []
    return [], [f"no baseline for the task family {family!r}"]


def _cublas_gemm(inputs: dict[str, torch.Tensor], device: str) -> Baseline:
    a, b = inputs["A"], inputs["B"]
    out = torch.empty(a.shape[0], b.shape[0], dtype=a.dtype, device=device)
    return Baseline(
        "cuBLAS (torch.matmul)",
        inputs,
        call=lambda: torch.matmul(a, b.T, out=out),
        clear=lambda: fill_poison(out),
    )


def _cudnn_sdpa(causal: bool) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    """Scaled dot-product attention forced onto cuDNN's backend."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return forward


def _attention_forward(
    spec: dict, inputs: dict[str, torch.Tensor], device: str
) -> tuple[list[Baseline], list[str]]:
    """cuDNN's SDPA, then FlashInfer's prefill on inputs of its own where FlashInfer is ready here."""
    from workbench.evaluate.gpu import flashinfer_baseline

    causal = bool(spec.get("causal"))
    forward = _cudnn_sdpa(causal)
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


def _attention_backward(
    inputs: dict[str, torch.Tensor],
    forward: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
) -> Baseline:
    """cuDNN SDPA's backward: the forward pass on fresh leaves outside the timed call, the gradients in it."""
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
    return backward


class BaselineUnavailable(Exception):
    """The library baseline cannot run here (not installed, not warmed, refused by this GPU): why."""


def _scaled_mm_blockwise(spec: dict, inputs: dict[str, torch.Tensor], device: str) -> Baseline:
    """cuBLAS's block-scaled FP8 GEMM through torch: A's per-token 1x128 scales (outer-dim-major, as
    cuBLAS wants them) and B's 128x128 block scales, bf16 out. Tried once here: a torch or GPU that
    does not offer the recipe (it is SM90-only in torch 2.12) is said in one line."""
    import torch.nn.functional as F

    if not hasattr(F, "scaled_mm") or not hasattr(F, "ScalingType"):
        raise BaselineUnavailable(f"torch {torch.__version__} has no torch.nn.functional.scaled_mm")
    a, b = inputs["A"], inputs["B"]
    scales: dict[str, torch.Tensor] = {}
    result: dict[str, torch.Tensor] = {}

    def prepare() -> None:
        scales["a"] = inputs["SF_A"].t().contiguous().t()
        scales["b"] = inputs["SF_B"].t()

    def call() -> object:
        # torch 2.11's scaled_mm takes no `out`: D comes from the caching allocator, which hands back the
        # block the previous call freed (no cudaMalloc inside the timed call).
        result["d"] = F.scaled_mm(
            a,
            b.t(),
            scales["a"],
            F.ScalingType.BlockWise1x128,
            scales["b"],
            F.ScalingType.BlockWise128x128,
            output_dtype=torch.bfloat16,
        )
        return result["d"]

    try:
        prepare()
        call()
        if a.is_cuda:
            torch.cuda.synchronize(device)
    except (RuntimeError, TypeError, ValueError, NotImplementedError) as exc:  # a CPU torch: ValueError
        raise BaselineUnavailable(
            f"block-scaled torch scaled_mm refused here: {str(exc).splitlines()[0][:160]}"
        )
    return Baseline(
        "cuBLAS block-scaled FP8 (torch scaled_mm)",
        inputs,
        call=call,
        prepare=prepare,
        clear=result.clear,
    )


def _flashinfer(kind: str) -> Callable[[dict, dict[str, torch.Tensor], str], Baseline]:
    def make(spec: dict, inputs: dict[str, torch.Tensor], device: str) -> Baseline:
        from workbench.evaluate.gpu import flashinfer_baseline

        missing = flashinfer_baseline.batch_readiness(kind)
        if missing:
            raise BaselineUnavailable(missing)
        baseline = _returning(flashinfer_baseline.BATCH_NAMES[kind], inputs, lambda: baseline.state["run"]())
        plan = flashinfer_baseline.batch_call(kind, spec, inputs, device)
        baseline.prepare = lambda: baseline.state.update(run=plan())
        return baseline

    return make


# The flash-linear-attention release whose fused call was checked against the GDN tasks' references on the
# H200 (tests/gpu/test_fla_baseline_gpu.py); another release is not trusted to mean the same flags.
FLA_VERSION = "0.6.0"


def _fla_gated_delta_rule(spec: dict, inputs: dict[str, torch.Tensor], device: str) -> Baseline:
    """flash-linear-attention's fused recurrent gated delta rule (Triton), called as a serving stack calls
    it: raw gate inputs with A_log and dt_bias, beta's sigmoid and q, k's L2 norm in the kernel, grouped
    value heads, k-last states. Only gathering the pool's states (FLA takes no index) is done outside the
    timed call; FLA writes the final state to a new tensor, so the inputs stay as they were."""
    import importlib.metadata

    try:
        version = importlib.metadata.version("fla-core")
        from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule
    except (ImportError, importlib.metadata.PackageNotFoundError) as exc:
        raise BaselineUnavailable(f"flash-linear-attention is not installed here ({exc})") from None
    if version != FLA_VERSION:
        raise BaselineUnavailable(
            f"flash-linear-attention {version} is installed; {FLA_VERSION} is the one checked"
        )
    given = scalar_inputs(spec)["scale"]
    if not isinstance(given, int | float):
        raise BaselineUnavailable(f"the task's scale is {given!r}, not a number")
    scale = float(given)
    state_name = "state" if "state" in inputs else "initial_state"
    gathered: dict[str, torch.Tensor] = {}

    def prepare() -> None:
        state = inputs[state_name]
        if "initial_state_indices" in inputs:
            state = state[inputs["initial_state_indices"].long()]
        gathered["h0"] = state

    def call() -> object:
        return fused_recurrent_gated_delta_rule(
            q=inputs["q"],
            k=inputs["k"],
            v=inputs["v"],
            g=inputs["a"],
            beta=inputs["b"],
            scale=scale,
            initial_state=gathered["h0"],
            output_final_state=True,
            use_qk_l2norm_in_kernel=True,
            use_gate_in_kernel=True,
            A_log=inputs["A_log"],
            dt_bias=inputs["dt_bias"],
            use_beta_sigmoid_in_kernel=True,
            state_v_first=True,
        )

    baseline = _returning(
        f"flash-linear-attention {FLA_VERSION} fused_recurrent_gated_delta_rule", inputs, call
    )
    baseline.prepare = prepare
    return baseline


def _cudnn_fp8_attention(spec: dict, inputs: dict[str, torch.Tensor], device: str) -> Baseline:
    """cuDNN's sdpa_fp8 graph (what PTXBench times), built here for this workload's shape, outside any
    timed window; only where `cudnn_fp8_attention --warm` checked it for the task on this host."""
    from workbench.evaluate.gpu import cudnn_fp8_attention

    missing = cudnn_fp8_attention.readiness(spec.get("task") or "")
    if missing:
        raise BaselineUnavailable(missing)
    try:
        graph = cudnn_fp8_attention.Fp8Attention(inputs, bool(spec.get("causal")))
    except Exception as exc:  # noqa: BLE001 - a graph cuDNN will not build for this shape: say why
        raise BaselineUnavailable(
            f"cuDNN's sdpa_fp8 graph could not be built for this workload ({type(exc).__name__}: "
            f"{str(exc)[:160]})"
        ) from None

    def clear() -> None:
        fill_poison(graph.o)
        fill_poison(graph.stats)

    return Baseline(cudnn_fp8_attention.NAME, inputs, call=graph.run, clear=clear)


# The library a user would pick for each family whose baseline is not cuBLAS or cuDNN (DESIGN.md, Tasks);
# where it cannot run here, the task's torch reference is timed instead and a note says why.
LIBRARY_BASELINES: dict[str, Callable[[dict, dict[str, torch.Tensor], str], Baseline]] = {
    "fp8_gemm": _scaled_mm_blockwise,
    "gqa_paged_decode": _flashinfer("paged_decode"),
    "gqa_paged_prefill": _flashinfer("paged_prefill"),
    "gqa_ragged_prefill": _flashinfer("ragged_prefill"),
    "fp8_attention_forward": _cudnn_fp8_attention,
    "gdn_decode": _fla_gated_delta_rule,
    "gdn_mtp": _fla_gated_delta_rule,
}
