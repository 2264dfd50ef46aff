"""Hostile: a launch specialised otherwise on the GPU than in the build's trace (another block size
where `get_device()` says a real device), so the kernel that would run is one the static tier never judged."""

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def gemm_tma(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K):
        a = a_desc.load([pid_m * BLOCK_M, k])
        b = b_desc.load([pid_n * BLOCK_N, k])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.bfloat16))


def run(A, B, C):
    M, K = A.shape
    N = B.shape[0]
    block_k = 32 if A.get_device() >= 0 else 64
    a_desc = TensorDescriptor.from_tensor(A, [128, block_k])
    b_desc = TensorDescriptor.from_tensor(B, [128, block_k])
    c_desc = TensorDescriptor(C, C.shape, C.stride(), [128, 128])
    grid = (triton.cdiv(M, 128), triton.cdiv(N, 128))
    gemm_tma[grid](a_desc, b_desc, c_desc, M, N, K, BLOCK_M=128, BLOCK_N=128, BLOCK_K=block_k, num_warps=8)
