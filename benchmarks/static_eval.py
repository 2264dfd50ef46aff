"""Static evaluation speed: plain nvcc vs `ptxwb eval --executor static`, cold and from the cache.

    python benchmarks/static_eval.py [--kernel tests/data/kernels/wgmma_gemm.cu] [--repeats 3]
        [--machine "this machine, no GPU, 2 cores"]

Plain nvcc is the very nvcc line the build stage runs, without `-keep` (what a person would type to
build the same .so). `ptxwb eval` is the installed command, run as a child process with an empty
build cache (cold) and then again (cache hit); both include Python start-up. `evaluate()` is the
same evaluation inside this process (as the agent loop and the TUI run it). Runs are interleaved
so load from other work on the machine hits both sides alike; medians are reported.
Goals: cold ratio <= 1.15, cache hit <= 0.3 s.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workbench.evaluate.build.nvcc import LIBRARY_NAME, SOURCE_NAME, build_toolchain, nvcc_command
from workbench.evaluate.executors import make_executor
from workbench.evaluate.request import EvalRequest
from workbench.tasks import get_target

ROOT = Path(__file__).resolve().parent.parent
TASK = "gemm_n7168_k5120"


def timed(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and all its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{command[0]} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def plain_nvcc_command(target: str) -> list[str]:
    command = nvcc_command(get_target(target), build_toolchain())
    keep = command.index("-keep")
    return command[:keep] + command[keep + 3 :]  # drop -keep -keep-dir keep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", type=Path, default=ROOT / "tests" / "data" / "kernels" / "wgmma_gemm.cu")
    parser.add_argument("--target", default="hopper")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--machine", default="this machine")
    args = parser.parse_args()
    ptxwb = shutil.which("ptxwb") or str(Path(sys.executable).with_name("ptxwb"))
    sha = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout
    print(f"date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}")
    print(f"git: {sha.strip()}")
    print(f"machine: {args.machine} (os.cpu_count()={os.cpu_count()}, load average {os.getloadavg()[0]:.2f})")
    print(f"nvcc: {build_toolchain().release}")
    print(f"kernel: {args.kernel.relative_to(ROOT) if args.kernel.is_relative_to(ROOT) else args.kernel}")

    plain: list[tuple[float, float]] = []
    cold: list[tuple[float, float]] = []
    warm: list[tuple[float, float]] = []
    in_process: list[float] = []
    in_process_cold: list[float] = []
    source = args.kernel.read_text()
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as folder:
            work = Path(folder)
            (work / SOURCE_NAME).write_text(source)
            plain.append(timed(plain_nvcc_command(args.target), work))
            assert (work / LIBRARY_NAME).is_file()
            env = {**os.environ, "PTXWB_CACHE": str(work / "cache")}
            command = [ptxwb, "eval", str(args.kernel), "--task", TASK, "--target", args.target]
            command += ["--executor", "static", "--json"]
            cold.append(timed(command, work, env))
            warm.append(timed(command, work, env))
            request = EvalRequest(task=TASK, target=args.target, source=source)  # type: ignore[arg-type]
            for cache, into in ((work / "cache-in-process", in_process_cold), (work / "cache", in_process)):
                started = time.perf_counter()
                result = asyncio.run(make_executor("static", cache).evaluate(request))
                into.append(time.perf_counter() - started)
            assert result.stages.build.cache_hit, "the in-process evaluation should hit the cache"

    def median(pairs: list[tuple[float, float]], index: int) -> float:
        return statistics.median(pair[index] for pair in pairs)

    def show(pairs: list[tuple[float, float]]) -> str:
        runs = ", ".join(f"{wall:.2f}" for wall, _ in pairs)
        return (
            f"wall median {median(pairs, 0):.3f} s, CPU median {median(pairs, 1):.3f} s  (wall runs: {runs})"
        )

    print(f"plain nvcc:                         {show(plain)}")
    print(f"ptxwb eval --executor static, cold: {show(cold)}")
    print(f"ratio cold / plain, wall:           {median(cold, 0) / median(plain, 0):.3f}  (goal <= 1.15)")
    print(f"ratio cold / plain, CPU:            {median(cold, 1) / median(plain, 1):.3f}")
    print(f"ptxwb eval, cache hit (CLI):        {show(warm)}  (goal <= 0.3 s)")
    print(
        f"evaluate(), cold (in process):      wall median {statistics.median(in_process_cold):.3f} s, "
        f"ratio to plain {statistics.median(in_process_cold) / median(plain, 0):.3f}  (no CLI start-up)"
    )
    print(f"evaluate(), cache hit (in process): wall median {statistics.median(in_process):.3f} s")


if __name__ == "__main__":
    main()
