"""Honest corpus (Triton): device-side TMA descriptors (tl.make_tensor_descriptor) with the scratch
allocator Triton asks for (triton.set_allocator with torch.empty), persistent tiles over the SM count,
tl.constexpr meta-parameters."""

import torch
import triton
import triton.language as tl


def _alloc(size: int, alignment: int, stream):
    return torch.empty(size, device="cuda", dtype=torch.int8)


@triton.jit
def gemm_tma_persistent(a_ptr, b_ptr, c_ptr, M, N, K, NUM_SMS: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, NUM_SMS):
        off_m = (tile // tiles_n) * BLOCK_M
        off_n = (tile % tiles_n) * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            a = a_desc.load([off_m, k])
            b = b_desc.load([off_n, k])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([off_m, off_n], acc.to(tl.bfloat16))


def run(A, B, C):
    M, K = A.shape
    N = B.shape[0]
    triton.set_allocator(_alloc)
    sms = torch.cuda.get_device_properties(A.device).multi_processor_count
    tiles = triton.cdiv(M, 128) * triton.cdiv(N, 128)
    gemm_tma_persistent[(min(sms, tiles),)](A, B, C, M, N, K, NUM_SMS=sms, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                                            num_warps=8, num_stages=3)  # fmt: skip
