"""Does counting a timed call move its time? The timing stage samples the GPU's counters (CUPTI's PM
sampling, `call_counters.py`) around each timed call of the candidate and not around its baselines', so
any slowdown the sampling or its lead causes lands on the candidate's side of the speedup only.

On the headline GEMM's workload (M=8192, N=7168, K=5120, bf16, cuBLAS through torch.matmul), three ways
of making one call, interleaved in a rotating order, each after the same L2 flush the runner makes:
  plain     the call alone (what a baseline call is);
  lead      the sampler's idle lead before the call and its settle after, with no sampling;
  sampled   the call between the judge's own `CallCounters.start()` and `stop()` (the candidate's way).
Each call is timed by CUDA events around it. Prints each way's median and spread, and lead/plain and
sampled/plain: the share of a counted call's time that is the counting's, not the kernel's.

`python benchmarks/pm_sampling_timing_probe.py [--calls N]` on the GPU host, cupti-python installed.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from workbench.evaluate.gpu.call_counters import LEAD_S, SETTLE_S, CallCounters
from workbench.evaluate.gpu.runner import l2_flush_bytes

WAYS = ("plain", "lead", "sampled")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60, help="calls of each way")
    args = parser.parse_args()
    torch.cuda.init()
    a = torch.randn(8192, 5120, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(7168, 5120, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(8192, 7168, device="cuda", dtype=torch.bfloat16)
    flush = torch.empty(l2_flush_bytes("cuda"), dtype=torch.uint8, device="cuda")
    counters = CallCounters(torch.cuda.current_device())
    if counters.collector is None:
        print("no PM sampling here:", counters.why)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    tensor_cycles: list[float] = []

    def call(way: str) -> None:
        flush.zero_()
        torch.cuda.synchronize()
        if way == "lead":
            time.sleep(LEAD_S)
        elif way == "sampled":
            counters.start()
        start.record()
        torch.matmul(a, b.T, out=c)
        end.record()
        torch.cuda.synchronize()
        if way == "lead":
            time.sleep(SETTLE_S)
        elif way == "sampled":
            _, trimmed = counters.stop()
            if trimmed:
                tensor_cycles.append(next(iter(trimmed.values())))
        times[way].append(start.elapsed_time(end))

    for _ in range(10):  # warm-up: cuBLAS's choice, clocks
        for way in WAYS:
            call(way)
    times = {way: [] for way in WAYS}
    for number in range(args.calls):
        shift = number % len(WAYS)
        for way in WAYS[shift:] + WAYS[:shift]:
            call(way)
    counters.close()
    plain = statistics.median(times["plain"])
    print(
        f"device: {torch.cuda.get_device_name(0)}; {args.calls} calls each; L2 flush {flush.numel() >> 20} MiB"
    )
    for way in WAYS:
        values = times[way]
        median = statistics.median(values)
        spread = (max(values) - min(values)) / median
        print(
            f"{way:<8} median {median:.4f} ms  min {min(values):.4f}  max {max(values):.4f}  "
            f"(max-min)/median {spread:.2%}  vs plain {median / plain:.4f}"
        )
    print(f"sampled calls with counts: {len(tensor_cycles)} of {args.calls}")


if __name__ == "__main__":
    main()
