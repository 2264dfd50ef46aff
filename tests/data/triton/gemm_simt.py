"""A Triton GEMM without tl.dot: rank-1 updates in FP32 FMAs, no tensor core (the static tier's
missing-family case)."""

import triton
import triton.language as tl


@triton.jit
def gemm_outer(A, B, C, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(K):
        a = tl.load(A + rows * K + k, mask=rows < M, other=0.0).to(tl.float32)
        b = tl.load(B + cols * K + k, mask=cols < N, other=0.0).to(tl.float32)
        acc += a[:, None] * b[None, :]
    tl.store(
        C + rows[:, None] * N + cols[None, :],
        acc.to(tl.bfloat16),
        mask=(rows[:, None] < M) & (cols[None, :] < N),
    )


def run(A, B, C):
    M, K = A.shape
    N = B.shape[0]
    gemm_outer[(triton.cdiv(M, 64), triton.cdiv(N, 64))](A, B, C, M, N, K, BLOCK_M=64, BLOCK_N=64)
