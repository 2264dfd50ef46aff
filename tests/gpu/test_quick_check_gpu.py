"""On a GPU: the every-timed-call check's one compiled pass (`within_flags`) says "within" on exactly the
elements where the torch steps it stands for do (`passes_quickly`'s first step on a CPU), in every floating
dtype, around the thresholds, on NaN, Inf, zero and subnormal values and on strided views; and
`passes_quickly` answers on the GPU as on the CPU.

Run on the GPU host from the checkout: `python -m pytest -m gpu -n 0 tests/gpu/test_quick_check_gpu.py`.
"""

from __future__ import annotations

import pytest
import torch

from workbench.evaluate.gpu.correctness import ONE_PASS_DTYPES, float32_limit, passes_quickly, within_flags

pytestmark = pytest.mark.gpu

ATOL = RTOL = 1e-2
DTYPES = list(ONE_PASS_DTYPES)


def _torch_steps(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """`passes_quickly`'s first step as torch runs it on a CPU: this test's oracle."""
    x, y = actual.float(), expected.float()
    return (torch.sub(x, y).abs_() <= float32_limit(y, atol, rtol)) & torch.isfinite(y)


def _pairs(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(actual, expected) on the CPU: values over many magnitudes, each a few float32 steps either side of
    its limit, with the special values in both roles."""
    generator = torch.Generator().manual_seed(7)
    y = torch.randn(4096, generator=generator) * torch.logspace(-8, 4, 4096)
    limit = float32_limit(y, ATOL, RTOL)
    steps = torch.randint(-4, 5, (4096,), generator=generator).float()
    x = y + limit * (1 + steps * 2.0**-22)
    special = torch.tensor([0.0, -0.0, 1e-40, float("nan"), float("inf"), float("-inf"), 65504.0, 1e30])
    xs = torch.cat([x, special.repeat_interleave(8), special.repeat(8)])
    ys = torch.cat([y, special.repeat(8), special.repeat_interleave(8)])
    return xs.to(dtype), ys.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_one_pass_flags_every_element_as_the_torch_steps_do(dtype: torch.dtype) -> None:
    actual, expected = _pairs(dtype)
    want = _torch_steps(actual, expected, ATOL, RTOL)
    got = within_flags(actual.cuda(), expected.cuda(), ATOL, RTOL).cpu() != 0
    assert 0 < int(want.sum()) < want.numel()  # both answers occur
    assert torch.equal(got, want), f"{int((got != want).sum())} elements differ"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_one_pass_reads_strided_views(dtype: torch.dtype) -> None:
    actual, expected = (t[:4096].reshape(64, 64) for t in _pairs(dtype))
    want = _torch_steps(actual.t(), expected.t(), ATOL, RTOL)
    got = within_flags(actual.cuda().t(), expected.cuda().t(), ATOL, RTOL).cpu() != 0
    assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_passes_quickly_answers_on_the_gpu_as_on_the_cpu(dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(3)
    want = torch.randn(128, 128, generator=generator).to(dtype)
    off = want.clone()
    off[5, 6] += 1.0
    nan = want.clone()
    nan[1, 2] = float("nan")
    inf = want.clone()
    inf[0, 0] = float("inf")
    cases = {
        "equal": (want.clone(), want, 1.0),
        "off": (off, want, 1.0),
        "off, ratio": (off, want, 0.999),
        "nan": (nan, want, 1.0),
        "nan in both": (nan, nan.clone(), 1.0),
        "same inf": (inf, inf.clone(), 1.0),
        "finite where the reference is inf": (want.clone(), inf, 1.0),
    }
    answers = {}
    for name, (actual, expected, ratio) in cases.items():
        on_cpu = passes_quickly(actual, expected, ATOL, RTOL, ratio)
        on_gpu = passes_quickly(actual.cuda(), expected.cuda(), ATOL, RTOL, ratio)
        assert on_gpu == on_cpu, name
        answers[name] = on_gpu
    assert answers == {
        "equal": True,
        "off": False,
        "off, ratio": True,
        "nan": False,
        "nan in both": True,
        "same inf": True,
        "finite where the reference is inf": False,
    }
