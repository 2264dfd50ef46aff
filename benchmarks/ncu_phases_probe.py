"""Probe (GPU host): where the dynamic tier's 1.4-1.7 s go between the go signal and ncu's exit, when the
profiled child was fully prepared. Runs ncu with the worker's own command line (`profile.ncu_command`)
around a child that mirrors `candidate_entry.once` (context, inputs, calls before, one call between
cudaProfilerStart/Stop, `os._exit`) and prints wall-clock marks; the parent adds ncu's exit. One JSON
line per run, for several metric sets, so the cost of each part of the command shows side by side.

The profiled kernel is torch's bf16 GEMM at the headline task's shape (a cuBLAS kernel of similar size
to the reference's; SASS patching and replay scale with the kernel, not with who wrote it).

Run: `python benchmarks/ncu_phases_probe.py [--repeats 2] [--only VARIANT ...]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workbench.evaluate.gpu.profile import LAUNCH_METRICS, METRICS, TIME_METRIC, ncu_command, tensor_metric
from workbench.evaluate.gpu.worker import find_tool_path

CHILD = r"""
import json, os, sys, time, torch
marks = {"start": time.time()}
torch.cuda.init(); torch.zeros(1, device="cuda"); marks["context"] = time.time()
m, n, k = 8192, 7168, 5120
a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize(); marks["inputs"] = time.time()
if int(sys.argv[2]):  # a range of one tiny kernel first: does ncu's one-time set-up move out of the call?
    torch.cuda.profiler.start(); c[0, 0].add_(0); torch.cuda.synchronize(); torch.cuda.profiler.stop()
marks["warmed"] = time.time()
time.sleep(0.5); marks["go"] = time.time()
for _ in range(int(sys.argv[1])):
    torch.matmul(a, b, out=c)
torch.cuda.synchronize(); marks["calls_before"] = time.time()
torch.cuda.profiler.start(); marks["profiler_start"] = time.time()
torch.matmul(a, b, out=c); torch.cuda.synchronize(); marks["call"] = time.time()
torch.cuda.profiler.stop(); marks["profiler_stop"] = time.time()
print("MARKS", json.dumps(marks), flush=True)
os._exit(0)
"""


def run(ncu: str, name: str, calls_before: int) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="ncu-probe-"))
    log = str(folder / "ncu.log")
    child = [sys.executable, "-c", CHILD, str(calls_before), str(int(name.endswith("_warmed")))]
    argv = command_for(ncu, name, log, child)
    launched = time.time()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    exited = time.time()
    marks: dict[str, float] = {}
    for line in done.stdout.splitlines():
        if line.startswith("MARKS "):
            marks = json.loads(line[6:])
    steps: dict[str, float] = {}
    last = launched
    for key in (
        "start",
        "context",
        "inputs",
        "go",
        "calls_before",
        "profiler_start",
        "call",
        "profiler_stop",
    ):
        if key in marks:
            steps[key] = round(marks[key] - last, 3)
            last = marks[key]
    steps["ncu_exit"] = round(exited - last, 3)
    after_go = round(exited - marks["go"], 3) if "go" in marks else None
    return {"variant": name, "calls_before": calls_before, "rc": done.returncode, "steps_s": steps,
            "go_to_exit_s": after_go, "log_bytes": os.path.getsize(log) if os.path.exists(log) else 0}  # fmt: skip


def command_for(ncu: str, name: str, log: str, child: list[str]) -> list[str]:
    full = ncu_command(ncu, log, "hopper", child, required="")
    if name.startswith("worker"):
        return full
    changed = list(full)

    def metrics(value: str) -> None:  # by the flag, wherever the sections put it
        changed[changed.index("--metrics") + 1] = value

    wanted = full[full.index("--metrics") + 1]
    if name == "no_per_opcode":
        metrics(",".join([TIME_METRIC, tensor_metric("hopper") or TIME_METRIC]))
    elif name == "time_only":
        metrics(TIME_METRIC)
    elif name == "no_rules":  # the section kept, ncu's analysis rules for it not run
        changed[1:1] = ["--apply-rules", "no"]
    elif name in ("no_launch_stats", "launch_metrics"):
        at = changed.index("LaunchStats")
        del changed[at - 1 : at + 1]
        if name == "launch_metrics":  # the six attributes the agreement check reads, by name
            metrics(wanted + "," + ",".join(LAUNCH_METRICS.values()))
    elif name == "per_opcode_only":
        metrics(METRICS[0])
    return changed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--only", nargs="*", help="variants to run (default: all)")
    args = parser.parse_args()
    ncu = find_tool_path("ncu")
    if ncu is None:
        print("ncu is not installed on this host", file=sys.stderr)
        return 1
    plan = [("worker", 0), ("worker", 20), ("no_per_opcode", 0), ("per_opcode_only", 0), ("time_only", 0),
            ("no_launch_stats", 0), ("launch_metrics", 0), ("no_rules", 0), ("worker_warmed", 0),
            ("worker_warmed", 20)]  # fmt: skip
    plan = [(name, calls) for name, calls in plan if not args.only or name in args.only]
    for _ in range(args.repeats):
        for name, calls_before in plan:
            print(json.dumps(run(ncu, name, calls_before)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
