"""The headline GEMM's operands for the probes that call cuBLAS on them through torch.matmul (M=8192,
N=7168, K=5120, bf16: `gemm_n7168_k5120`'s timed workload), and a buffer the size of the runner's L2
flush. Imported by the probes run as scripts from this folder.
"""

from __future__ import annotations

import torch

from workbench.evaluate.gpu.runner import l2_flush_bytes

M, N, K = 8192, 7168, 5120


def operands() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(a, b, c, flush) on the current CUDA device: `torch.matmul(a, b.T, out=c)` is the call, and
    `flush.zero_()` evicts L2 as the runner does before each timed call."""
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    flush = torch.empty(l2_flush_bytes("cuda"), dtype=torch.uint8, device="cuda")
    return a, b, c, flush
