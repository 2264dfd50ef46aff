"""What does checking one timed call's output cost, and can one pass do it? The judge checks every timed
call (`correctness.passes_quickly`): on an H100 at 0f76f1e, 0.10 s of an evaluation's 0.23 s of checks
went to comparing the headline GEMM's 8192 x 7168 bf16 output with the reference's (about 2 ms a call),
in ten elementwise kernels and a count over float32 copies the size of the output (read from its code).

Ways, on that output (an honest one: the product in float32 rounded to bf16, against cuBLAS's bf16
answer as the reference; the same with one element far outside the tolerance; with one NaN):
  torch      `passes_quickly` as the judge runs it;
  one_pass   the rule's common case, every element within max(atol, rtol (|y| + EPS)), as one elementwise
             kernel compiled at run time by torch's jiterator (NVRTC), then one count; where it says no,
             the judge would go on to `passes_quickly`'s remaining steps.
Prints each way's median ms per check and whether the two agree on every case.

`python benchmarks/timed_check_cost_probe.py [--checks N]` on the GPU host.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from workbench.evaluate.gpu.correctness import EPS, passes_quickly

WITHIN_CODE = """
template <typename T> T within(T actual, T expected, float atol, float rtol, float eps) {
    float x = static_cast<float>(actual), y = static_cast<float>(expected);
    float limit = fmaxf(atol, rtol * (fabsf(y) + eps));
    return static_cast<T>(fabsf(x - y) <= limit ? 1.0f : 0.0f);
}
"""


def one_pass_check() -> Callable[[torch.Tensor, torch.Tensor, float, float], bool]:
    within = torch.cuda.jiterator._create_jit_fn(WITHIN_CODE, atol=0.0, rtol=0.0, eps=EPS)

    def check(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> bool:
        flags = within(actual, expected, atol=atol, rtol=rtol, eps=EPS)
        return int(torch.count_nonzero(flags)) == flags.numel()

    return check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=50, help="checks of each way and case")
    args = parser.parse_args()
    a = torch.randn(8192, 5120, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(7168, 5120, device="cuda", dtype=torch.bfloat16)
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
    one_pass = one_pass_check()
    one_pass(want, want, atol, rtol)
    torch.cuda.synchronize()
    print(f"device: {torch.cuda.get_device_name(0)}; output {tuple(want.shape)} {want.dtype}")
    print(f"one_pass: jiterator compile and first call {time.perf_counter() - started:.3f} s")
    ways: dict[str, Callable[[torch.Tensor, torch.Tensor, float, float], bool]] = {
        "torch": passes_quickly,
        "one_pass": one_pass,
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
            print(f"{case:<8} {way:<9} {statistics.median(times):.3f} ms (median) -> {answers[way]}")
        # one_pass may say no where passes_quickly's later steps say yes; never yes where it says no.
        agree = answers["one_pass"] == answers["torch"] or not answers["one_pass"]
        print(f"{case:<8} agree: {agree}")


if __name__ == "__main__":
    main()
