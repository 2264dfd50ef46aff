"""Does counting a timed call move its time? The timing stage samples the GPU's counters (CUPTI's PM
sampling, `call_counters.py`) around each timed call of the candidate and not around its baselines', so
any change the sampling causes lands on the candidate's side of the speedup only.

On the headline GEMM's workload (M=8192, N=7168, K=5120, bf16, cuBLAS through torch.matmul), several ways
of making one call, interleaved in a rotating order, each after the same L2 flush and synchronise the
runner makes (`Runner.timed_prepare`):
  plain       the call at once (no idle GPU between the flush and the call);
  idle_Nus    the GPU idle N microseconds first (a baseline call waits out two pipe round trips);
  sampled     the judge's own `CallCounters.start()` before the flush, 200 us idle, the call, and `stop()`
              with its bracket (the candidate's way; before the sampler was started ahead of the flush,
              it had an idle lead of its own between the flush and the call).
Each call is timed by CUDA events around it. Prints each way's median and spread against plain,
sampled against idle_200us (the counting's own share of a counted call's time, apart from the idle's), and
the sampler's own milliseconds per call by part (`CallCounters.parts_s`).
On an H100 at 171b8f3, sampled (then with its lead) ran 1.005x the lead alone and both 0.95-0.96x
plain: the gap, not the sampling, moved the time; the idle ways say from what gap on that stops mattering.

`python benchmarks/pm_sampling_timing_probe.py [--calls N]` on the GPU host, cupti-python installed.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from headline_gemm import operands

from workbench.evaluate.gpu.call_counters import CallCounters

IDLE_US = (20, 50, 200, 1000)
WAYS = ("plain", *(f"idle_{us}us" for us in IDLE_US), "sampled")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60, help="calls of each way")
    args = parser.parse_args()
    torch.cuda.init()
    a, b, c, flush = operands()
    counters = CallCounters(torch.cuda.current_device())
    if counters.collector is None:
        print("no PM sampling here:", counters.why)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    sampled_calls = 0
    parts: dict[str, list[float]] = {}  # the judge's milliseconds around each sampled call, by part

    def idle(seconds: float) -> None:  # a busy wait: time.sleep oversleeps at tens of microseconds
        until = time.perf_counter() + seconds
        while time.perf_counter() < until:
            pass

    def call(way: str) -> None:
        nonlocal sampled_calls
        if way == "sampled":
            counters.start()
        flush.zero_()
        torch.cuda.synchronize()
        if way.startswith("idle_"):
            idle(int(way[5:-2]) / 1e6)
        elif way == "sampled":
            idle(200e-6)
        began = time.time_ns()
        start.record()
        torch.matmul(a, b.T, out=c)
        end.record()
        torch.cuda.synchronize()
        if way == "sampled":
            sampled_calls += bool(counters.stop(began, time.time_ns()))
            for part, seconds in counters.parts_s.items():
                parts.setdefault(part, []).append(seconds * 1e3)
        times[way].append(start.elapsed_time(end))

    for _ in range(10):  # warm-up: cuBLAS's choice, clocks
        for way in WAYS:
            call(way)
    times = {way: [] for way in WAYS}
    sampled_calls = 0
    parts.clear()
    for number in range(args.calls):
        shift = number % len(WAYS)
        for way in WAYS[shift:] + WAYS[:shift]:
            call(way)
    counters.close()
    medians = {way: statistics.median(values) for way, values in times.items()}
    print(
        f"device: {torch.cuda.get_device_name(0)}; {args.calls} calls each; L2 flush {flush.numel() >> 20} MiB"
    )
    for way in WAYS:
        values = times[way]
        spread = (max(values) - min(values)) / medians[way]
        print(
            f"{way:<11} median {medians[way]:.4f} ms  min {min(values):.4f}  max {max(values):.4f}  "
            f"(max-min)/median {spread:.2%}  vs plain {medians[way] / medians['plain']:.4f}"
        )
    print(f"sampled against idle_200us: {medians['sampled'] / medians['idle_200us']:.4f}")
    print(f"sampled calls with counts: {sampled_calls} of {args.calls}")
    print(
        "the sampler's ms per call by part (median):",
        {p: round(statistics.median(v), 3) for p, v in parts.items()},
    )


if __name__ == "__main__":
    main()
