"""Honest corpus (Triton): block pointers (tl.make_block_ptr, tl.advance, boundary_check), an epilogue in
a helper @triton.jit function, typing annotations, `math` for the grid, one fixed config."""

import math

import triton
import triton.language as tl


@triton.jit
def store_tile(
    c_ptr, acc, M, N, stride_cm, stride_cn, off_m, off_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr
):
    c_block = tl.make_block_ptr(
        base=c_ptr, shape=(M, N), strides=(stride_cm, stride_cn), offsets=(off_m, off_n),
        block_shape=(BLOCK_M, BLOCK_N), order=(1, 0),
    )  # fmt: skip
    tl.store(c_block, acc.to(tl.bfloat16), boundary_check=(0, 1))


@triton.jit
def gemm_block_ptr_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr = 128, BLOCK_N: tl.constexpr = 128, BLOCK_K: tl.constexpr = 64,
):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_block = tl.make_block_ptr(
        base=a_ptr, shape=(M, K), strides=(stride_am, stride_ak), offsets=(pid_m * BLOCK_M, 0),
        block_shape=(BLOCK_M, BLOCK_K), order=(1, 0),
    )  # fmt: skip
    b_block = tl.make_block_ptr(
        base=b_ptr, shape=(K, N), strides=(stride_bk, stride_bn), offsets=(0, pid_n * BLOCK_N),
        block_shape=(BLOCK_K, BLOCK_N), order=(0, 1),
    )  # fmt: skip
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_block, boundary_check=(0, 1))
        b = tl.load(b_block, boundary_check=(0, 1))
        acc += tl.dot(a, b)
        a_block = tl.advance(a_block, (0, BLOCK_K))
        b_block = tl.advance(b_block, (BLOCK_K, 0))
    store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N)


def _grid(M: int, N: int, block: tuple[int, int]) -> tuple[int, int]:
    return (math.ceil(M / block[0]), math.ceil(N / block[1]))


def run(A, B, C):
    M, K = A.shape
    N = B.shape[0]
    gemm_block_ptr_kernel[_grid(M, N, (128, 128))](
        A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1), C.stride(0), C.stride(1),
        num_warps=8, num_stages=3,
    )  # fmt: skip
