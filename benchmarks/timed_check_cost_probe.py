"""What does checking one timed call's output cost? The judge checks every timed call
(`correctness.passes_quickly`). Until 3e99377 its common case was ten float32 passes and a count over
copies the size of the output: for the headline GEMM's 8192 x 7168 bf16 output on an H100, 2.04 ms a
check (0.10 s of an evaluation's 0.23 s of checks). Since, on a GPU, it is one elementwise pass compiled at
run time by torch's jiterator (`correctness.within_flags`) and one count: 0.60 ms at 3e99377.

Ways, on that output (an honest one: the product in float32 rounded to bf16, against cuBLAS's bf16
answer as the reference; the same with one element far outside the tolerance; with one NaN):
  torch_steps     the ten float32 passes and the count, as the judge ran them before;
  passes_quickly  the judge's check as it is.
Prints each way's median ms per check and whether the two agree on every case.

`python benchmarks/timed_check_cost_probe.py [--checks N]` on the GPU host.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from headline_gemm import operands

from workbench.evaluate.gpu.correctness import float32_limit, passes_quickly


def torch_steps(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> bool:
    """The common case as ten float32 passes and a count, as the judge ran it before the one pass."""
    x, y = actual.float(), expected.float()
    within = torch.sub(x, y).abs_() <= float32_limit(y, atol, rtol)
    return int(within.sum()) == within.numel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=50, help="checks of each way and case")
    args = parser.parse_args()
    a, b, _, _ = operands()
    want = a @ b.T
    atol = rtol = 1e-2  # the tasks' default tolerances (`correctness.output_tolerance`)
    honest = (a.float() @ b.T.float()).to(torch.bfloat16)
    cases = {"honest": honest}
    far = honest.clone()
    far.view(-1)[12345] = far.view(-1)[12345] * 1.5 + 1.0
    cases["outside"] = far
    nan = honest.clone()
    nan.view(-1)[777] = float("nan")
    cases["nan"] = nan
    started = time.perf_counter()
    passes_quickly(want, want, atol, rtol)
    torch.cuda.synchronize()
    print(f"device: {torch.cuda.get_device_name(0)}; output {tuple(want.shape)} {want.dtype}")
    print(f"passes_quickly: jiterator compile and first call {time.perf_counter() - started:.3f} s")
    ways: dict[str, Callable[[torch.Tensor, torch.Tensor, float, float], bool]] = {
        "torch_steps": torch_steps,
        "passes_quickly": passes_quickly,
    }
    for case, got in cases.items():
        answers = {}
        for way, check in ways.items():
            times = []
            for _ in range(args.checks):
                torch.cuda.synchronize()
                began = time.perf_counter()
                answers[way] = check(got, want, atol, rtol)
                torch.cuda.synchronize()
                times.append((time.perf_counter() - began) * 1e3)
            print(f"{case:<8} {way:<15} {statistics.median(times):.3f} ms (median) -> {answers[way]}")
        print(f"{case:<8} agree: {answers['passes_quickly'] == answers['torch_steps']}")


if __name__ == "__main__":
    main()
