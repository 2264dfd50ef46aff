"""Honest corpus (Triton): the header of Triton's own tutorials (DEVICE and the SM count from
triton.runtime.driver, cached with functools), autotune configs built with itertools.product, typing.Final
constants, and a persistent grid: one program per SM walking the tiles in grouped order; a wait for the
current stream left in after the launch."""

import functools
import itertools
from typing import Final

import torch
import triton
import triton.language as tl

DEVICE = triton.runtime.driver.active.get_active_torch_device()
GROUP_M: Final[int] = 8


@functools.lru_cache(maxsize=None)
def num_sms() -> int:
    properties = triton.runtime.driver.active.utils.get_device_properties(DEVICE.index)
    return properties["multiprocessor_count"]


def _configs() -> list:
    return [
        triton.Config(
            {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": 64}, num_stages=stages, num_warps=warps
        )
        for block_m, block_n, stages, warps in itertools.product([128], [128, 256], [3], [8])
    ]


@triton.autotune(configs=_configs(), key=["M", "N", "K"])
@triton.jit
def gemm_persistent_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
    NUM_SMS: tl.constexpr, GROUP: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP * num_pid_n
    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS):
        first_m = (tile // in_group) * GROUP
        rows = min(num_pid_m - first_m, GROUP)
        pid_m = first_m + (tile % in_group) % rows
        pid_n = (tile % in_group) // rows
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            ks = k0 + offs_k
            a = tl.load(
                a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,
                mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0,
            )  # fmt: skip
            b = tl.load(
                b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0,
            )  # fmt: skip
            acc = tl.dot(a, b, acc)
        c = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        tl.store(c, acc.to(tl.bfloat16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def run(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> None:
    M, K = A.shape
    N = B.shape[0]

    def grid(META: dict) -> tuple[int]:
        return (min(num_sms(), triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"])),)

    gemm_persistent_kernel[grid](
        A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1), C.stride(0), C.stride(1),
        NUM_SMS=num_sms(), GROUP=GROUP_M,
    )  # fmt: skip
    torch.cuda.current_stream().synchronize()
