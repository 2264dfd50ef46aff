"""Which in-process counters tie the timed calls to the profiled one, and tell a wgmma path from mma.sync?

CUPTI's PM sampling reads hardware counters while kernels run, with no replay and no serialisation, so
a kernel cannot tell a sampled call from any other. The first run of this probe (2026-12-03) found that
on GH100 the tensor-instruction counts and the gmma stall count cannot be sampled, while the
TriageCompute single-pass set can: tensor-pipe active cycles, instructions executed (all, FMA, uniform)
and predicate-true thread instructions. This run samples that set around single calls of an HGMMA
kernel (cuBLAS bf16), Triton's `tl.dot` with four warps and with two (mma.sync), and an fp32 SIMT GEMM,
all of the same 2·M·N·K: per call, its repeatability, its ratio to the same metric Nsight Compute
reports for one call of the same kernel, and what sampling costs the sampled kernel.
`python benchmarks/tensor_signature_probe.py` on the GPU host, with cupti-python installed.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable

import torch
import triton
import triton.language as tl

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

    def triton_four_warps() -> object:
        return _mma_sync_gemm[(M // 64, N // 64)](a, b, c, M, N, K, BM=64, BN=64, BK=32, num_warps=4)

    return {
        "cublas_bf16_hgmma": lambda: torch.matmul(a, b.T),
        "triton_4warps": triton_four_warps,
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


PM_METRICS = (
    "TPC.TriageCompute.sm__pipe_tensor_cycles_active_realtime.sum",
    "TPC.TriageCompute.sm__inst_executed_realtime.sum",
    "TPC.TriageCompute.sm__inst_executed_pipe_fma_realtime.sum",
    "SM_A.TriageCompute.sm__inst_executed_pipe_uniform_realtime.sum",
    "SM_A.TriageCompute.sm__thread_inst_executed_pred_on_realtime.sum",
)
NCU_METRICS = (
    "sm__pipe_tensor_cycles_active.sum",
    "sm__inst_executed.sum",
    "sm__inst_executed_pipe_fma.sum",
    "sm__inst_executed_pipe_uniform.sum",
    "sm__thread_inst_executed_pred_on.sum",
    "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum",
    "gpu__time_duration.sum",
)


def _ncu(label: str) -> dict[str, float]:
    """The same kernel once under Nsight Compute: its metrics summed over the kernels of the call."""
    import csv
    import io
    import shutil
    import subprocess

    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    done = subprocess.run(
        [
            ncu,
            "--clock-control",
            "none",
            "--profile-from-start",
            "off",
            "--csv",
            "--page",
            "raw",
            "--print-units",
            "base",
            "--metrics",
            ",".join(NCU_METRICS),
            sys.executable,
            __file__,
            "--once",
            label,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    rows = [line for line in done.stdout.splitlines() if line.startswith('"')]
    totals: dict[str, float] = {}
    if not rows:
        print("ncu gave nothing:", done.stdout[-300:], done.stderr[-300:])
        return totals
    table = list(csv.DictReader(io.StringIO("\n".join(rows))))
    for row in table[1:] if table and not table[0].get("ID", "0").isdigit() else table:
        for metric in NCU_METRICS:
            value = (row.get(metric) or "").replace(",", "")
            try:
                totals[metric] = totals.get(metric, 0.0) + float(value)
            except ValueError:
                pass
    return totals


def _once(label: str) -> int:
    kernels = _kernels()
    fn = kernels[label]
    fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    return 0


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--once":
        return _once(sys.argv[2])
    from cupti import pm_sampling

    torch.cuda.init()
    torch.zeros(1, device="cuda")
    kernels = _kernels()
    for fn in kernels.values():
        fn()
    torch.cuda.synchronize()
    collector = pm_sampling.Collector(0)
    collector.enable()
    collector.configure(
        metrics=list(PM_METRICS), sampling_interval=20_000, single_pass_metric_set_name="TriageCompute"
    )
    flops = 2.0 * M * N * K
    sampled: dict[str, list[list[float]]] = {}
    for label, fn in kernels.items():
        calls = []
        for _ in range(6):
            torch.cuda.synchronize()
            collector.start()
            fn()
            torch.cuda.synchronize()
            collector.stop()
            data = collector.decode()
            calls.append([sum(s.metric_values[i] for s in data) for i in range(len(PM_METRICS))])
        sampled[label] = calls
        print(f"== {label} (2MNK {flops:.4g})")
        for index, metric in enumerate(PM_METRICS):
            values = [call[index] for call in calls]
            mean = statistics.mean(values)
            spread = (max(values) - min(values)) / max(abs(mean), 1e-30)
            print(f"  pm  {metric}: mean {mean:.6g} spread {spread:.3%} per-flop {mean / flops:.4g}")
    for label, fn in kernels.items():
        off = _timed(fn, 20)
        collector.start()
        on = _timed(fn, 20)
        collector.stop()
        collector.decode()
        print(f"cost {label}: off {off:.4f} ms, on {on:.4f} ms, ratio {on / off:.4f}")
    collector.disable()
    for label in kernels:
        totals = _ncu(label)
        print(f"== ncu {label}: {totals}")
        pm = [statistics.mean(call[i] for call in sampled[label]) for i in range(len(PM_METRICS))]
        for index, metric in enumerate(NCU_METRICS[: len(PM_METRICS)]):
            if totals.get(metric):
                print(f"  pm/ncu {metric}: {pm[index] / totals[metric]:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
