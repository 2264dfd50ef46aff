"""Sweep overhead over bare evaluations: the same candidates judged by the static executor directly,
then through `ptxwb bench run` (scripted models, sessions written and fsync'd, the store filled).

    python benchmarks/bench_sweep.py [--trajectories 12] [--turns 4]

Prints the figures; nothing is timed in the tests. The build cache is warmed first, so both sides
measure judging and bookkeeping, not nvcc (on a GPU host the evaluation dominates even more).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from workbench.bench.folder import SweepFolder
from workbench.bench.runner import SweepRunner
from workbench.bench.spec import parse_spec
from workbench.evaluate.executors import make_executor
from workbench.evaluate.request import EvalRequest
from workbench.provenance import revision

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "tests" / "data" / "kernels"


def kernels() -> list[str]:
    simt = (KERNELS / "abi_example.cu").read_text()
    broken = simt.replace("const int m = ", "const int m = no_such_identifier + ", 1)
    return [broken, simt, (KERNELS / "wgmma_gemm.cu").read_text()]


def answers(turns: int) -> list[str]:
    sources = kernels()
    return [f"Turn {t}.\n\n```cuda\n{sources[t % len(sources)]}```\n" for t in range(turns)]


async def bare(requests: list[EvalRequest], cache: Path) -> float:
    executor = make_executor("static", cache)
    slots = asyncio.Semaphore(os.cpu_count() or 1)  # the sweep's static pool: one build per core

    async def one(request: EvalRequest) -> None:
        async with slots:
            await executor.evaluate(request)

    began = time.perf_counter()
    await asyncio.gather(*(one(r) for r in requests))
    return time.perf_counter() - began


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trajectories", type=int, default=12)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument(
        "--machine", default="unnamed machine", help="How the results header names this machine."
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
        work = Path(tmp)
        cache = work / "cache"
        script = work / "script.json"
        script.write_text(json.dumps(answers(args.turns)))
        spec_text = (
            f'name = "overhead"\nmodels = ["scripted:{script}"]\ntasks = ["gemm_n7168_k5120"]\n'
            f'trajectories = {args.trajectories}\nturns = {args.turns}\nexecutor = "static"\n'
            '[[variants]]\nname = "no-pack"\npack = false\n'
        )
        source = [a.split("```cuda\n", 1)[1].rsplit("```", 1)[0] for a in answers(args.turns)]
        requests = [
            EvalRequest(task="gemm_n7168_k5120", target="hopper", source=source[t])
            for _ in range(args.trajectories)
            for t in range(args.turns)
        ]
        warm = await bare(requests[: args.turns], cache)
        bare_s = await bare(requests, cache)
        runner = SweepRunner(
            SweepFolder(work / "sweep"), parse_spec(spec_text, "spec", work), cache_dir=cache
        )
        began = time.perf_counter()
        summary = await runner.run(spec_text, resume=False)
        sweep_s = time.perf_counter() - began
    n = len(requests)
    extra = (sweep_s - bare_s) / n
    sha = revision()
    print(f"# bench_sweep: {time.strftime('%Y-%m-%d')}, git {sha}, {args.machine} ({platform.machine()}, "
          f"{os.cpu_count()} cores, python {platform.python_version()})")  # fmt: skip
    print(f"trajectories {args.trajectories} x turns {args.turns} = {n} evaluations (static executor, warm cache; "
          f"cold build of the {args.turns} kernels {warm:.2f} s)")  # fmt: skip
    print(f"bare evaluations:   {bare_s:.3f} s  ({1000 * bare_s / n:.1f} ms each)")
    print(
        f"through the sweep:  {sweep_s:.3f} s  ({1000 * sweep_s / n:.1f} ms per turn; {summary.ran} sessions)"
    )
    print(f"sweep overhead:     {1000 * extra:.1f} ms per turn = {100 * (sweep_s / bare_s - 1):.0f} % of a "
          f"cache-hit static evaluation")  # fmt: skip
    # The README's measured cost of one headline-GEMM evaluation on the H200, beyond its build.
    gpu_s = 2.3
    print(f"against a {gpu_s} s GPU evaluation (README, H200): {100 * extra / gpu_s:.2f} % overhead")


if __name__ == "__main__":
    asyncio.run(main())
