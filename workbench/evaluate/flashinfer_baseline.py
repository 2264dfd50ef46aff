"""FlashInfer as the second baseline of attention forward, where it is installed on the GPU host.

FlashInfer compiles its kernels on first use (93 s for the Hopper prefill on the H200's 16 cores), which
must never happen inside a candidate's timing stage, and a baseline that crashes takes the candidate's
process with it (the baselines run interleaved in that process). So the baseline is offered only after
`python -m workbench.evaluate.flashinfer_baseline --warm` has compiled the prefill for the head dim on
this host and checked it against torch SDPA; that check leaves a marker per FlashInfer version.

Child side: torch only, plus flashinfer when present.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

NAME = "FlashInfer prefill"
HEAD_DIMS = (64, 128, 256)


def installed() -> bool:
    return importlib.util.find_spec("flashinfer") is not None


def _prefill_spec(head_dim: int):
    """FlashInfer's JIT spec of the single-sequence prefill it picks on Hopper (FA3), bf16 in and out."""
    from flashinfer.jit.attention import gen_single_prefill_module

    dtype = torch.bfloat16
    return gen_single_prefill_module("fa3", dtype, dtype, dtype, head_dim, head_dim, 0, False, False, False)


def _marker(head_dim: int) -> Path:
    """Left by a warm-up whose check passed, for this FlashInfer version and head dim."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    version = importlib.metadata.version("flashinfer-python")
    return cache / "ptxwb" / "flashinfer-ready" / f"{version}-d{head_dim}"


def readiness(head_dim: int) -> str:
    """ "" when the prefill for `head_dim` was compiled and checked here; else why the baseline is out."""
    if not installed():
        return "FlashInfer is not installed on this host"
    try:
        ready = _marker(head_dim).is_file() and _prefill_spec(head_dim).is_compiled
    except Exception as exc:  # noqa: BLE001 - another FlashInfer version: say so, never fail the stage
        return f"FlashInfer's prefill could not be looked up ({type(exc).__name__}: {str(exc)[:120]})"
    if not ready:
        return (
            f"FlashInfer's D={head_dim} prefill is not compiled and checked on this host "
            "(python -m workbench.evaluate.flashinfer_baseline --warm)"
        )
    return ""


def forward_call(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> Callable[[], object]:
    """One FlashInfer prefill per sequence on our [B, H, S, D] tensors, LSE returned like the task's.

    FlashInfer takes [S, H, D] (NHD) per sequence: Q, K and V are copied into it once here, outside any
    timed window (its HND path for K and V crashed with SIGFPE in FlashInfer 0.7.4's FA3 prefill)."""
    import flashinfer

    scale = 1.0 / math.sqrt(q.shape[-1])
    queries, keys, values = (
        [x[b].transpose(0, 1).contiguous() for b in range(x.shape[0])] for x in (q, k, v)
    )

    def call() -> object:
        return [
            flashinfer.single_prefill_with_kv_cache(
                query,
                key,
                value,
                causal=causal,
                kv_layout="NHD",
                sm_scale=scale,
                backend="fa3",
                return_lse=True,
            )
            for query, key, value in zip(queries, keys, values, strict=True)
        ]

    return call


def warm(head_dims: tuple[int, ...] = (128,)) -> int:
    """Compile (or find compiled) the prefill for each head dim and check it on a small problem."""
    failures = 0
    for head_dim in head_dims:
        started = time.perf_counter()
        try:
            _prefill_spec(head_dim).build_and_load()
            q, k, v = (
                torch.randn(1, 4, 256, head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(3)
            )
            for causal in (False, True):
                (out, _lse), *_ = forward_call(q, k, v, causal)()
                want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                error = (out.transpose(0, 1).float() - want[0].float()).abs().max().item()
                if error > 2e-2:
                    raise RuntimeError(f"causal={causal}: max abs error {error:.3g} against torch SDPA")
        except Exception as exc:  # noqa: BLE001 - report per head dim, go on
            failures += 1
            print(f"D={head_dim}: failed: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
            continue
        _marker(head_dim).parent.mkdir(parents=True, exist_ok=True)
        _marker(head_dim).write_text(f"checked against torch SDPA, max abs error {error:.3g}\n")
        print(f"D={head_dim}: ready in {time.perf_counter() - started:.1f} s (checked against torch SDPA)")
    return 1 if failures else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", action="store_true", help="compile FlashInfer's prefill here")
    parser.add_argument("--head-dim", type=int, action="append", choices=HEAD_DIMS)
    args = parser.parse_args()
    if not installed():
        print("FlashInfer is not installed here", file=sys.stderr)
        sys.exit(2)
    if not args.warm:
        for head_dim in args.head_dim or [128]:
            print(f"D={head_dim}: {readiness(head_dim) or 'ready'}")
        sys.exit(0)
    sys.exit(warm(tuple(args.head_dim or [128])))


if __name__ == "__main__":
    main()
