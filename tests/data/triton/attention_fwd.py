"""A Triton attention forward (FlashAttention-2 style online softmax) returning O and the natural-log
LSE, Q/K/V/O [B, H, S, D] bf16, LSE [B, H, S] fp32; both products are tl.dot (wgmma on sm_90a)."""

import math

import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def attention_fwd(
    Q,
    K,
    V,
    O,
    LSE,
    S,
    scale_log2,
    stride_bh,
    stride_s,
    CAUSAL: tl.constexpr,
    D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    start_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols0 = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, D)
    base = bh * stride_bh
    q = tl.load(Q + base + rows[:, None] * stride_s + dims[None, :], mask=rows[:, None] < S, other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    end = S
    if CAUSAL:
        end = tl.minimum((start_m + 1) * BLOCK_M, S)
    for start_n in range(0, end, BLOCK_N):
        cols = start_n + cols0
        k = tl.load(K + base + cols[None, :] * stride_s + dims[:, None], mask=cols[None, :] < S, other=0.0)
        s = tl.dot(q, k) * scale_log2
        keep = cols[None, :] < S
        if CAUSAL:
            keep = keep & (rows[:, None] >= cols[None, :])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + cols[:, None] * stride_s + dims[None, :], mask=cols[:, None] < S, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), v)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(O + base + rows[:, None] * stride_s + dims[None, :], acc.to(tl.bfloat16), mask=rows[:, None] < S)
    tl.store(LSE + bh * S + rows, (m_i + tl.math.log2(l_i)) * 0.6931471805599453, mask=rows < S)


def run(Q, K, V, O, LSE):
    B, H, S, D = Q.shape
    grid = (triton.cdiv(S, 128), B * H)
    attention_fwd[grid](
        Q,
        K,
        V,
        O,
        LSE,
        S,
        LOG2E / math.sqrt(D),
        Q.stride(1),
        Q.stride(2),
        CAUSAL=False,
        D=D,
        BLOCK_M=128,
        BLOCK_N=64,
        num_warps=8,
        num_stages=2,
    )
