"""Honest corpus (Triton): the shape of kernel libraries built on autograd Functions: a decorator of the
file's own that makes every tensor argument contiguous (`ensure_contiguous`, applied under @staticmethod),
a settings helper picking the tile and warp count from the problem (`triton.next_power_of_2`), a device
helper, a `torch.cuda.device` context around the launch, and block pointers in the kernel."""

import functools

import torch
import triton
import triton.language as tl

MAX_TILE = 128


def ensure_contiguous(fn):
    @functools.wraps(fn)
    def wrapper(ctx, *args, **kwargs):
        def contiguous(x):
            return x.contiguous() if isinstance(x, torch.Tensor) else x

        args = [contiguous(arg) for arg in args]
        kwargs = {name: contiguous(value) for name, value in kwargs.items()}
        return fn(ctx, *args, **kwargs)

    return wrapper


def infer_device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def calculate_settings(n):
    tile = min(MAX_TILE, triton.next_power_of_2(n))
    num_warps = 8 if tile >= 128 else 4
    return tile, num_warps


@triton.jit
def _matmul_nt_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_block = tl.make_block_ptr(a_ptr, (M, K), (stride_am, 1), (pid_m * BLOCK_M, 0), (BLOCK_M, BLOCK_K), (1, 0))
    b_block = tl.make_block_ptr(b_ptr, (K, N), (1, stride_bn), (0, pid_n * BLOCK_N), (BLOCK_K, BLOCK_N), (0, 1))
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_block, boundary_check=(0, 1), padding_option="zero")
        b = tl.load(b_block, boundary_check=(0, 1), padding_option="zero")
        acc = tl.dot(a, b, acc)
        a_block = tl.advance(a_block, (0, BLOCK_K))
        b_block = tl.advance(b_block, (BLOCK_K, 0))
    c_block = tl.make_block_ptr(c_ptr, (M, N), (stride_cm, 1), (pid_m * BLOCK_M, pid_n * BLOCK_N), (BLOCK_M, BLOCK_N), (1, 0))
    tl.store(c_block, acc.to(c_ptr.dtype.element_ty), boundary_check=(0, 1))


def matmul_nt_forward(a, b, c):
    M, K = a.shape
    N = b.shape[0]
    tile, num_warps = calculate_settings(N)
    grid = (triton.cdiv(M, tile), triton.cdiv(N, tile))
    with torch.cuda.device(a.device):
        _matmul_nt_kernel[grid](
            a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
            BLOCK_M=tile, BLOCK_N=tile, BLOCK_K=64, num_warps=num_warps, num_stages=3,
        )  # fmt: skip
    return c


class MatmulNTFunction(torch.autograd.Function):
    @staticmethod
    @ensure_contiguous
    def forward(ctx, a, b, c):
        return matmul_nt_forward(a, b, c)


def run(A, B, C):
    MatmulNTFunction.apply(A, B, C)
