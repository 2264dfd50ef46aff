"""Honest corpus (Triton): host-side TMA descriptors made once with a placeholder block shape, which each
autotune config's pre_hook sets to its own tile (the persistent-matmul tutorial's pattern)."""

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


def set_block_shapes(nargs):
    BLOCK_M = nargs["BLOCK_M"]
    BLOCK_N = nargs["BLOCK_N"]
    BLOCK_K = nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [BLOCK_M, BLOCK_K]
    nargs["b_desc"].block_shape = [BLOCK_N, BLOCK_K]
    nargs["c_desc"].block_shape = [BLOCK_M, BLOCK_N]


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": block_n, "BLOCK_K": 64}, num_stages=3, num_warps=8,
                      pre_hook=set_block_shapes)
        for block_n in (128, 256)
    ],
    key=["M", "N", "K"],
)  # fmt: skip
@triton.jit
def gemm_host_tma(a_desc, b_desc, c_desc, M, N, K,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = a_desc.load([pid_m * BLOCK_M, k])
        b = b_desc.load([pid_n * BLOCK_N, k])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.bfloat16))


def run(A, B, C):
    M, K = A.shape
    N = B.shape[0]
    placeholder = [1, 1]  # each config's pre_hook sets its own
    a_desc = TensorDescriptor(A, A.shape, A.stride(), placeholder)
    b_desc = TensorDescriptor(B, B.shape, B.stride(), placeholder)
    c_desc = TensorDescriptor(C, C.shape, C.stride(), placeholder)

    def grid(META):
        return (triton.cdiv(M, META["BLOCK_M"]), triton.cdiv(N, META["BLOCK_N"]))

    gemm_host_tma[grid](a_desc, b_desc, c_desc, M, N, K)
