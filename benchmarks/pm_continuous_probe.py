"""Could one PM-sampling window cover a whole timing stage, each call's counts cut out of it by time? Today
the judge starts and stops the sampler around every counted call (CUPTI's start 0.7 ms and stop 1.7 ms a
call on H100s), and every other entrant's call idles as long as the counted call waits for the start, so
that no call is told apart: about 0.3 s of the headline GEMM's round-3 cost. One window, started once and
drained on a thread while the calls run, would need two things this probe measures:

  clocks  in which host clock the samples' timestamps are: CUPTI's own (`cupti.get_timestamp`), the
          realtime or the monotonic clock. For each, the tensor-pipe cycles of the samples that overlap
          each call's host bracket (the call asked, its answer back), against the same call counted alone
          (a window of its own, as the judge counts today), and what lies outside every bracket;
  drain   whether the hardware buffer can be decoded while sampling goes on (every `--every` calls), with
          no sample lost or read twice (timestamps strictly after the last drain's), and at what cost.

One process, the headline GEMM's cuBLAS call after an L2 flush and 1 ms of idle, `--calls` times. At
31f66f1 on an H100 the timestamps were CUPTI's clock, which is the realtime clock; each bracket summed
1.0000x the call counted alone, nothing outside any bracket; the drains read every sample once. Built on
that at 2a9476d and reverted: CUPTI's decode follows every sample of the stage (0.26-0.56 s a drain of
3,000-11,000 samples here; 0.8-2.3 s an evaluation in the timing stage against 0.11-0.31 s for the
per-call windows), and a drain held more samples than the time since the last one gave room for.
`python benchmarks/pm_continuous_probe.py [--calls N] [--every K]` on the GPU host, cupti-python installed.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from headline_gemm import operands

from workbench.evaluate.gpu.agreement import COUNTERS
from workbench.evaluate.gpu.call_counters import METRIC_SET, SAMPLING_INTERVAL_NS, CallCounters

TENSOR = 0  # the tensor pipe's cycles: the first of COUNTERS' metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--every", type=int, default=8)
    args = parser.parse_args()
    import cupti.cupti as api
    from cupti import pm_sampling

    a, b, c, flush = operands()
    device = torch.cuda.current_device()
    metrics = [counter.sampled for counter in COUNTERS.values()]
    clocks: dict[str, Callable[[], int]] = {
        "cupti": api.get_timestamp,
        "realtime": time.time_ns,
        "monotonic": time.monotonic_ns,
    }
    for _ in range(3):
        torch.matmul(a, b.T, out=c)
    torch.cuda.synchronize()

    # The call counted alone, as the judge does today: what each bracket's samples should add up to.
    alone = CallCounters(device)
    for _ in range(5):
        flush.zero_()
        torch.cuda.synchronize()
        alone.start()
        time.sleep(0.0002)
        began = time.time_ns()
        torch.matmul(a, b.T, out=c)
        torch.cuda.synchronize()
        alone.stop_beside(began, time.time_ns())
    alone.close()
    counted = statistics.median(window["tensor_cycles"] for window in alone.windows)
    print(f"device: {torch.cuda.get_device_name()}; one call counted alone: {counted:.6g} tensor cycles")

    collector = pm_sampling.Collector(device)
    collector.enable()
    collector.configure(
        metrics=metrics,
        hardware_buffer_size=256 * 1024 * 1024,
        sampling_interval=SAMPLING_INTERVAL_NS,
        single_pass_metric_set_name=METRIC_SET,
    )
    samples: list[tuple[int, int, float]] = []
    drains: list[tuple[float, int, str]] = []

    def drain() -> None:
        began = time.perf_counter()
        try:
            data: Any = collector.decode(max_samples=20_000)
            got = [(s.start_timestamp, s.end_timestamp, float(s.metric_values[TENSOR])) for s in data]
            said = ""
        except Exception as exc:  # noqa: BLE001 - a drain while sampling may not be allowed: the answer
            got, said = [], f"{type(exc).__name__}: {str(exc)[:120]}"
        if got and samples and got[0][0] < samples[-1][1]:
            said += f" overlaps the last drain by {samples[-1][1] - got[0][0]} ns"
        samples.extend(got)
        drains.append((time.perf_counter() - began, len(got), said))

    brackets: list[tuple[dict[str, int], dict[str, int]]] = []
    collector.start()
    for number in range(args.calls):
        flush.zero_()
        torch.cuda.synchronize()
        time.sleep(0.001)
        before = {name: clock() for name, clock in clocks.items()}
        torch.matmul(a, b.T, out=c)
        torch.cuda.synchronize()
        after = {name: clock() for name, clock in clocks.items()}
        brackets.append((before, after))
        time.sleep(0.001)
        if (number + 1) % args.every == 0:
            drain()
    time.sleep(0.001)
    collector.stop()
    drain()
    collector.disable()

    seconds = [round(d[0] * 1e3, 2) for d in drains]
    print(f"drain: {len(drains)} decodes, ms each {seconds}, samples each {[d[1] for d in drains]}")
    for _, _, said in drains:
        if said:
            print(f"drain: {said}")
    if not samples:
        return
    steps = [later[0] - earlier[1] for earlier, later in itertools.pairwise(samples)]
    print(
        f"samples: {len(samples)}; gaps between consecutive samples (ns) min {min(steps)} max {max(steps)}; "
        f"first sample starts {samples[0][0]}, last ends {samples[-1][1]}"
    )
    total = sum(sample[2] for sample in samples)
    for name in clocks:
        sums = []
        inside = 0.0
        for before, after in brackets:
            overlapping = [s for s in samples if s[1] > before[name] and s[0] < after[name]]
            sums.append(sum(s[2] for s in overlapping))
            inside += sums[-1]
        if not any(sums):
            print(f"clock {name}: no sample overlaps any bracket (not this clock's domain)")
            continue
        print(
            f"clock {name}: per call {min(sums):.6g}-{max(sums):.6g} tensor cycles (median "
            f"{statistics.median(sums):.6g}, {statistics.median(sums) / counted:.4f}x the call alone); "
            f"outside every bracket {total - inside:.6g} of {total:.6g}"
        )


if __name__ == "__main__":
    main()
