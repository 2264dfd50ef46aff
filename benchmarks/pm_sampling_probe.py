"""Can the tensor work be counted inside the timed process? CUPTI's PM sampling through cupti-python.

Prints which tensor-pipe metrics PM sampling offers on this GPU, then samples them while cuBLAS runs a
bf16 GEMM (tensor cores) and while it runs an fp32 GEMM without TF32 (no tensor cores), and sums each
metric over the samples against the GEMM's 2·M·N·K. Run on the GPU host with cupti-python installed:
`python benchmarks/pm_sampling_probe.py`.
"""

from __future__ import annotations

import time

import torch

WANTED = ("gmma", "hgmma", "tensor", "hmma")


def main() -> None:
    from cupti import pm_sampling, profiler_host

    torch.cuda.init()
    torch.zeros(1, device="cuda")
    collector = pm_sampling.Collector(0)
    collector.enable()
    chip = collector._chip_name
    print("chip", chip)
    host = profiler_host.ProfilerHost(chip, profiler_host.ProfilerType.PM_SAMPLING)
    host.initialize()
    offered: list[str] = []
    for kind in (
        profiler_host.MetricType.COUNTER,
        profiler_host.MetricType.THROUGHPUT,
        profiler_host.MetricType.RATIO,
    ):
        names = host.get_base_metrics(kind)
        hits = [n for n in names if any(w in n for w in WANTED)]
        print(kind.name, len(names), "metrics;", len(hits), "tensor ones:", hits[:40])
        if kind == profiler_host.MetricType.COUNTER:
            offered = hits
    candidates = [f"{name}.sum" for name in offered][:12] + ["gr__cycles_elapsed.max"]
    usable = []
    for metric in candidates:
        try:
            host.create_config_image([metric])
            usable.append(metric)
        except Exception as exc:  # noqa: BLE001 - a probe: report and go on
            print("not usable:", metric, type(exc).__name__, str(exc)[:100])
    print("usable:", usable)
    m, n, k = 8192, 7168, 5120
    for label, dtype in (("bf16 (tensor cores)", torch.bfloat16), ("fp32, no TF32 (FMA)", torch.float32)):
        torch.backends.cuda.matmul.allow_tf32 = False
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(n, k, device="cuda", dtype=dtype)
        torch.matmul(a, b.T)
        torch.cuda.synchronize()
        for chunk in [usable[i : i + 4] for i in range(0, len(usable), 4)]:
            try:
                collector.configure(metrics=chunk, sampling_interval=100_000)
                collector.start()
                started = time.perf_counter()
                for _ in range(3):
                    torch.matmul(a, b.T)
                torch.cuda.synchronize()
                elapsed = time.perf_counter() - started
                collector.stop()
                data = collector.decode()
                totals = [0.0] * len(chunk)
                for sample in data:
                    for index, value in enumerate(sample.metric_values):
                        totals[index] += value
                flops = 3 * 2.0 * m * n * k
                print(f"{label}: {len(data)} samples over {elapsed * 1e3:.1f} ms")
                for metric, total in zip(chunk, totals, strict=True):
                    print(f"  {metric}: {total:.4g} ({total / flops:.4g} of 3 x 2MNK)")
            except Exception as exc:  # noqa: BLE001 - a probe: report and go on
                print(label, chunk, "failed:", type(exc).__name__, str(exc)[:200])
    collector.disable()


if __name__ == "__main__":
    main()
