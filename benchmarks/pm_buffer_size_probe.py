"""Does the PM sampler's hardware buffer size set what a counted call costs the judge? CUPTI's stop and
decode took 1.7 ms and 3.6-4.7 ms a call on H100s with cupti-python's default 512 MiB buffer
(`pm_sampling_timing_probe.py`), against about 60 samples a call holds. Reading a window again only
once, after the last call, is not possible: a start after a stop without a decode fails with
ERROR_UNKNOWN (H100, 5d849c9).

For each buffer size, one collector (`CallCounters`, as the judge configures it) counts the headline
GEMM's call (M=8192, N=7168, K=5120, bf16, cuBLAS through torch.matmul) after the runner's L2 flush,
several times; prints each size's median milliseconds by part, the trimmed tensor-pipe cycles' median
and spread (a smaller buffer must count the same), and any call whose samples could not be read.

`python benchmarks/pm_buffer_size_probe.py [--calls N]` on the GPU host, cupti-python installed.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from workbench.evaluate.gpu.agreement import COUNTERS
from workbench.evaluate.gpu.call_counters import CallCounters
from workbench.evaluate.gpu.runner import l2_flush_bytes

SIZES_MIB = (512, 64, 8, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40, help="counted calls of each size")
    args = parser.parse_args()
    torch.cuda.init()
    a = torch.randn(8192, 5120, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(7168, 5120, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(8192, 7168, device="cuda", dtype=torch.bfloat16)
    flush = torch.empty(l2_flush_bytes("cuda"), dtype=torch.uint8, device="cuda")
    tensor = next(iter(COUNTERS))
    print(f"device: {torch.cuda.get_device_name(0)}; {args.calls} counted calls each")
    for _ in range(5):  # cuBLAS's choice and clocks, before any size is counted
        torch.matmul(a, b.T, out=c)
    for mib in SIZES_MIB:
        counters = CallCounters(torch.cuda.current_device(), hardware_buffer_bytes=mib << 20)
        if counters.collector is None:
            print(f"{mib} MiB: no sampler: {counters.why}")
            continue
        parts: dict[str, list[float]] = {}
        cycles: list[float] = []
        lost = 0
        for number in range(args.calls + 3):  # the first three warm the collector
            flush.zero_()
            torch.cuda.synchronize()
            counters.start()
            torch.matmul(a, b.T, out=c)
            torch.cuda.synchronize()
            _, trimmed = counters.stop()
            if number < 3:
                continue
            if not trimmed:
                lost += 1
                continue
            cycles.append(trimmed[tensor])
            for part, seconds in counters.parts_s.items():
                parts.setdefault(part, []).append(seconds * 1e3)
        counters.close()
        middle = statistics.median(cycles) if cycles else 0.0
        spread = (max(cycles) - min(cycles)) / middle if middle else 0.0
        print(
            f"{mib} MiB: ms per call by part (median) "
            f"{ {p: round(statistics.median(v), 3) for p, v in parts.items()} }; "
            f"{tensor} median {middle:.4g}, (max-min)/median {spread:.2%}; "
            f"calls not read {lost}{' (' + counters.why + ')' if lost else ''}"
        )


if __name__ == "__main__":
    main()
