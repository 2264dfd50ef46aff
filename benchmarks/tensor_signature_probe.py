"""Which in-process counters tell a wgmma path from an mma.sync path on the calls that were timed?

CUPTI's PM sampling reads hardware counters while kernels run, with no replay and no serialisation, so
a kernel cannot tell a sampled call from any other. This probe answers, on the GPU host, with
cupti-python installed (`python benchmarks/tensor_signature_probe.py`):

1. which single-pass metric sets the chip offers and which tensor/gmma metrics can be sampled alone;
2. per call, what each such metric reads for an HGMMA kernel (cuBLAS bf16 on Hopper), an HMMA kernel
   (Triton `tl.dot` with two warps, which Triton lowers to mma.sync) and a SIMT kernel (fp32 without
   TF32), how repeatable it is call to call, and its ratio to the call's 2·M·N·K;
3. what sampling costs the sampled kernel (median time with and without, events, same run).
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable

import torch
import triton
import triton.language as tl

WANTED = ("tensor", "gmma", "hmma", "imma", "inst_executed")
M, N, K = 4096, 4096, 4096


@triton.jit
def _mma_sync_gemm(a_ptr, b_ptr, c_ptr, m, n, k, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, k, BK):
        a = tl.load(a_ptr + rm[:, None] * k + (k0 + rk)[None, :])
        b = tl.load(b_ptr + rn[None, :] * k + (k0 + rk)[:, None])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * n + rn[None, :], acc.to(tl.bfloat16))


def _kernels() -> dict[str, Callable[[], object]]:
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    af, bf = a.float(), b.float()
    torch.backends.cuda.matmul.allow_tf32 = False

    def triton_two_warps() -> object:
        return _mma_sync_gemm[(M // 64, N // 64)](a, b, c, M, N, K, BM=64, BN=64, BK=32, num_warps=2)

    return {
        "cublas_bf16_hgmma": lambda: torch.matmul(a, b.T),
        "triton_2warps_hmma": triton_two_warps,
        "cublas_fp32_simt": lambda: torch.matmul(af, bf.T),
    }


def _timed(fn: Callable[[], object], calls: int) -> float:
    times = []
    for _ in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> int:
    from cupti import pm_sampling, profiler_host

    torch.cuda.init()
    torch.zeros(1, device="cuda")
    collector = pm_sampling.Collector(0)
    collector.enable()
    chip = collector._chip_name
    assert chip is not None
    print("chip", chip)
    sets = profiler_host.get_single_pass_sets(chip)
    print("single-pass sets:", sets)
    for name in sets:
        members = profiler_host.get_metrics_in_single_pass_set(chip, name)
        hits = [m for m in members if any(w in m for w in WANTED)]
        print(f"  set {name}: {len(members)} metrics; tensor/inst ones: {hits}")
    host = profiler_host.ProfilerHost(chip, profiler_host.ProfilerType.PM_SAMPLING)
    host.initialize()
    names = host.get_base_metrics(profiler_host.MetricType.COUNTER)
    candidates = [f"{n}.sum" for n in names if any(w in n for w in WANTED)]
    print("counter candidates:", len(candidates))
    kernels = _kernels()
    for fn in kernels.values():
        fn()
    torch.cuda.synchronize()
    flops = 2.0 * M * N * K
    alone: list[str] = []
    for metric in candidates:
        try:
            collector.configure(metrics=[metric], sampling_interval=20_000)
            alone.append(metric)
        except Exception as exc:  # noqa: BLE001 - a probe: report and go on
            print("  not alone:", metric, str(exc)[:80])
    print("sampleable alone:", alone)
    for metric in alone:
        collector.configure(metrics=[metric], sampling_interval=20_000)
        row = []
        for label, fn in kernels.items():
            per_call = []
            for _ in range(3):
                torch.cuda.synchronize()
                collector.start()
                fn()
                torch.cuda.synchronize()
                collector.stop()
                data = collector.decode()
                per_call.append(sum(s.metric_values[0] for s in data))
            spread = (max(per_call) - min(per_call)) / max(abs(statistics.mean(per_call)), 1e-30)
            row.append(
                f"{label}={statistics.mean(per_call):.4g} (/flop {statistics.mean(per_call) / flops:.3g}, spread {spread:.2%})"
            )
        print(" ", metric, "|", " | ".join(row))
    # Pairs of the gmma-specific ones with the tensor-instruction count: can they share one pass?
    pairs = [(x, y) for x in alone for y in alone if x < y and ("gmma" in x or "gmma" in y)]
    for pair in pairs[:30]:
        try:
            collector.configure(metrics=list(pair), sampling_interval=20_000)
            print("  pair ok:", pair)
        except Exception as exc:  # noqa: BLE001 - a probe: report and go on
            print("  pair not in one pass:", pair, str(exc)[:60])
    # Cost of sampling to the sampled kernel.
    if alone:
        collector.configure(metrics=alone[:1], sampling_interval=20_000)
        for label, fn in kernels.items():
            off = _timed(fn, 30)
            collector.start()
            on = _timed(fn, 30)
            collector.stop()
            collector.decode()
            print(f"cost {label}: off {off:.4f} ms, on {on:.4f} ms, ratio {on / off:.4f}")
    collector.disable()
    return 0


if __name__ == "__main__":
    sys.exit(main())
