"""What the hardened verdict costs and whether honest speedups moved (run on the GPU host).

1. The five headline references through every tier of the `local` executor, one worker for all, each
   twice (the second warm): stage times, the whole evaluation beyond the build, the speedup, and the
   speedup against the one recorded on 2026-11-29 with the earlier evaluator (in the same JSON file).
2. The headline GEMM and attention backward again with the memcheck gate off: what the gate costs.
3. The dynamic tier alone at the smallest and at the timed workload: what profiling the timed one costs.
Each evaluation also reports the seconds spent outside its stages, by phase (`phases_s`). `--pause S`
waits S seconds before each evaluation, as an agent's model call does, so the worker's spare processes
are started by then.

`python benchmarks/integrity_costs.py OUT.json [--only TASK] [--pause S]`
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import subprocess
import time
from pathlib import Path

from workbench.provenance import revision

ROOT = Path(__file__).resolve().parent.parent
REFERENCES = {
    "gemm_n7168_k5120": "references/gemm/04_ws_persistent.cu",
    "mha_with_lse_d128": "references/attention/mha_fwd_d128.cu",
    "mha_with_lse_d128_causal": "references/attention/mha_fwd_d128_causal.cu",
    "mha_bwd_d128": "references/attention/mha_bwd_d128.cu",
    "mha_bwd_d128_causal": "references/attention/mha_bwd_d128_causal.cu",
}
EARLIER = ROOT / "benchmarks" / "results" / "2026-11-29_references_eval_h200.json"


def row(task: str, result, wall_s: float) -> dict:
    stages = {name: round(stage.duration_s or 0.0, 3) for name, stage in result.stages.in_order()}
    return {
        "task": task,
        "status": result.status.value,
        "message": result.message[:300],
        "speedup": result.stages.timing.speedup,
        "stages_s": stages,
        "beyond_build_s": round(wall_s - stages["build"] - stages["static"], 3),
        "host_overhead_ms": result.stages.timing.host_overhead_ms,
        "baseline_host_overhead_ms": result.stages.timing.baseline_host_overhead_ms,
        "timing_iterations": result.stages.timing.iterations,
        "dynamic": result.stages.dynamic.message[:200],
        "phases_s": result.phases_s,
    }


async def evaluate_all(cache: Path, only: str | None, pause_s: float) -> dict:
    from workbench.evaluate.local_executor import LocalExecutor
    from workbench.evaluate.request import EvalRequest

    executor = LocalExecutor(cache)
    rows: list[dict] = []
    try:
        for sanitize in (True, False):
            for task, path in REFERENCES.items():
                if only and only not in task:
                    continue
                if not sanitize and task not in ("gemm_n7168_k5120", "mha_bwd_d128"):
                    continue
                for attempt in range(2 if sanitize else 1):
                    # An agent's model call comes between two evaluations: the worker's spares start meanwhile.
                    await asyncio.sleep(pause_s)
                    source = (ROOT / path).read_text()
                    started = time.perf_counter()
                    result = await executor.evaluate(
                        EvalRequest(task=task, target="hopper", source=source, sanitize=sanitize)
                    )
                    entry = row(task, result, time.perf_counter() - started)
                    entry.update(sanitize=sanitize, attempt=attempt + 1)
                    rows.append(entry)
                    print(json.dumps(entry), flush=True)
    finally:
        await executor.close()
    return {"evaluations": rows}


async def dynamic_alone(cache: Path) -> list[dict]:
    """The dynamic tier by itself at the smallest and at the headline workload of two references."""
    from workbench.evaluate.build.nvcc import compile_source
    from workbench.evaluate.gpu.kernel_names import module_kernels
    from workbench.evaluate.gpu.worker import worker_argv
    from workbench.evaluate.gpu_spec import gpu_spec
    from workbench.evaluate.worker_client import WorkerClient
    from workbench.tasks import Catalogue, get_target

    catalogue = Catalogue.load()
    target = get_target("hopper")
    client = WorkerClient(worker_argv())
    out = []
    try:
        for task_name in ("gemm_n7168_k5120", "mha_bwd_d128"):
            task = catalogue.get(task_name)
            built = await compile_source((ROOT / REFERENCES[task_name]).read_text(), target, 600, cache)
            kernels = module_kernels(built.library_path)
            for label, workload in (("smallest", task.smallest_workload()), ("timed", task.workload(None))):
                spec = gpu_spec(task, workload, target, catalogue)
                started = time.perf_counter()
                reply = await client.evaluate_library(built.library_path, spec, kernels, stages=["dynamic"])
                stage = reply["stages"]["dynamic"]
                out.append(
                    {
                        "task": task_name,
                        "workload": label,
                        "axes": spec["axes"],
                        "dynamic_s": round(stage.get("duration_s") or 0.0, 3),
                        "wall_s": round(time.perf_counter() - started, 3),
                        "status": stage["status"],
                        "message": stage["message"][:200],
                    }
                )
                print(json.dumps(out[-1]), flush=True)
    finally:
        await client.close()
    return out


def compare(report: dict) -> list[dict]:
    earlier = json.loads(EARLIER.read_text()) if EARLIER.is_file() else {}
    lines = []
    for entry in report["evaluations"]:
        if not entry["sanitize"] or entry["attempt"] != 2:
            continue
        before = (earlier.get(entry["task"]) or {}).get("stages", {}).get("timing", {}).get("speedup")
        now = entry["speedup"]
        lines.append(
            {
                "task": entry["task"],
                "speedup_2026_11_29": before,
                "speedup_now": now,
                "ratio": (now / before) if now and before else None,
                "beyond_build_s": entry["beyond_build_s"],
            }
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", help="only the references whose task name contains this")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between two evaluations")
    args = parser.parse_args()
    cache = Path(os.environ.get("PTXWB_CACHE", "/tmp/ptxwb-cache"))
    report: dict = {
        "date": datetime.date.today().isoformat(),
        "git_sha": revision(),
        "device": subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip(),
    }
    report["pause_s"] = args.pause
    report.update(asyncio.run(evaluate_all(cache, args.only, args.pause)))
    report["dynamic_alone"] = [] if args.only else asyncio.run(dynamic_alone(cache))
    report["speedups"] = compare(report)
    args.out.write_text(json.dumps(report, indent=1))
    print("\ntask                        before   now     ratio   beyond-build (warm, gate on)")
    for line in report["speedups"]:
        ratio = f"{line['ratio']:.4f}" if line["ratio"] else "-"
        before = f"{line['speedup_2026_11_29']:.4f}" if line["speedup_2026_11_29"] else "-"
        now = f"{line['speedup_now']:.4f}" if line["speedup_now"] else "-"
        print(f"{line['task']:<27} {before:>7} {now:>7} {ratio:>7}   {line['beyond_build_s']:.2f} s")
    for entry in report["evaluations"]:
        if entry["sanitize"] and entry["attempt"] == 2:
            print(f"outside the stages: {entry['task']} {entry['phases_s']}")
    for entry in report["evaluations"]:
        if not entry["sanitize"]:
            print(
                f"gate off: {entry['task']} beyond-build {entry['beyond_build_s']:.2f} s {entry['stages_s']}"
            )
    for entry in report["dynamic_alone"]:
        print(
            f"dynamic alone: {entry['task']} {entry['workload']} {entry['axes']} {entry['dynamic_s']:.2f} s"
        )


if __name__ == "__main__":
    main()
