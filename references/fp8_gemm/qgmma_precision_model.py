"""A CPU model of Hopper's FP8 tensor-core (QGMMA) accumulation, to see what the promotion interval
does to fp8_gemm_nt_1d2d_n4096_k7168's element rule (atol = rtol = 1e-2, every element).

Model (after DeepSeek-V3's report, section 3.5.2): one wgmma k32 step aligns its 32 exact e4m3 x e4m3
products, and the incoming accumulator when scale-d = 1, to the largest exponent among them, keeps 14
bits (13 below the leading one, truncated toward zero), sums, and truncates the result to 13 fraction
bits. Every `promote` k-steps the partial is scaled and added in fp32 (the kernel's total).

    python references/fp8_gemm/qgmma_precision_model.py [seed]

Printed for one 128 x 256 tile at K = 7168, the task's inputs: elements outside the rule and the fp32
error against the exact sum. With this model, promoting every 128 (four chained wgmmas) fails ~0.5 %
of the elements, what the H200 showed; every 64 ~0.12 %; every 32 (one wgmma) ~0.01 %.
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch

DEF = Path(__file__).resolve().parents[2] / "tasks/definitions/fp8_gemm_nt_1d2d_n4096_k7168.json"
M, N, K, BITS = 128, 256, 7168, 13


def truncate(x: np.ndarray, unit: np.ndarray) -> np.ndarray:
    return np.trunc(x / unit) * unit


def qgmma_step(c: np.ndarray, p: np.ndarray) -> np.ndarray:
    """c [M, N] incoming accumulator (0 for scale-d = 0), p [M, N, 32] exact products."""
    top = np.maximum(np.abs(p).max(-1), np.abs(c))
    unit = np.exp2(np.floor(np.log2(np.maximum(top, 1e-300))) - BITS)
    s = truncate(p, unit[..., None]).sum(-1) + truncate(c, unit)
    return truncate(s, np.exp2(np.floor(np.log2(np.maximum(np.abs(s), 1e-300))) - BITS))


def main() -> None:
    ns: dict = {}
    exec(json.loads(DEF.read_text())["reference"], ns)  # noqa: S102 - the task's own reference
    g = torch.Generator().manual_seed(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    x = ns["generate_inputs"]({"m": M, "n": 4096, "k": K}, g, "cpu")
    B, SF_B = x["B"][:N], x["SF_B"][: N // 128]
    ref = ns["run"](x["A"], x["SF_A"], B, SF_B).double().numpy()
    a, b = x["A"].double().numpy(), B.double().numpy()
    sa, sb = x["SF_A"].double().numpy(), SF_B.double().numpy()
    exact = (a * np.repeat(sa, 128, 1)) @ (b * np.repeat(np.repeat(sb, 128, 0), 128, 1)).T
    for promote in (128, 64, 32):
        total = np.zeros((M, N), dtype=np.float32)
        for kb in range(K // 128):
            scale = sa[:, kb][:, None] * np.repeat(sb[:, kb], 128)[None, :]
            part = np.zeros((M, N))
            for kk in range(4):
                k0 = kb * 128 + kk * 32
                part = qgmma_step(part, a[:, None, k0 : k0 + 32] * b[None, :, k0 : k0 + 32])
                if (kk + 1) * 32 % promote == 0:
                    total += (part * scale).astype(np.float32)
                    part = np.zeros((M, N))
        out = torch.from_numpy(total).bfloat16().double().numpy()
        diff = np.abs(out - ref)
        bad = (diff > 1e-2) & (diff / (np.abs(ref) + 1e-6) > 1e-2)
        err = total - exact
        print(
            f"promote every {promote:3d}: {int(bad.sum())} of {bad.size} elements outside "
            f"({bad.mean():.3%}); fp32 error rms {np.sqrt((err**2).mean()):.4f}, max {np.abs(err).max():.4f}"
        )


if __name__ == "__main__":
    main()
