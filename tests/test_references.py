"""The catalogue's torch references, loaded as the evaluator loads them, checked on the CPU at small
shapes against independent maths."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from workbench.evaluate.gpu.inputs import compile_reference
from workbench.tasks import Catalogue

CAT = Catalogue.load()


def _bf16(*shape: int, generator: torch.Generator) -> torch.Tensor:
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(torch.bfloat16)


@pytest.mark.parametrize("name", ["gemm_n128_k2048", "gemm_n7168_k5120"])
def test_gemm_reference_matches_float64(name: str) -> None:
    task = CAT.get(name)
    n, k = task.definition.const_axes()["N"], task.definition.const_axes()["K"]
    g = torch.Generator().manual_seed(1)
    a = _bf16(7, k, generator=g)
    b = _bf16(n, k, generator=g)
    c = compile_reference(task.definition.reference)(a, b)
    assert c.shape == (7, n) and c.dtype == torch.bfloat16
    exact = a.double() @ b.double().T
    # bf16 output: one rounding of a value accumulated exactly enough.
    assert torch.allclose(c.double(), exact, rtol=1e-2, atol=1e-2 * exact.abs().max().item())


def _float64_attention(q, k, v, causal):
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q.double() @ k.double().transpose(-1, -2)) * scale
    if causal:
        seq = scores.shape[-1]
        upper = torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(upper, -math.inf)
    peak = scores.max(dim=-1, keepdim=True).values
    weights = torch.exp(scores - peak)
    total = weights.sum(dim=-1, keepdim=True)
    lse = (peak + torch.log(total)).squeeze(-1)
    return (weights / total) @ v.double(), lse


@pytest.mark.parametrize("d", [64, 96, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_forward_reference_matches_float64_softmax(d: int, causal: bool) -> None:
    task = CAT.get(f"mha_with_lse_d{d}" + ("_causal" if causal else ""))
    g = torch.Generator().manual_seed(d)
    q, k, v = (_bf16(2, 3, 37, d, generator=g) for _ in range(3))
    o, lse = compile_reference(task.definition.reference)(q, k, v)
    assert o.dtype == torch.bfloat16 and o.shape == (2, 3, 37, d)
    assert lse.dtype == torch.float32 and lse.shape == (2, 3, 37)
    exact_o, exact_lse = _float64_attention(q, k, v, causal)
    assert torch.allclose(lse.double(), exact_lse, atol=1e-4, rtol=1e-5)
    assert torch.allclose(o.double(), exact_o, atol=1e-2, rtol=1e-2)
    if causal:
        # The first query sees only the first key: its output is V's first row.
        assert torch.allclose(o[:, :, 0].double(), v[:, :, 0].double(), atol=1e-2)


@pytest.mark.parametrize("d", [64, 96, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_backward_reference_matches_autograd(d: int, causal: bool) -> None:
    task = CAT.get(f"mha_bwd_d{d}" + ("_causal" if causal else ""))
    g = torch.Generator().manual_seed(100 + d)
    q, k, v, do = (_bf16(2, 2, 29, d, generator=g) for _ in range(4))
    q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
    o64, lse64 = _float64_attention(q64, k64, v64, causal)
    o64.backward(do.double())
    o = o64.detach().to(torch.bfloat16)
    dq, dk, dv = compile_reference(task.definition.reference)(q, k, v, o, do, lse64.detach().float())
    for got, want in ((dq, q64.grad), (dk, k64.grad), (dv, v64.grad)):
        assert got.dtype == torch.bfloat16 and got.shape == want.shape
        # O enters rounded to bf16, as a kernel would receive it: bf16-level agreement.
        assert torch.allclose(got.double(), want, atol=2e-2, rtol=2e-2)
