"""A Triton GEMM C = A @ B^T (A [M, K], B [N, K], C [M, N], bf16) with block pointers, a grouped tile
order and a heuristic; tl.dot lowers to wgmma on sm_90a."""

import triton
import triton.language as tl


@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})
@triton.jit
def gemm_kernel(
    A,
    B,
    C,
    M,
    N,
    K,
    stride_am,
    stride_bn,
    stride_cm,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m
    a_ptr = tl.make_block_ptr(A, (M, K), (stride_am, 1), (pid_m * BLOCK_M, 0), (BLOCK_M, BLOCK_K), (1, 0))
    b_ptr = tl.make_block_ptr(B, (K, N), (1, stride_bn), (0, pid_n * BLOCK_N), (BLOCK_K, BLOCK_N), (0, 1))
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptr, boundary_check=(0,))
            b = tl.load(b_ptr, boundary_check=(1,))
        else:
            a = tl.load(a_ptr, boundary_check=(0, 1))
            b = tl.load(b_ptr, boundary_check=(0, 1))
        acc = tl.dot(a, b, acc)
        a_ptr = tl.advance(a_ptr, (0, BLOCK_K))
        b_ptr = tl.advance(b_ptr, (BLOCK_K, 0))
    c_ptr = tl.make_block_ptr(
        C, (M, N), (stride_cm, 1), (pid_m * BLOCK_M, pid_n * BLOCK_N), (BLOCK_M, BLOCK_N), (1, 0)
    )
    tl.store(c_ptr, acc.to(tl.bfloat16), boundary_check=(0, 1))


def run(A, B, C):
    M, K = A.shape
    N = B.shape[0]
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
    gemm_kernel[grid](
        A,
        B,
        C,
        M,
        N,
        K,
        A.stride(0),
        B.stride(0),
        C.stride(0),
        BLOCK_M=128,
        BLOCK_N=128,
        BLOCK_K=64,
        GROUP_M=8,
        num_warps=8,
        num_stages=3,
    )
