"""Tier 3, correctness: the comparison of one output with its reference, made in the judge (`judge.py`).

Per DESIGN.md: outputs pre-filled with NaN by the runner; inputs compared byte for byte after the call;
shape, dtype, NaN and Inf checks; an element fails only when |x - y| > atol AND |x - y| / (|y| + eps) >
rtol; max abs/rel error, matched ratio and the worst index reported. Which trials run, at which seeds and
addresses, the worker decides (`worker.py`).

Torch only (no pydantic): checks come back as plain dicts in `OutputCheck`'s JSON shape.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from workbench.evaluate.gpu.protocol import Status

EPS = 1e-6
PASSED, NUMERICAL, SHAPE, DTYPE = (
    Status.passed,
    Status.incorrect_numerical,
    Status.incorrect_shape,
    Status.incorrect_dtype,
)


def _rms_share(diff: torch.Tensor, expected: torch.Tensor, finite: torch.Tensor) -> float | None:
    """The error's root mean square over the reference's, where both are finite: how much of the answer
    the error is (the negated build's check compares it with the candidate's own, `negated_check.py`)."""
    both = finite & torch.isfinite(expected)
    if not bool(both.any()):
        return None
    scale = float(expected[both].square().mean().sqrt())
    return float(diff[both].square().mean().sqrt()) / max(scale, EPS)


def compare_output(
    name: str,
    actual: torch.Tensor,
    expected: torch.Tensor,
    atol: float,
    rtol: float,
    ratio: float = 1.0,
    bound: float | None = None,
) -> tuple[str, dict]:
    """(status, OutputCheck dict) for one output against its reference. `ratio` < 1 lets that share of
    elements be outside the tolerances (PTXBench's required_matched_ratio, for FP8 outputs whose
    spacing is wider than the tolerances), and `bound` caps how far outside: within `bound` times
    them (None: anywhere finite). A NaN or Inf where the reference has none never passes."""
    check: dict = {"name": name, "passed": False}
    mismatch = _layout_mismatch(actual, expected)
    if mismatch is not None:
        status, check["reason"] = mismatch
        return status, check
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
    # Only where some are outside: a pass with none outside needs no second look.
    n_far = (
        int(((diff > bound * atol) & (rel > bound * rtol) & finite).sum())
        if bound is not None and n_bad
        else 0
    )
    check["matched_ratio"] = 1.0 - n_bad / numel
    check["max_abs_error"] = float(diff[finite].max()) if bool(finite.any()) else None
    check["rms_error_share"] = _rms_share(diff, y, finite)
    # Relative error only where the absolute error exceeds atol: those are the elements the rule can
    # fail; elsewhere a near-zero reference makes any rounding look like a huge relative error.
    judged = finite & (diff > atol)
    check["max_rel_error"] = float(rel[judged].max()) if bool(judged.any()) else 0.0
    # Worst: the failing element with the largest error (NaN first), else the largest error overall.
    score = torch.where(finite, diff, torch.full_like(diff, float("inf")))
    if n_bad:
        score = torch.where(bad, score, torch.full_like(score, -1.0))
    flat = int(torch.argmax(score.reshape(-1)))
    check["worst_index"] = unravel(flat, tuple(x.shape))
    worst_value = float(x.reshape(-1)[flat])
    worst_expected = float(y.reshape(-1)[flat])
    check["worst_value"] = None if math.isnan(worst_value) else worst_value  # NaN is not JSON
    check["worst_expected"] = None if math.isnan(worst_expected) else worst_expected
    nan_count = int((x_nan & ~y_nan).sum())
    non_finite = nan_count + int(x_inf.sum()) + int((torch.isinf(y) & (x != y) & ~x_nan).sum())
    if n_bad == 0 or (ratio < 1.0 and n_bad <= (1.0 - ratio) * numel and not non_finite and not n_far):
        check["passed"] = True
        return PASSED, check
    counts = f"{n_bad} of {numel} elements ({n_bad / numel:.2%}) outside atol={atol:g} and rtol={rtol:g}"
    if n_far:
        counts += f", {n_far} beyond {bound:g} times them (none may be)"
    allowed = int((1.0 - ratio) * numel) if ratio < 1.0 else None
    check["reason"] = _numerical_reason(check, counts, allowed, nan_count, int(x_inf.sum()), worst_expected)
    return NUMERICAL, check


def _layout_mismatch(actual: torch.Tensor, expected: torch.Tensor) -> tuple[str, str] | None:
    """(status, reason) when the output's shape or dtype is not the reference's, else None."""
    if list(actual.shape) != list(expected.shape):
        return SHAPE, f"shape {list(actual.shape)}, expected {list(expected.shape)}"
    if actual.dtype != expected.dtype:
        shown, wanted = (str(t.dtype).removeprefix("torch.") for t in (actual, expected))
        return DTYPE, f"dtype {shown}, expected {wanted}"
    return None


def _numerical_reason(
    check: dict, counts: str, allowed: int | None, nan_count: int, inf_count: int, worst_expected: float
) -> str:
    """Why the output fails: how many elements (and how many may be), the NaN and Inf among them, and the
    worst one (`check`'s)."""
    parts = [counts + (f" (at most {allowed} may be)" if allowed is not None else "")]
    if nan_count:
        parts.append(f"{nan_count} are NaN (outputs start as NaN: unwritten elements stay NaN)")
    if inf_count:
        parts.append(f"{inf_count} are Inf")
    worst_value = check["worst_value"]
    shown_value = "NaN" if worst_value is None else f"{worst_value:.6g}"
    parts.append(f"worst at {check['worst_index']}: {shown_value}, expected {worst_expected:.6g}")
    return "; ".join(parts)


def output_tolerance(spec: dict, name: str) -> tuple[float, float]:
    """(atol, rtol) for output `name`: its own where the task sets one, else the task's."""
    own = (spec.get("output_tolerances") or {}).get(name) or {}
    return float(own.get("atol", spec.get("atol", 1e-2))), float(own.get("rtol", spec.get("rtol", 1e-2)))


def passes_quickly(
    actual: torch.Tensor,
    expected: torch.Tensor,
    atol: float,
    rtol: float,
    ratio: float = 1.0,
    bound: float | None = None,
) -> bool:
    """Whether one output certainly passes `compare_output`'s rule, in a few float32 passes and no
    reduction but one count: the check of every timed call. False means "judge it in full" (it may still
    pass there: float32 differs from the full check's float64 only within rounding of the thresholds)."""
    if list(actual.shape) != list(expected.shape) or actual.dtype != expected.dtype:
        return False
    # The common case first: every element within max(atol, rtol |y|) where the reference is finite (a
    # NaN difference compares false, and where the reference is Inf so would the limit; either goes on
    # below). On a GPU one compiled pass does it (`within_flags`).
    if actual.is_cuda and actual.dtype in ONE_PASS_DTYPES:
        flags = within_flags(actual, expected, atol, rtol)
        if int(torch.count_nonzero(flags)) == flags.numel():
            return True
    x, y = actual.float(), expected.float()
    diff = torch.sub(x, y).abs_()
    limit = float32_limit(y, atol, rtol)
    within = (diff <= limit) & torch.isfinite(y)
    if int(within.sum()) == within.numel():
        return True
    # A NaN difference is bad unless both are NaN (or the same Inf).
    bad = ~within
    bad &= ~((x == y) | (torch.isnan(x) & torch.isnan(y)))
    n_bad = int(bad.sum())
    if n_bad == 0:
        return True
    if (
        ratio == 1.0
        or n_bad > (1.0 - ratio) * x.numel()
        or not bool((torch.isfinite(x) & torch.isfinite(y)).all())
    ):
        return False
    return bound is None or bool((diff <= bound * limit).all())


def float32_limit(y: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """Each element's limit max(atol, rtol (|y| + EPS)) for a float32 reference `y`, as the quick check's
    torch steps compute it (a new tensor; `WITHIN_CODE` does the same operations in the same order)."""
    return y.abs().mul_(rtol).add_(rtol * EPS).clamp_(min=atol)


# The dtypes whose one pass a GPU test holds to the torch steps (tests/gpu/test_quick_check_gpu.py); any
# other (FP8 outputs among them) takes the torch steps.
ONE_PASS_DTYPES = (torch.bfloat16, torch.float16, torch.float32, torch.float64)
# `passes_quickly`'s first step as one elementwise kernel: the same float32 operations in the same order,
# each rounded on its own (no fused multiply-add), so it says yes exactly where the torch steps do.
WITHIN_CODE = """
template <typename T> T within(T actual, T expected, float atol, float rtol, float rtol_eps) {
    float x = static_cast<float>(actual), y = static_cast<float>(expected);
    float limit = fmaxf(__fadd_rn(__fmul_rn(fabsf(y), rtol), rtol_eps), atol);
    return static_cast<T>(isfinite(y) && fabsf(__fsub_rn(x, y)) <= limit ? 1.0f : 0.0f);
}
"""


def within_flags(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """1 where an element of two CUDA tensors of one of `ONE_PASS_DTYPES` is within max(atol, rtol (|y| + EPS))
    of a finite reference, else 0 (in their dtype), in one pass compiled at run time by torch's jiterator
    (NVRTC; torch keeps the kernel after the first call). The torch steps take ten float32 passes: with
    the count, for the headline GEMM's output on an H100 at 3e99377, 0.60 ms against 2.04 ms
    (`benchmarks/timed_check_cost_probe.py`)."""
    within = torch.cuda.jiterator._create_jit_fn(WITHIN_CODE, atol=0.0, rtol=0.0, rtol_eps=0.0)
    return within(actual, expected, atol=atol, rtol=rtol, rtol_eps=rtol * EPS)


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
        if isinstance(old, torch.Tensor) and (
            not isinstance(new, torch.Tensor) or not torch.equal(bits(old), bits(new))
        ):
            changed.append(name)
    return changed


def bits(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes, so -0.0 vs 0.0 and NaN payloads count as changes too."""
    return tensor if tensor.dtype == torch.bool else tensor.contiguous().view(torch.uint8)


def same_kind(a: torch.Tensor, b: torch.Tensor) -> bool:
    """A reference in float32 for a bf16 output is rounded to bf16 first; a wrong dtype is still caught
    because the candidate's outputs are allocated by the evaluator in the definition's dtype."""
    return a.dtype.is_floating_point and b.dtype.is_floating_point
