"""Honest corpus (Triton): a library module's habits around one kernel: an export list, its inputs checked
(on the GPU, one device, one dtype), a module logger (logging.getLogger(__name__)) and warnings.warn for a
slow shape, run under @torch.no_grad() and
torch.cuda.device, a heuristic that reads an explicit meta-parameter, and a PTX cvt through
tl.inline_asm_elementwise in the epilogue."""

import logging
import warnings

import torch
import triton
import triton.language as tl

__all__ = ["run"]

logger = logging.getLogger(__name__)
TILE_M, TILE_N, TILE_K = 128, 128, 64


@triton.jit
def round_to_bf16(x):
    # Round-to-nearest into the upper half of each word, as cvt.rn.bf16.f32 does, then back to f32.
    return tl.inline_asm_elementwise(
        "{ .reg .b16 h; cvt.rn.bf16.f32 h, $1; mov.b32 $0, {0, h}; }",
        "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1,
    )  # fmt: skip


@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})
@triton.jit
def gemm_nt_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_tile = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b_tile = b_ptr + rn[None, :] * stride_bn + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        if EVEN_K:
            a = tl.load(a_tile, mask=rm[:, None] < M, other=0.0)
            b = tl.load(b_tile, mask=rn[None, :] < N, other=0.0)
        else:
            a = tl.load(a_tile, mask=(rm[:, None] < M) & (k + rk[None, :] < K), other=0.0)
            b = tl.load(b_tile, mask=(rn[None, :] < N) & (k + rk[:, None] < K), other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_K
        b_tile += BLOCK_K
    c_tile = c_ptr + rm[:, None] * stride_cm + rn[None, :]
    tl.store(c_tile, round_to_bf16(acc).to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@torch.no_grad()
def run(A, B, C):
    assert A.is_cuda and B.is_cuda and C.is_cuda, "A, B and C must be CUDA tensors"
    if not (A.device == B.device == C.device) or A.device.type != "cuda" or A.get_device() < 0:
        raise ValueError(f"A, B and C must share one GPU, got {A.device}, {B.device}, {C.device}")
    assert A.dtype == B.dtype == C.dtype == torch.bfloat16, f"expected bfloat16, got {A.dtype}"
    M, K = A.shape
    N = B.shape[0]
    if M % TILE_M or N % TILE_N:
        warnings.warn(f"gemm {M}x{N}: not a multiple of the {TILE_M}x{TILE_N} tile, the edge tiles are masked")
    logger.debug("gemm M=%d N=%d K=%d", M, N, K)
    with torch.cuda.device(A.device):
        gemm_nt_kernel[(triton.cdiv(M, TILE_M), triton.cdiv(N, TILE_N))](
            A, B, C, M, N, K, A.stride(0), B.stride(0), C.stride(0),
            BLOCK_M=TILE_M, BLOCK_N=TILE_N, BLOCK_K=TILE_K, num_warps=8, num_stages=3,
        )  # fmt: skip
