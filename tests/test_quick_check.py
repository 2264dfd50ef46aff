"""The every-timed-call check (`passes_quickly`) agrees with the full one (`compare_output`): it never
passes an output the full check fails, on NaN, Inf, near-threshold and matched-ratio cases."""

from __future__ import annotations

import pytest
import torch

from workbench.evaluate.gpu.correctness import PASSED, compare_output, passes_quickly

ATOL = RTOL = 1e-2


def _cases() -> list[tuple[str, torch.Tensor, torch.Tensor, float]]:
    torch.manual_seed(0)
    want = torch.randn(64, 64)
    cases = [
        ("equal", want.clone(), want, 1.0),
        ("within", want + 5e-3, want, 1.0),
        ("off", want + 0.5, want, 1.0),
    ]
    nan = want.clone()
    nan[3, 4] = float("nan")
    cases += [
        ("nan", nan, want, 1.0),
        ("nan in both", nan, nan.clone(), 1.0),
        ("nan with ratio", nan, want, 0.99),
    ]
    inf = want.clone()
    inf[0, 0] = float("inf")
    cases += [("inf", inf, want, 1.0), ("same inf", inf, inf.clone(), 1.0), ("opposite inf", -inf, inf, 1.0)]
    cases += [
        ("finite where the reference is inf", want.clone(), inf, 1.0),
        ("finite where the reference is inf, ratio", want.clone(), inf, 0.99),
    ]
    few = want.clone()
    few.view(-1)[:20] += 1.0
    cases += [("few wrong, ratio", few, want, 0.995), ("few wrong, strict", few, want, 1.0)]
    edge = want + torch.where(torch.rand_like(want) < 0.5, 0.0099, 0.0101)  # around atol on small values
    cases += [("near threshold", edge, want, 1.0)]
    cases += [
        ("bf16", want.bfloat16(), want.bfloat16(), 1.0),
        ("bf16 off", (want + 1).bfloat16(), want.bfloat16(), 1.0),
    ]
    cases += [("shape", want[:32], want, 1.0), ("dtype", want.double(), want, 1.0)]
    return cases


@pytest.mark.parametrize(
    ("name", "actual", "expected", "ratio"), _cases(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_the_quick_check_never_passes_what_the_full_one_fails(
    name: str, actual: torch.Tensor, expected: torch.Tensor, ratio: float
) -> None:
    status, _ = compare_output("C", actual, expected, ATOL, RTOL, ratio)
    quick = passes_quickly(actual, expected, ATOL, RTOL, ratio)
    if quick:
        assert status == PASSED, name
    if name in ("equal", "within", "nan in both", "same inf", "few wrong, ratio", "bf16"):
        assert quick and status == PASSED, name  # the cheap path really is taken when right
