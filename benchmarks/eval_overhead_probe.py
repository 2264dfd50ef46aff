"""Where an evaluation's time goes, and why a kernel's speedup moves between evaluations (GPU host).

`python benchmarks/eval_overhead_probe.py OUTDIR` prints three findings and writes raw data under OUTDIR:
1. ncu launched before the candidate exists (`--profile-from-start off`, the call bracketed by
   cudaProfilerStart/Stop), printing the raw page straight into a log file (no export + import):
   start-up, go-to-exit time, and whether the rows carry mangled names and the tensor FLOPs; the old
   export + `--import` path timed beside it.
2. The correctness tier at the headline GEMM, twice in one process (first and warm), with the top
   cumulative entries of a profile of the first.
3. Candidate vs cuBLAS over 200 interleaved iterations in each of 3 fresh processes, the SM clock
   sampled by nvidia-smi alongside: speedup as the ratio of medians and as the median of per-iteration
   ratios, per 50-iteration window (what one evaluation sees).
"""

from __future__ import annotations

import asyncio
import cProfile
import io
import json
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASK = "gemm_n7168_k5120"
KERNELS = {
    "wgmma_gemm": ROOT / "tests" / "gpu" / "kernels" / "wgmma_gemm.cu",
    "ref04": ROOT / "references" / "gemm" / "04_ws_persistent.cu",
}


def build_all() -> dict[str, str]:
    from workbench.evaluate.build import build
    from workbench.tasks import get_target

    target = get_target("hopper")
    libs = {}
    for name, path in KERNELS.items():
        stage = asyncio.run(build(path.read_text(), target, 300.0, Path("/tmp/ptxwb-probe-cache")))
        assert stage.library_path, stage.message
        libs[name] = stage.library_path
    return libs


def spec(m: int | None = None) -> dict:
    from workbench.evaluate.gpu_spec import gpu_spec
    from workbench.tasks import Catalogue, get_target

    task = Catalogue.load().get(TASK)
    result = gpu_spec(task, task.workload(), get_target("hopper"))
    if m is not None:
        result["axes"] = {**result["axes"], "M": m}
    return result


# -- 1. ncu ---------------------------------------------------------------------------------------

APP = r"""
import os, sys, time, json
t0 = time.monotonic()
import torch, tvm_ffi
torch.cuda.init(); torch.zeros(1, device="cuda")
lib, m, ready, go, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
open(ready, "w").write(str(time.monotonic() - t0))
while not os.path.exists(go):
    time.sleep(0.005)
g = time.monotonic()
mod = tvm_ffi.load_module(lib)
a = torch.randn(m, 5120, device="cuda", dtype=torch.bfloat16)
b = torch.randn(7168, 5120, device="cuda", dtype=torch.bfloat16)
c = torch.empty(m, 7168, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
if mode != "filter":
    torch.cuda.profiler.start()
mod.run(a, b, c)
torch.cuda.synchronize()
if mode != "filter":
    torch.cuda.profiler.stop()
print("PROBE call done", time.monotonic() - g, flush=True)
if mode == "exit_now":
    os._exit(0)
"""


def ncu_probe(out: Path, lib: str, mangled: str) -> dict:
    from workbench.evaluate.profile import METRICS, TENSOR_FLOPS_METRIC, import_command, parse_raw_csv

    ncu = "ncu"
    app = out / "probe_app.py"
    app.write_text(APP)
    metrics = ",".join([*METRICS, TENSOR_FLOPS_METRIC["hopper"]])
    page = ["--page", "raw", "--csv", "--print-units", "base", "--print-metric-instances", "details"]
    results = {}
    for mode in ("range", "exit_now", "filter"):
        ready, go, log = out / f"ready_{mode}", out / f"go_{mode}", out / f"ncu_{mode}.log"
        for path in (ready, go):
            path.unlink(missing_ok=True)
        common = [ncu, "--clock-control", "none", "--target-processes", "all", "--metrics", metrics]
        if mode == "filter":
            command = [
                *common,
                "--kernel-name-base",
                "mangled",
                "--kernel-name",
                f"regex:^{mangled}$",
                "--export",
                str(out / "old"),
                "--force-overwrite",
            ]
        else:
            command = [
                *common,
                "--profile-from-start",
                "off",
                "--print-kernel-base",
                "mangled",
                *page,
                "--log-file",
                str(log),
            ]
        command += [sys.executable, str(app), lib, "256", str(ready), str(go), mode]
        started = time.monotonic()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        while not ready.exists() and process.poll() is None:
            time.sleep(0.01)
        ready_s = time.monotonic() - started
        time.sleep(1.0)  # the app idles as a spare would
        go_at = time.monotonic()
        go.touch()
        stdout, _ = process.communicate(timeout=300)
        exit_s = time.monotonic() - go_at
        row = {
            "mode": mode,
            "rc": process.returncode,
            "ready_s": round(ready_s, 2),
            "go_to_exit_s": round(exit_s, 2),
        }
        if mode == "filter":
            imported_at = time.monotonic()
            text = subprocess.run(
                import_command(ncu, str(out / "old.ncu-rep")), capture_output=True, text=True, check=False
            ).stdout
            row["import_s"] = round(time.monotonic() - imported_at, 2)
        else:
            text = log.read_text() if log.exists() else ""
        launches = parse_raw_csv(text)
        row["launches"] = [
            {"name": x["name"][:80], "tensor_flops": x["tensor_flops"], "hgmma": x["opcodes"].get("HGMMA")}
            for x in launches
        ]
        row["stdout_tail"] = stdout.strip().splitlines()[-4:]
        results[mode] = row
        print("ncu", json.dumps(row), flush=True)
    return results


# -- 2. correctness ---------------------------------------------------------------------------------


def correctness_probe(lib: str) -> dict:
    import torch
    import tvm_ffi

    from workbench.evaluate.correctness import run_correctness
    from workbench.evaluate.kernel_trace import open_trace

    started = time.perf_counter()
    trace, _ = open_trace()
    trace_s = time.perf_counter() - started
    run = tvm_ffi.load_module(lib).run
    headline = spec()
    profiler = cProfile.Profile()
    t0 = time.perf_counter()
    profiler.enable()
    first = run_correctness(run, headline, trace, None, 3)
    profiler.disable()
    first_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    second = run_correctness(run, headline, trace, None, 3)
    second_s = time.perf_counter() - t0
    buffer = io.StringIO()
    pstats.Stats(profiler, stream=buffer).sort_stats("cumulative").print_stats(25)
    torch.cuda.synchronize()
    row = {
        "open_trace_s": round(trace_s, 3),
        "first_s": round(first_s, 3),
        "second_s": round(second_s, 3),
        "status": [first["status"], second["status"]],
    }
    print("correctness", json.dumps(row), flush=True)
    print(buffer.getvalue()[:6000], flush=True)
    return row


# -- 3. timing stability ------------------------------------------------------------------------------

TIMING_CHILD = r"""
import json, sys, statistics, torch, tvm_ffi
from workbench.evaluate.kernel_trace import open_trace
from workbench.evaluate.inputs import make_inputs, make_outputs
spec = json.loads(open(sys.argv[1]).read())
libs = json.loads(sys.argv[2])
trace, _ = open_trace()
a, b = make_inputs(spec, spec["seed"] + 1000)
out_ref = torch.empty(a.shape[0], b.shape[0], dtype=a.dtype, device="cuda")
flush = torch.empty(2 * 60 * 1024 * 1024, dtype=torch.uint8, device="cuda")
result = {}
for name, lib in libs.items():
    run = tvm_ffi.load_module(lib).run
    (c,) = make_outputs(spec)
    entrants = [("cand", lambda: run(a, b, c)), ("base", lambda: torch.matmul(a, b.T, out=out_ref))]
    windows = {"cand": [], "base": []}
    trace.clear()
    for i in range(10 + 200):
        order = entrants if i % 2 == 0 else entrants[::-1]
        for label, fn in order:
            flush.zero_()
            with trace.window(label) as w:
                fn()
            if i >= 10:
                windows[label].append(w)
        if i % 10 == 9:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    trace.collect()
    result[name] = {k: [trace.span_ms(w) for w in v] for k, v in windows.items()}
print(json.dumps(result))
"""


def timing_probe(out: Path, libs: dict[str, str]) -> dict:
    spec_path = out / "spec.json"
    spec_path.write_text(json.dumps(spec()))
    child = out / "timing_child.py"
    child.write_text(TIMING_CHILD)
    processes = []
    for number in range(3):
        with open(out / f"clocks_{number}.csv", "w") as clocks_file:
            sampler = subprocess.Popen(
                [
                    "nvidia-smi",
                    "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu",
                    "--format=csv,noheader",
                    "-lms",
                    "50",
                ],
                stdout=clocks_file,
                stderr=subprocess.DEVNULL,
            )
            done = subprocess.run(
                [sys.executable, str(child), str(spec_path), json.dumps(libs)],
                capture_output=True,
                text=True,
                check=False,
            )
            sampler.terminate()
            sampler.wait()
        if done.returncode != 0:
            print("timing child failed:", done.stderr[-2000:], flush=True)
            continue
        processes.append(json.loads(done.stdout.strip().splitlines()[-1]))
        clocks = [
            line.split(",")
            for line in (out / f"clocks_{number}.csv").read_text().splitlines()
            if line.strip()
        ]
        sm = [int(c[1].split()[0]) for c in clocks if len(c) >= 3 and c[1].strip().split()[0].isdigit()]
        power = [
            float(c[2].split()[0])
            for c in clocks
            if len(c) >= 3 and c[2].strip().split()[0].replace(".", "").isdigit()
        ]
        print(
            f"process {number}: SM MHz min {min(sm, default=0)} median {statistics.median(sm) if sm else 0} max {max(sm, default=0)}; "
            f"power W median {statistics.median(power) if power else 0:.0f} max {max(power, default=0):.0f}",
            flush=True,
        )
    summary = {}
    for name in libs:
        of_medians, paired = [], []
        for process in processes:
            cand, base = process[name]["cand"], process[name]["base"]
            for start in range(0, 200, 50):
                c, b = cand[start : start + 50], base[start : start + 50]
                of_medians.append(statistics.median(b) / statistics.median(c))
                paired.append(statistics.median([y / x for x, y in zip(c, b)]))
            modes = sorted(cand)
            print(
                f"{name}: candidate ms p5 {modes[10]:.4f} p50 {modes[100]:.4f} p95 {modes[190]:.4f}; "
                f"baseline p50 {sorted(base)[100]:.4f}",
                flush=True,
            )
        summary[name] = {
            "ratio_of_medians": of_medians,
            "median_of_ratios": paired,
            "spread_ratio_of_medians": max(of_medians) / min(of_medians),
            "spread_median_of_ratios": max(paired) / min(paired),
        }
        print(
            f"{name}: 12 windows of 50: ratio of medians max/min {summary[name]['spread_ratio_of_medians']:.4f} "
            f"({min(of_medians):.4f}-{max(of_medians):.4f}); median of paired ratios max/min "
            f"{summary[name]['spread_median_of_ratios']:.4f} ({min(paired):.4f}-{max(paired):.4f})",
            flush=True,
        )
    (out / "timing_raw.json").write_text(json.dumps(processes))
    return summary


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    libs = build_all()
    print(f"built in {time.perf_counter() - started:.1f} s", flush=True)
    mangled = subprocess.run(
        ["cuobjdump", "--dump-sass", libs["wgmma_gemm"]], capture_output=True, text=True, check=False
    ).stdout
    name = next(line.split(":", 1)[1].strip() for line in mangled.splitlines() if "Function :" in line)
    report = {"ncu": ncu_probe(out, libs["wgmma_gemm"], name)}
    report["timing"] = timing_probe(out, libs)
    report["correctness"] = correctness_probe(libs["wgmma_gemm"])
    (out / "probe.json").write_text(json.dumps(report, indent=1))
    print(f"probe done in {time.perf_counter() - started:.1f} s", flush=True)


if __name__ == "__main__":
    main()
