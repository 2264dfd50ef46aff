"""GPU evaluation benchmarks (run on the GPU host): what an evaluation costs and how steady its verdict is.

Prints, and writes as JSON to the path given:
1. the headline GEMM (tests/gpu/kernels/wgmma_gemm.cu on gemm_n7168_k5120, M=8192) through every tier of
   the `local` executor: wall time by stage, cold (nvcc build, worker start) and warm (build cache hit,
   `--pause` seconds between evaluations, as an agent's model call and nvcc build would leave);
2. the same kernel evaluated 5 times: speedup min / median / max, and max/min; the same again for the
   reference GEMM (references/gemm/04_ws_persistent.cu) through the same worker;
3. cuBLAS timed as the candidate against cuBLAS the baseline, 5 times: ratio and spread;
4. CUPTI against CUDA events for one kernel (the wgmma GEMM);
5. optionally the attention reference kernels (`--attention DIR` with mha_*.cu) through every tier.

`python benchmarks/gpu_eval.py OUT.json [--attention DIR]`
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASK = "gemm_n7168_k5120"
KERNEL = ROOT / "tests" / "gpu" / "kernels" / "wgmma_gemm.cu"
SECOND_KERNEL = ROOT / "references" / "gemm" / "04_ws_persistent.cu"


def git_sha() -> str:
    if os.environ.get("PTXWB_GIT_SHA"):
        return os.environ["PTXWB_GIT_SHA"]
    try:
        return (
            subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
            ).stdout.strip()
            or "unknown"
        )
    except OSError:
        return "unknown"


def stage_times(result) -> dict[str, float]:
    return {name: round(stage.duration_s or 0.0, 3) for name, stage in result.stages.in_order()}


async def executor_runs(cache: Path, runs: int, pause_s: float) -> dict[str, list[dict]]:
    """`runs` evaluations of each kernel, one worker for all of them."""
    from workbench.evaluate.local_executor import LocalExecutor

    executor = LocalExecutor(cache)
    rows: dict[str, list[dict]] = {}
    try:
        for kernel in (KERNEL, SECOND_KERNEL):
            rows[kernel.name] = await _runs(executor, kernel.read_text(), runs, pause_s)
    finally:
        await executor.close()
    return rows


async def _runs(executor, source: str, runs: int, pause_s: float) -> list[dict]:
    from workbench.evaluate.request import EvalRequest

    rows = []
    for number in range(runs):
        if number:
            await asyncio.sleep(pause_s)  # what a model call and nvcc build leave for the spares
        started = time.perf_counter()
        result = await executor.evaluate(EvalRequest(task=TASK, target="hopper", source=source))
        wall = time.perf_counter() - started
        timing = result.stages.timing
        rows.append(
            {
                "run": number,
                "status": result.status.value,
                "message": result.message,
                "wall_s": round(wall, 3),
                "build_cache_hit": result.stages.build.cache_hit,
                "stages_s": stage_times(result),
                "beyond_build_s": round(wall - (result.stages.build.duration_s or 0.0), 3),
                "speedup": timing.speedup,
                "candidate_ms": timing.candidate.median_ms if timing.candidate else None,
                "baseline_ms": timing.baselines[0].median_ms if timing.baselines else None,
                "tflops": timing.tflops,
                "tensor_share": result.stages.dynamic.tensor_share,
                "library": result.stages.build.library_path,
                "device": result.device,
                "timing_message": timing.message,
                "timing_rounds": [timing.warmup, timing.iterations],
                "dynamic_message": result.stages.dynamic.message,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def headline_spec() -> dict:
    """The GPU spec of the headline task at its default workload."""
    from workbench.evaluate.gpu_spec import gpu_spec
    from workbench.tasks import Catalogue, get_target

    task = Catalogue.load().get(TASK)
    return gpu_spec(task, task.workload(), get_target("hopper"))


def self_baseline(repeats: int = 5) -> dict:
    """cuBLAS as the candidate against cuBLAS as the baseline, interleaved like any candidate."""
    import torch

    from workbench.evaluate.inputs import make_inputs
    from workbench.evaluate.kernel_trace import open_trace
    from workbench.evaluate.timing import make_baselines, measure_ceilings, run_timing

    spec = headline_spec()
    trace, _ = open_trace()
    ceilings = measure_ceilings()
    a, b = make_inputs(spec, spec["seed"])
    out = torch.empty(a.shape[0], b.shape[0], dtype=a.dtype, device="cuda")
    ratios, spreads = [], []
    for _ in range(repeats):
        stage = run_timing(
            lambda: torch.matmul(a, b.T, out=out),
            make_baselines(spec, [a, b])[0],
            trace,
            spec,
            ceilings,
            None,
        )
        ratios.append(stage["speedup"])
        candidate = stage["candidate"]
        spreads.append((candidate["p75_ms"] - candidate["p25_ms"]) / candidate["median_ms"])
    return {
        "method": trace.method,
        "ratios": ratios,
        "median_ratio": statistics.median(ratios),
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "iqr_over_median": spreads,
        "ceilings": ceilings,
        "trace": trace,
    }


def cupti_vs_events(library: str, trace) -> dict:
    """The same library timed with CUPTI kernel records and with CUDA events, back to back."""
    import torch
    import tvm_ffi

    from workbench.evaluate.inputs import make_inputs, make_outputs
    from workbench.evaluate.kernel_trace import EventTrace
    from workbench.evaluate.timing import run_timing

    spec = headline_spec()
    run = tvm_ffi.load_module(library).run
    inputs, outputs = make_inputs(spec, spec["seed"]), make_outputs(spec)
    rows = {}
    for name, tracer in (("cupti", trace), ("events", EventTrace()), ("cupti again", trace)):
        stage = run_timing(lambda: run(*inputs, *outputs), [], tracer, spec, {}, None)
        rows[name] = {
            key: stage["candidate"][key] for key in ("median_ms", "p25_ms", "p75_ms", "min_ms", "max_ms")
        }
    torch.cuda.synchronize()
    return rows


async def attention_runs(folder: Path, cache: Path) -> list[dict]:
    from workbench.evaluate.local_executor import LocalExecutor
    from workbench.evaluate.request import EvalRequest

    rows = []
    executor = LocalExecutor(cache)
    try:
        for path in sorted(folder.glob("mha_*.cu")):
            task = path.stem.replace("mha_fwd_", "mha_with_lse_")
            started = time.perf_counter()
            result = await executor.evaluate(
                EvalRequest(task=task, target="hopper", source=path.read_text(), run_timeout_s=300)
            )
            row = {
                "kernel": path.name,
                "task": task,
                "status": result.status.value,
                "message": result.message[:300],
                "wall_s": round(time.perf_counter() - started, 2),
                "stages_s": stage_times(result),
                "stage_messages": {name: stage.message[:300] for name, stage in result.stages.in_order()},
                "speedup": result.stages.timing.speedup,
                "tensor_share": result.stages.dynamic.tensor_share,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        await executor.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--attention", type=Path)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument(
        "--pause",
        type=float,
        default=10.0,
        help="seconds between warm runs: an agent turn (model call, nvcc build) lasts longer; the spare ncu run needs ~8 s to start",
    )
    args = parser.parse_args()
    report: dict = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "git_sha": git_sha(),
    }
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "builds"
        kernels = asyncio.run(executor_runs(cache, args.runs, args.pause))
        runs = kernels[KERNEL.name]
        report["pause_between_runs_s"] = args.pause
        report["device"] = runs[0]["device"]
        report["headline_runs"] = runs
        report["same_kernel"] = {name: spread(rows[1:]) for name, rows in kernels.items()}
        report["second_kernel_runs"] = kernels[SECOND_KERNEL.name]
        selfie = self_baseline()
        trace = selfie.pop("trace")
        report["cublas_vs_itself"] = selfie
        report["cupti_vs_events"] = cupti_vs_events(runs[0]["library"], trace)
        if args.attention:
            report["attention"] = asyncio.run(attention_runs(args.attention, cache))
    args.out.write_text(json.dumps(report, indent=1))
    print_summary(report)


def spread(warm: list[dict]) -> dict:
    speedups = [r["speedup"] for r in warm if r["speedup"]]
    return {
        "speedups": speedups,
        "min": min(speedups),
        "median": statistics.median(speedups),
        "max": max(speedups),
        "max_over_min": max(speedups) / min(speedups),
    }


def print_summary(report: dict) -> None:
    runs = report["headline_runs"]
    print(
        f"\n== GPU evaluation benchmark  {report['date']}  git {report['git_sha'][:12]}  {report['device']}"
    )
    print(f"headline {TASK} M=8192, wgmma_gemm.cu, all five tiers ({runs[0]['status']})")
    stages = list(runs[0]["stages_s"])
    warm = runs[1:]
    print(
        f"warm runs: build cache hit, {report['pause_between_runs_s']:g} s between runs for the spare child"
    )
    print(f"{'stage':<12} {'cold s':>8} {'warm s (median of ' + str(len(warm)) + ')':>22}")
    for name in stages:
        print(
            f"{name:<12} {runs[0]['stages_s'][name]:>8.2f} {statistics.median(r['stages_s'][name] for r in warm):>22.2f}"
        )
    print(f"{'wall':<12} {runs[0]['wall_s']:>8.2f} {statistics.median(r['wall_s'] for r in warm):>22.2f}")
    print(
        f"{'beyond build':<12} {runs[0]['beyond_build_s']:>8.2f} {statistics.median(r['beyond_build_s'] for r in warm):>22.2f}"
    )
    for name, same in report["same_kernel"].items():
        print(
            f"same kernel x{len(same['speedups'])} ({name}): speedup min {same['min']:.4f} median "
            f"{same['median']:.4f} max {same['max']:.4f}; max/min {same['max_over_min']:.4f}"
        )
    second = report["second_kernel_runs"][1:]
    print(
        f"{SECOND_KERNEL.name} warm: beyond build median "
        f"{statistics.median(r['beyond_build_s'] for r in second):.2f} s"
    )
    print(
        f"candidate {statistics.median(r['candidate_ms'] for r in warm):.4f} ms vs cuBLAS "
        f"{statistics.median(r['baseline_ms'] for r in warm):.4f} ms; {statistics.median(r['tflops'] for r in warm):.0f} TFLOP/s"
    )
    selfie = report["cublas_vs_itself"]
    print(
        f"cuBLAS vs itself x{len(selfie['ratios'])} ({selfie['method']}): ratio median {selfie['median_ratio']:.4f} "
        f"min {selfie['min_ratio']:.4f} max {selfie['max_ratio']:.4f}; IQR/median "
        f"{max(selfie['iqr_over_median']):.4f} at most"
    )
    print(
        f"ceilings: {selfie['ceilings']['tensor_tflops']:.0f} TFLOP/s bf16, {selfie['ceilings']['bandwidth_tbps']:.2f} TB/s"
    )
    for name, row in report["cupti_vs_events"].items():
        print(
            f"{name:<12} median {row['median_ms']:.4f} ms  IQR {row['p25_ms']:.4f}-{row['p75_ms']:.4f}  "
            f"min {row['min_ms']:.4f} max {row['max_ms']:.4f}"
        )
    for row in report.get("attention", []):
        print(
            f"{row['kernel']:<26} {row['status']:<22} speedup {row['speedup']} share {row['tensor_share']} "
            f"wall {row['wall_s']} s {row['stages_s']}"
        )


if __name__ == "__main__":
    main()
