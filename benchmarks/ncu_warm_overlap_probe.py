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
- `timing`: with a timing loop in another process (the headline GEMM's shape through torch, CUDA
  events, PM sampling around every call exactly as the judge does) running while the warm range runs:
  whether either side fails, and the calls' times and sampled tensor-pipe cycles inside the warm
  range's span against those outside it; a range still running 5 s in ends the loop (and its sampling),
  and `warm_after_loop_s` says how soon after that the range ended (soon: ncu's set-up ran beside the
  loop and only its kernel's profile waited for the monitors);
- `ncu`: with another process's profiled call (the current candidate's dynamic tier) running while
  the warm range runs: whether either fails or waits for the other, and the profiled kernel's GPU time
  against the same call profiled alone (`kind` none, `alone`).
- `open`: with the judge's PM-sampling set-up (`CallCounters`: CUPTI's enable and configure, no sample
  started) made in another process while the warm range runs, as the timing stage would if it did not
  wait for the range: whether the range still ends and how long it and the set-up take, and, once the
  range is over, whether counted GEMM calls are counted alike to those of a set-up made alone
  (`open_alone`: the same process and calls, the spare not warmed).

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

from workbench.evaluate.gpu.profile import ncu_command, parse_raw_csv
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

# The counting processes' common part: the GEMM, the judge's way of counting one call of it, and the end.
COUNTING = r"""
import json, os, sys, time, torch
from workbench.evaluate.gpu.call_counters import CallCounters
folder = sys.argv[1]
a = torch.randn(8192, 5120, device="cuda", dtype=torch.bfloat16)
b = torch.randn(5120, 7168, device="cuda", dtype=torch.bfloat16)
c = torch.empty(8192, 7168, device="cuda", dtype=torch.bfloat16)
for _ in range(5):
    torch.matmul(a, b, out=c)
torch.cuda.synchronize()
def counted_call(counters):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    counters.start()
    time.sleep(0.0002)
    began, began_ns = time.time(), time.time_ns()
    start.record(); torch.matmul(a, b, out=c); end.record(); torch.cuda.synchronize()
    ended, ended_ns = time.time(), time.time_ns()
    counts = counters.stop(began_ns, ended_ns)
    return {"began": began, "ended": ended, "ms": start.elapsed_time(end),
            "tensor_cycles": counts.get("tensor_cycles"), "why": counters.why}
def finish(counters, calls):
    counters.close()
    open(os.path.join(folder, "calls.json"), "w").write(json.dumps(calls))
"""

# The timing loop: counted calls of the same GEMM until the `stop` file.
TIMED = (
    COUNTING
    + r"""
counters = CallCounters(0)
calls = []
open(os.path.join(folder, "timing"), "w").close()
while not os.path.exists(os.path.join(folder, "stop")) and len(calls) < 5000:
    calls.append(counted_call(counters))
finish(counters, calls)
"""
)

# The judge's set-up of the sampling on the `open` file, then (on `count`) counted calls as the timing loop's.
OPENER = (
    COUNTING
    + r"""
def wait(name):
    while not os.path.exists(os.path.join(folder, name)):
        time.sleep(0.001)
open(os.path.join(folder, "opener_ready"), "w").close()
wait("open"); began = time.time()
counters = CallCounters(0)
ended = time.time()
open(os.path.join(folder, "opened.partial"), "w").write(json.dumps({"began": began, "ended": ended, "why": counters.why}))
os.replace(os.path.join(folder, "opened.partial"), os.path.join(folder, "opened"))
wait("count")
finish(counters, [counted_call(counters) for _ in range(20)])
"""
)


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


class Profiled:
    """One process under the worker's ncu command, in its own folder."""

    def __init__(self, ncu: str, kind: str) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="ncu-warm-"))
        self.launched = time.time()
        self.process = subprocess.Popen(
            _ncu_argv(ncu, self.folder, kind), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.go_at: float | None = None

    def signal(self, name: str) -> None:
        if name == "go":
            self.go_at = time.time()
        (self.folder / name).touch()

    def finish(self) -> dict:
        """Go (unless it went already), wait for ncu's exit: its time after the go, the warm range's and
        the call's, what ncu said and profiled (each launch's name and GPU time)."""
        if self.go_at is None:
            self.signal("go")
        assert self.go_at is not None
        self.process.wait(120)
        out: dict = {"go_to_exit_s": round(time.time() - self.go_at, 3), "rc": self.process.returncode}
        marks_file = self.folder / "marks.json"
        marks = json.loads(marks_file.read_text()) if marks_file.exists() else {}
        if "call" in marks:
            out["warm_s"] = round(marks["warm_end"] - marks["warm_start"], 3)
            out["call_s"] = round(marks["call"] - marks["go"], 3)
            out["warm_span"] = [marks["warm_start"], marks["warm_end"]]
        log_file = self.folder / "ncu.log"
        log = log_file.read_text(errors="replace") if log_file.exists() else ""
        out["ncu_said"] = [line for line in log.splitlines() if "==ERROR==" in line or "==WARNING==" in line][
            :4
        ]
        out["launches"] = [[launch["name"][:40], launch.get("time_ns")] for launch in parse_raw_csv(log)]
        return out

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()


def run(ncu: str, kind: str, overlap: str) -> dict:
    """One warm range of `kind`, then the profiled call, with `overlap`: alone, beside a PM-sampled
    timing loop in another process (`timing`), or beside another ncu's profiled call (`ncu`: the
    current candidate's dynamic tier while the next one's spare warms)."""
    result: dict = {"kind": kind, "overlap": overlap}
    spare = Profiled(ncu, kind)
    other = Profiled(ncu, "none") if overlap == "ncu" else None
    timed = None
    try:
        for process in (spare, other):
            if process is not None and not _wait(process.folder / "ready", 120):
                return {**result, "error": "a profiled process did not get ready"}
        result["ready_s"] = round(time.time() - spare.launched, 3)
        if overlap == "timing":
            with (spare.folder / "timed.err").open("w") as errors:  # a file: a full pipe would stall it
                timed = subprocess.Popen([sys.executable, "-c", TIMED, str(spare.folder)], stderr=errors)
            if not _wait(spare.folder / "timing", 120):
                return {**result, "error": "the timing loop did not start"}
            time.sleep(0.3)  # calls before the warm range, to compare with
        if other is not None:  # the other's call starts with the warm range
            other.signal("warm")
            if not _wait(other.folder / "warmed", 60):
                return {**result, "error": "the other profiled process did not reach its call"}
            other.signal("go")
        spare.signal("warm")
        # Beside a sampled loop the range may wait for the monitors (2026-12-06, H100: it had not ended
        # after 60 s): the loop then ends, and the range's end after it says how much of ncu's set-up
        # went on beside the timed calls.
        warmed = _wait(spare.folder / "warmed", 60 if timed is None else 5)
        if timed is not None:
            time.sleep(0.3)  # and calls after it
            spare.signal("stop")
            timed.wait(60)
            loop_end = time.time()
            if not warmed:
                warmed = _wait(spare.folder / "warmed", 60)
                result["warm_after_loop_s"] = round(time.time() - loop_end, 3) if warmed else None
        if other is not None:
            result["other"] = other.finish()
        if not warmed:
            return {**result, "error": "the warm range did not end"}
        result["spare"] = spare.finish()
        calls_file = spare.folder / "calls.json"
        if timed is not None and calls_file.exists() and "warm_span" in result["spare"]:
            calls = json.loads(calls_file.read_text())
            result["timing"] = _summary(calls, [tuple(result["spare"]["warm_span"])])
        elif timed is not None:
            result["timing_error"] = (spare.folder / "timed.err").read_text(errors="replace")[-400:]
        return result
    finally:
        for process in (spare, other):
            if process is not None:
                process.kill()
        if timed is not None and timed.poll() is None:
            timed.kill()


def run_open(ncu: str, beside_range: bool) -> dict:
    """The judge's sampling set-up made while the spare's warm range runs (`beside_range`), else alone;
    then, once the range is over, counted calls."""
    result: dict = {"kind": "kernel", "overlap": "open" if beside_range else "open_alone"}
    spare = Profiled(ncu, "kernel")
    errors = (spare.folder / "opener.err").open("w")  # a file: a full pipe would stall it
    opener = subprocess.Popen([sys.executable, "-c", OPENER, str(spare.folder)], stderr=errors)
    try:
        if not (_wait(spare.folder / "ready", 120) and _wait(spare.folder / "opener_ready", 120)):
            return {**result, "error": "the spare or the opener did not get ready"}
        if beside_range:
            spare.signal("warm")
        spare.signal("open")
        opened = _wait(spare.folder / "opened", 60)
        warmed = _wait(spare.folder / "warmed", 20) if beside_range else True
        if not opened:
            return {**result, "error": "the sampling's set-up did not end", "warmed": warmed}
        marks = json.loads((spare.folder / "opened").read_text())
        result["open_s"] = round(marks["ended"] - marks["began"], 3)
        result["open_why"] = marks["why"]
        if not warmed:
            return {**result, "error": "the warm range did not end beside the set-up"}
        spare.signal("count")
        opener.wait(60)
        calls_file = spare.folder / "calls.json"
        if not calls_file.exists():
            return {**result, "error": (spare.folder / "opener.err").read_text(errors="replace")[-400:]}
        calls = json.loads(calls_file.read_text())
        result["calls"] = _summary(calls, [])["outside"]
        result["spare"] = spare.finish() if beside_range else None
        if beside_range and result["spare"].get("warm_span"):
            span = result["spare"]["warm_span"]
            result["open_inside_range_s"] = round(
                max(0.0, min(marks["ended"], span[1]) - max(marks["began"], span[0])), 3
            )
        return result
    finally:
        spare.kill()
        if opener.poll() is None:
            opener.kill()
        errors.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--only", nargs="*", help="warm kinds to run: none, kernel, skipped, empty")
    parser.add_argument(
        "--open", action="store_true", help="only the sampling's set-up beside the warm range, and alone"
    )
    args = parser.parse_args()
    ncu = find_tool_path("ncu")
    if ncu is None:
        print("ncu is not installed on this host", file=sys.stderr)
        return 1
    if args.open:
        for _ in range(args.repeats):
            for beside_range in (True, False):
                print(json.dumps(run_open(ncu, beside_range)), flush=True)
        return 0
    kinds = [kind for kind in ("none", "kernel", "skipped", "empty") if not args.only or kind in args.only]
    for _ in range(args.repeats):
        for kind in kinds:
            for overlap in ("alone", "timing", "ncu"):
                print(json.dumps(run(ncu, kind, overlap)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
