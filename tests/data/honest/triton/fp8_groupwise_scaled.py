"""Honest corpus (Triton): an FP8 block-scaled GEMM as the public group-wise FP8 kernels write it: e4m3
operands through `tl.dot` into a fresh fp32 partial per 128-wide K block, scaled by that block's per-token
and per-block scales into the total, configs autotuned on M, and the grid as a lambda of the chosen config.
"""
# task: fp8_gemm_nt_1d2d_n4096_k7168

import triton
import triton.language as tl

SCALE_BLOCK = 128  # the scales' granularity along K, and along N for B


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 64}, num_warps=4, num_stages=4),
    ],
    key=["M"],
)
@triton.jit
def fp8_groupwise_kernel(
    a_ptr, sfa_ptr, b_ptr, sfb_ptr, d_ptr, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr = 128, BLOCK_K: tl.constexpr = 128,
):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    k_blocks = K // BLOCK_K
    rows = offs_m < M
    a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_n[None, :] * K + offs_k[:, None]  # B's rows are K-major: a [BLOCK_K, BLOCK_N] view
    total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(k_blocks):
        a = tl.load(a_ptrs, mask=rows[:, None], other=0.0)
        b = tl.load(b_ptrs)
        partial = tl.dot(a, b)
        scale_a = tl.load(sfa_ptr + offs_m * k_blocks + kb, mask=rows, other=0.0)
        scale_b = tl.load(sfb_ptr + (pid_n * BLOCK_N // BLOCK_K) * k_blocks + kb)
        total += partial * scale_a[:, None] * scale_b
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    d_ptrs = d_ptr + offs_m[:, None] * N + offs_n[None, :]
    tl.store(d_ptrs, total.to(tl.bfloat16), mask=rows[:, None])


def run(A, SF_A, B, SF_B, D):
    M, K = A.shape
    N = B.shape[0]
    assert K % SCALE_BLOCK == 0 and N % SCALE_BLOCK == 0, "K and N must be multiples of the scale block"
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), N // SCALE_BLOCK)
    fp8_groupwise_kernel[grid](A, SF_A, B, SF_B, D, M, N, K)
