"""Tier 3, correctness: the candidate against the task's reference on fresh seeded inputs.

Per DESIGN.md: at least three trials, each seed recorded; outputs pre-filled with NaN; inputs cloned
before the call and compared after it; shape, dtype, NaN and Inf checks; an element fails only when
|x - y| > atol AND |x - y| / (|y| + eps) > rtol; max abs/rel error, matched ratio and the worst index
reported. The trials reuse the same input addresses with new values (a result cached by address is
replayed stale and caught); one extra trial uses new values at new addresses.

Torch only (no pydantic): the stage comes back as a plain dict in `CorrectnessStage`'s JSON shape.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import torch

from workbench.evaluate.inputs import (
    compile_reference,
    fill_poison,
    make_inputs,
    make_outputs,
    refill,
    run_reference,
)
from workbench.evaluate.kernel_trace import EventTrace, KernelTrace, Window

EPS = 1e-6
PASSED, NUMERICAL, SHAPE, DTYPE = "passed", "incorrect_numerical", "incorrect_shape", "incorrect_dtype"


def compare_output(
    name: str, actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float
) -> tuple[str, dict]:
    """(status, OutputCheck dict) for one output against its reference."""
    check: dict = {"name": name, "passed": False}
    if list(actual.shape) != list(expected.shape):
        check["reason"] = f"shape {list(actual.shape)}, expected {list(expected.shape)}"
        return SHAPE, check
    if actual.dtype != expected.dtype:
        check["reason"] = (
            f"dtype {str(actual.dtype).removeprefix('torch.')}, expected {str(expected.dtype).removeprefix('torch.')}"
        )
        return DTYPE, check
    x, y = actual.double(), expected.double()
    numel = x.numel()
    if numel == 0:
        check.update(passed=True, matched_ratio=1.0, max_abs_error=0.0, max_rel_error=0.0)
        return PASSED, check
    x_nan, y_nan = torch.isnan(x), torch.isnan(y)
    x_inf = torch.isinf(x) & ~torch.isinf(y)
    diff = (x - y).abs()
    rel = diff / (y.abs() + EPS)
    finite = torch.isfinite(diff)
    outside = (diff > atol) & (rel > rtol)
    bad = (outside & finite) | (x_nan != y_nan) | x_inf | (torch.isinf(y) & (x != y) & ~x_nan)
    n_bad = int(bad.sum())
    check["matched_ratio"] = 1.0 - n_bad / numel
    check["max_abs_error"] = float(diff[finite].max()) if bool(finite.any()) else None
    # Relative error only where the absolute error exceeds atol: those are the elements the rule can
    # fail; elsewhere a near-zero reference makes any rounding look like a huge relative error.
    judged = finite & (diff > atol)
    check["max_rel_error"] = float(rel[judged].max()) if bool(judged.any()) else 0.0
    # Worst: the failing element with the largest error (NaN first), else the largest error overall.
    score = torch.where(finite, diff, torch.full_like(diff, float("inf")))
    if n_bad:
        score = torch.where(bad, score, torch.full_like(score, -1.0))
    flat = int(torch.argmax(score.reshape(-1)))
    index = unravel(flat, tuple(x.shape))
    check["worst_index"] = index
    worst_value = float(x.reshape(-1)[flat])
    worst_expected = float(y.reshape(-1)[flat])
    check["worst_value"] = None if math.isnan(worst_value) else worst_value  # NaN is not JSON
    check["worst_expected"] = None if math.isnan(worst_expected) else worst_expected
    if n_bad == 0:
        check["passed"] = True
        return PASSED, check
    nan_count = int((x_nan & ~y_nan).sum())
    parts = [f"{n_bad} of {numel} elements ({n_bad / numel:.2%}) outside atol={atol:g} and rtol={rtol:g}"]
    if nan_count:
        parts.append(f"{nan_count} are NaN (outputs start as NaN: unwritten elements stay NaN)")
    if int(x_inf.sum()):
        parts.append(f"{int(x_inf.sum())} are Inf")
    shown_value = "NaN" if check["worst_value"] is None else f"{worst_value:.6g}"
    parts.append(f"worst at {index}: {shown_value}, expected {worst_expected:.6g}")
    check["reason"] = "; ".join(parts)
    return NUMERICAL, check


def unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    """The multi-index of a flat row-major position (torch.unravel_index imports sympy: 3.4 s on first use)."""
    index = []
    for size in reversed(shape):
        flat, position = divmod(flat, size)
        index.append(position)
    return index[::-1]


def changed_inputs(names: Sequence[str], before: Sequence[object], after: Sequence[object]) -> list[str]:
    """Names of the tensor inputs whose bytes differ after the call."""
    changed = []
    for name, old, new in zip(names, before, after, strict=True):
        if isinstance(old, torch.Tensor) and not torch.equal(_bits(old), _bits(new)):
            changed.append(name)
    return changed


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes, so -0.0 vs 0.0 and NaN payloads count as changes too."""
    return tensor if tensor.dtype == torch.bool else tensor.contiguous().view(torch.uint8)


def kernel_problems(
    trace: KernelTrace | EventTrace, call: Window, readback: Window, own: set[str] | None
) -> tuple[str, str] | None:
    """(status, message) when a call launched a kernel not its own (`own` None: names unknown, not
    checked; empty: the module defines none, so every launched kernel is foreign), or left work
    running unordered with the caller's stream."""
    launched = trace.kernels_in(call)
    if not launched:
        return None
    if own is not None:
        foreign = sorted({k.name for k in launched if k.name not in own})
        if foreign:
            return "foreign_kernel", (
                f"the call launched {len(foreign)} kernel(s) not defined in the candidate's module: "
                + ", ".join(foreign[:3])
            )
    after = trace.kernels_in(readback)
    if after:
        first_read = min(k.start for k in after)
        late = [k for k in launched if k.end > first_read and k.stream != after[0].stream]
        if late:
            return "runtime_error", (
                f"kernel {late[0].name} ran on another stream (id {late[0].stream}) and was still running when the "
                "caller's stream read the outputs: launch on the stream TVM-FFI hands out, or order your stream "
                "before returning"
            )
    return None


def run_correctness(
    call: Callable[..., object],
    spec: dict,
    trace: KernelTrace | EventTrace | None,
    own_kernels: set[str] | None,
    trials: int = 3,
) -> dict:
    """The correctness stage dict: `trials` same-address trials and one at fresh addresses."""
    started = time.perf_counter()
    definition = spec["definition"]
    atol, rtol = float(spec.get("atol", 1e-2)), float(spec.get("rtol", 1e-2))
    reference = compile_reference(definition["reference"])
    input_names = list(definition["inputs"])
    output_names = list(definition["outputs"])
    base_seed = int(spec["seed"])
    stage: dict = {"status": PASSED, "message": "", "atol": atol, "rtol": rtol, "trials": []}
    device = spec.get("device", "cuda")
    inputs = make_inputs(spec, base_seed, device)
    outputs = make_outputs(spec, device)
    worst_abs = worst_rel = 0.0
    for number in range(trials + 1):
        fresh = number == trials
        seed = base_seed + number
        if fresh:  # new values at new addresses, the old tensors still alive so nothing is reused
            held = (inputs, outputs)
            inputs, outputs = make_inputs(spec, seed, device), make_outputs(spec, device)
            del held
        elif number:
            refill(inputs, make_inputs(spec, seed, device))
        with torch.no_grad():
            expected = run_reference(reference, definition, spec["axes"], inputs)
        before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        for out in outputs:
            fill_poison(out)
        if trace is None:
            call(*inputs, *outputs)
            got = [snapshot(out) for out in outputs]
        else:
            trace.clear()
            with trace.window("call") as call_window:
                call(*inputs, *outputs)
            with trace.window("readback") as readback_window:
                got = [snapshot(out) for out in outputs]
        _synchronize(outputs)
        trial: dict = {"seed": seed, "passed": False, "fresh_addresses": fresh, "outputs": {}}
        stage["trials"].append(trial)
        if trace is not None:
            trace.collect()
            problem = kernel_problems(trace, call_window, readback_window, own_kernels)
            if problem:
                stage["status"], stage["message"] = problem
                break
        modified = changed_inputs(input_names, before, inputs)
        if modified:
            stage["status"] = "inputs_modified"
            stage["message"] = (
                f"trial {number + 1} (seed {seed}): the call changed input(s) {', '.join(modified)}"
            )
            break
        status = PASSED
        for name, actual, want in zip(output_names, got, expected, strict=True):
            want = want.to(actual.dtype) if want.dtype != actual.dtype and _same_kind(want, actual) else want
            out_status, check = compare_output(name, actual, want, atol, rtol)
            trial["outputs"][name] = check
            worst_abs = max(worst_abs, check.get("max_abs_error") or 0.0)
            worst_rel = max(worst_rel, check.get("max_rel_error") or 0.0)
            if out_status != PASSED and status == PASSED:
                status = out_status
                label = "the fresh-address trial" if fresh else f"trial {number + 1}"
                stage["message"] = f"{label} (seed {seed}), output {name}: {check.get('reason', '')}"
        trial["passed"] = status == PASSED
        if status != PASSED:
            stage["status"] = status
            break
        del expected, got, before
    if stage["status"] == PASSED:
        stage["message"] = (
            f"{trials} trials + 1 at fresh addresses passed; max abs error {worst_abs:.3g}, max rel error "
            f"{worst_rel:.3g} (where abs > atol)"
        )
    stage["duration_s"] = time.perf_counter() - started
    return stage


def snapshot(out: torch.Tensor) -> torch.Tensor:
    """A copy of an output made by a kernel on the caller's stream (a plain clone is a memcpy, which
    the kernel trace does not see), exact for every value: x * 1 keeps NaN, Inf and -0.0."""
    if out.dtype == torch.bool or not (
        out.dtype.is_floating_point or out.dtype in (torch.int32, torch.int64)
    ):
        return out.clone()
    try:
        return torch.mul(out, 1)
    except RuntimeError:  # a dtype without elementwise kernels (fp8)
        return out.clone()


def _synchronize(outputs: Sequence[torch.Tensor]) -> None:
    """Wait for the device (a CUDA error surfaces here); CPU tensors (the tests) need nothing."""
    if any(out.is_cuda for out in outputs):
        torch.cuda.synchronize()


def _same_kind(a: torch.Tensor, b: torch.Tensor) -> bool:
    """A reference in float32 for a bf16 output is rounded to bf16 first; a wrong dtype is still caught
    because the candidate's outputs are allocated by the evaluator in the definition's dtype."""
    return a.dtype.is_floating_point and b.dtype.is_floating_point
