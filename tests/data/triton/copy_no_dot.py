"""A Triton kernel without tl.dot, written against the GEMM's run(A, B, C): it copies A's leading
elements into C. It builds and traces cleanly and has no tensor-core instruction at all."""

import triton
import triton.language as tl


@triton.jit
def copy_kernel(X, Y, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(Y + offsets, tl.load(X + offsets, mask=mask), mask=mask)


def run(A, B, C):
    n = C.numel()
    copy_kernel[(triton.cdiv(n, 1024),)](A, C, n, BLOCK=1024)
