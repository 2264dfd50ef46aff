"""Probe (GPU host): can the profiled process's one-time Nsight Compute set-up leave the dynamic tier?

`ncu_phases_probe.py` (2026-12-05, 3d9fae2) found that a profiled range of one tiny kernel before the
call brings ncu's time from the go signal to its exit from 1.7 s to 0.6-0.7 s: about 1.1 s of the tier
is set-up ncu does at its first range, whatever the kernel. The warm range itself took ~1.3 s. For the
worker to gain, that set-up must run while the GPU does something else, and the only long stretch of
GPU work after a spare makes its context is the next candidate's timing stage: timed calls that must
not be disturbed, each counted by CUPTI's PM sampling in the judge (`gpu/call_counters.py`), which
needs the same performance monitors as ncu. This probe answers, for each kind of warm range:

- `cost`: what the warm range takes, and ncu's go-to-exit for the call after it (a warm range whose
  kernel ncu does not profile, `--launch-skip 1`, or with no kernel at all, would leave nothing of the
  warm-up in the report to filter out: do they save as much?);
- `overlap`: with a timing loop in another process (the headline GEMM's shape through torch, CUDA
  events, PM sampling around every call exactly as the judge does) running while the warm range runs:
  whether either side fails, and the calls' times and sampled tensor-pipe cycles inside the warm
  range's span against those outside it.

One JSON line per run. `python benchmarks/ncu_warm_overlap_probe.py [--repeats 2] [--only KIND ...]`
on the GPU host, with cupti-python installed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workbench.evaluate.gpu.profile import ncu_command
from workbench.evaluate.gpu.worker import find_tool_path

# The profiled process: context, inputs, then (on the `warm` file) the warm range, then (on `go`) the
# call between cudaProfilerStart/Stop; it writes wall-clock marks to `marks.json`.
PROFILED = r"""
import json, os, sys, time, torch
folder, kind = sys.argv[1], sys.argv[2]
def wait(name):
    while not os.path.exists(os.path.join(folder, name)):
        time.sleep(0.001)
marks = {"start": time.time()}
torch.cuda.init(); torch.zeros(1, device="cuda"); marks["context"] = time.time()
m, n, k = 8192, 7168, 5120
a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize(); marks["inputs"] = time.time()
open(os.path.join(folder, "ready"), "w").close()
wait("warm"); marks["warm_start"] = time.time()
if kind != "none":
    torch.cuda.profiler.start()
    if kind != "empty":
        c[0, 0].add_(0)
        torch.cuda.synchronize()
    torch.cuda.profiler.stop()
marks["warm_end"] = time.time()
open(os.path.join(folder, "warmed"), "w").close()
wait("go"); marks["go"] = time.time()
torch.cuda.profiler.start(); torch.matmul(a, b, out=c); torch.cuda.synchronize(); marks["call"] = time.time()
torch.cuda.profiler.stop()
open(os.path.join(folder, "marks.json"), "w").write(json.dumps(marks))
os._exit(0)
"""

# The timing loop: the judge's way of counting a call, around the same GEMM, until the `stop` file.
TIMED = r"""
import json, os, sys, time, torch
from workbench.evaluate.gpu.call_counters import CallCounters
folder = sys.argv[1]
a = torch.randn(8192, 5120, device="cuda", dtype=torch.bfloat16)
b = torch.randn(5120, 7168, device="cuda", dtype=torch.bfloat16)
c = torch.empty(8192, 7168, device="cuda", dtype=torch.bfloat16)
for _ in range(5):
    torch.matmul(a, b, out=c)
torch.cuda.synchronize()
counters = CallCounters(0)
calls = []
open(os.path.join(folder, "timing"), "w").close()
while not os.path.exists(os.path.join(folder, "stop")) and len(calls) < 5000:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    counters.start()
    began = time.time()
    start.record(); torch.matmul(a, b, out=c); end.record(); torch.cuda.synchronize()
    ended = time.time()
    window, trimmed = counters.stop()
    calls.append({"began": began, "ended": ended, "ms": start.elapsed_time(end),
                  "tensor_cycles": trimmed.get("tensor_cycles"), "why": counters.why})
counters.close()
open(os.path.join(folder, "calls.json"), "w").write(json.dumps(calls))
"""


def _wait(path: Path, timeout_s: float) -> bool:
    deadline = time.time() + timeout_s
    while not path.exists():
        if time.time() > deadline:
            return False
        time.sleep(0.002)
    return True


def _ncu_argv(ncu: str, folder: Path, kind: str) -> list[str]:
    argv = ncu_command(
        ncu, str(folder / "ncu.log"), "hopper", [sys.executable, "-c", PROFILED, str(folder), kind]
    )
    if kind == "skipped":  # the warm range's kernel is not profiled: only the call is in the report
        argv[1:1] = ["--launch-skip", "1"]
    return argv


def _summary(calls: list[dict], spans: list[tuple[float, float]]) -> dict:
    """The timed calls inside any of `spans` against the rest: count, median and max ms, the sampled
    tensor cycles' range, and every reason a call was not counted."""

    def inside(call: dict) -> bool:
        return any(call["began"] < end and call["ended"] > start for start, end in spans)

    out: dict = {}
    for label, group in (
        ("during", [c for c in calls if inside(c)]),
        ("outside", [c for c in calls if not inside(c)]),
    ):
        cycles = [c["tensor_cycles"] for c in group if c["tensor_cycles"] is not None]
        out[label] = {
            "calls": len(group),
            "median_ms": round(statistics.median(c["ms"] for c in group), 4) if group else None,
            "max_ms": round(max(c["ms"] for c in group), 4) if group else None,
            "tensor_cycles": [min(cycles), max(cycles)] if cycles else None,
            "uncounted": len(group) - len(cycles),
            "why": sorted({c["why"] for c in group if c["why"]})[:3],
        }
    return out


def run(ncu: str, kind: str, overlap: bool) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="ncu-warm-"))
    launched = time.time()
    profiled = subprocess.Popen(
        _ncu_argv(ncu, folder, kind), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    timed = None
    result: dict = {"kind": kind, "overlap": overlap}
    try:
        if not _wait(folder / "ready", 120):
            return {**result, "error": "the profiled process did not get ready"}
        result["ready_s"] = round(time.time() - launched, 3)
        if overlap:
            timed = subprocess.Popen([sys.executable, "-c", TIMED, str(folder)], stderr=subprocess.PIPE)
            if not _wait(folder / "timing", 120):
                return {**result, "error": "the timing loop did not start"}
            time.sleep(0.3)  # calls before the warm range, to compare with
        (folder / "warm").touch()
        warmed = _wait(folder / "warmed", 60)
        if overlap:
            time.sleep(0.3)  # and calls after it
            (folder / "stop").touch()
            assert timed is not None
            timed.wait(60)
        if not warmed:
            return {**result, "error": "the warm range did not end"}
        (folder / "go").touch()
        go = time.time()
        profiled.wait(120)
        result["go_to_exit_s"] = round(time.time() - go, 3)
        result["rc"] = profiled.returncode
        marks = json.loads((folder / "marks.json").read_text()) if (folder / "marks.json").exists() else {}
        if "warm_start" in marks:
            result["warm_s"] = round(marks["warm_end"] - marks["warm_start"], 3)
            result["call_s"] = round(marks["call"] - marks["go"], 3)
        log = (folder / "ncu.log").read_text(errors="replace") if (folder / "ncu.log").exists() else ""
        result["ncu_errors"] = [
            line for line in log.splitlines() if "==ERROR==" in line or "==WARNING==" in line
        ][:4]
        result["profiled_kernels"] = sum(
            1 for line in log.splitlines() if line.startswith('"') and '"ID"' not in line
        )
        if overlap and (folder / "calls.json").exists() and "warm_start" in marks:
            calls = json.loads((folder / "calls.json").read_text())
            result["timing"] = _summary(calls, [(marks["warm_start"], marks["warm_end"])])
        elif overlap:
            err = timed.stderr.read().decode(errors="replace")[-400:] if timed and timed.stderr else ""
            result["timing_error"] = err
        return result
    finally:
        for process in (profiled, timed):
            if process is not None and process.poll() is None:
                process.kill()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--only", nargs="*", help="warm kinds to run: none, kernel, skipped, empty")
    args = parser.parse_args()
    ncu = find_tool_path("ncu")
    if ncu is None:
        print("ncu is not installed on this host", file=sys.stderr)
        return 1
    kinds = [kind for kind in ("none", "kernel", "skipped", "empty") if not args.only or kind in args.only]
    for _ in range(args.repeats):
        for kind in kinds:
            for overlap in (False, True):
                print(json.dumps(run(ncu, kind, overlap)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
