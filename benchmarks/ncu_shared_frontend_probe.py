"""Probe (GPU host): is Nsight Compute's one-time set-up at a process's first profiled range paid by
each profiled process, or once by the ncu front-end that launched it?

Every candidate's profiled call runs in a fresh process under its own ncu run, and that run's first
range costs about 1.1 s of set-up on an H100 and 1.3-1.5 s on the H200 (`ncu_phases_probe.py`), which
the worker hides by a warm range before the candidate comes but which, back to back, the next
candidate's timing stage still waits for. If the set-up belongs to the front-end, one long-lived ncu
(`--target-processes all`) around a parent that starts each candidate's process would pay it once.
This runs ncu with the worker's own command line (`profile.ncu_command`) around a parent that starts
`--children` processes one after another, each making its context and inputs and then profiling one
GEMM call (torch's bf16 matmul at the headline shape) between cudaProfilerStart/Stop. Per child: the
range's seconds and whether the child's kernel is in ncu's log once the child has exited (a shared
front-end is usable only if each process's results can be read when it ends). For comparison, the same
child alone under its own ncu (`solo`). One JSON line per child.

`python benchmarks/ncu_shared_frontend_probe.py [--children 3]`
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

from workbench.evaluate.gpu.profile import ncu_command
from workbench.evaluate.gpu.worker import find_tool_path

CHILD = r"""
import json, os, time, torch
marks = {"start": time.time()}
torch.cuda.init(); torch.zeros(1, device="cuda"); marks["context"] = time.time()
m, n, k = 8192, 7168, 5120
a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize(); marks["inputs"] = time.time()
torch.cuda.profiler.start(); marks["profiler_start"] = time.time()
torch.matmul(a, b, out=c); torch.cuda.synchronize(); marks["call"] = time.time()
torch.cuda.profiler.stop(); marks["profiler_stop"] = time.time()
print("MARKS", json.dumps(marks), flush=True)
os._exit(0)
"""

# The parent starts each child after the last has exited and reads ncu's log between them.
PARENT = r"""
import json, os, subprocess, sys, time
log, children, child = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for number in range(children):
    spawned = time.time()
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    exited = time.time()
    time.sleep(0.5)  # what ncu writes for the child once it has ended
    text = open(log, errors="replace").read() if os.path.exists(log) else ""
    marks = {}
    for line in done.stdout.splitlines():
        if line.startswith("MARKS "):
            marks = json.loads(line[6:])
    print("CHILD", json.dumps({"number": number, "rc": done.returncode, "spawned": spawned, "exited": exited,
          "marks": marks, "log_bytes": len(text), "kernel_rows": text.count("nvjet")}), flush=True)
"""


def child_row(row: dict, kind: str) -> dict:
    marks = row.get("marks") or {}
    steps = {}
    last = row["spawned"]
    for key in ("start", "context", "inputs", "profiler_start", "call", "profiler_stop"):
        if key in marks:
            steps[key] = round(marks[key] - last, 3)
            last = marks[key]
    steps["exit"] = round(row["exited"] - last, 3)
    return {
        "kind": kind,
        "child": row["number"],
        "rc": row["rc"],
        "steps_s": steps,
        "range_s": round(marks["profiler_stop"] - marks["profiler_start"], 3) if marks else None,
        "log_bytes_after_exit": row["log_bytes"],
        "kernel_rows_after_exit": row["kernel_rows"],
    }


def run(ncu: str, children: int, kind: str) -> list[dict]:
    folder = Path(tempfile.mkdtemp(prefix="ncu-shared-"))
    log = str(folder / "ncu.log")
    app = [sys.executable, "-c", PARENT, log, str(children), CHILD]
    started = time.time()
    done = subprocess.run(ncu_command(ncu, log, "hopper", app), capture_output=True, text=True, check=False)
    rows = [
        child_row(json.loads(line[6:]), kind)
        for line in done.stdout.splitlines()
        if line.startswith("CHILD ")
    ]
    text = Path(log).read_text(errors="replace") if os.path.exists(log) else ""
    rows.append(
        {
            "kind": kind,
            "ncu_rc": done.returncode,
            "wall_s": round(time.time() - started, 3),
            "log_bytes_at_end": len(text),
            "kernel_rows_at_end": text.count("nvjet"),
            "ncu_said": [line for line in text.splitlines() if line.startswith("==")][:6],
        }
    )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--children", type=int, default=3)
    args = parser.parse_args()
    ncu = find_tool_path("ncu")
    if ncu is None:
        print("ncu is not installed on this host", file=sys.stderr)
        return 1
    for row in run(ncu, 1, "solo") + run(ncu, args.children, "shared"):
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
