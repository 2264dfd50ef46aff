"""The GPU sweep for an H200 (Hopper) host: scripted models play the reference kernels and broken
ones through `ptxwb bench run --executor local`, then one report over every sweep, and the
evaluations per GPU-hour.

    OUT=/tmp/h200_sweep python3 benchmarks/bench_h200_sweep.py [--trajectories 3]

Writes under $OUT: scripts/ (the scripted answers), specs/ (one TOML per sweep), sweeps/<name>/ (the
sessions and stores), report.md, report.html, cells.json, and summary.log (what it printed).
Sweeps:
- `gemm`: on gemm_n7168_k5120, `ladder` plays the GEMM ladder (SIMT → wgmma → TMA pipeline →
  warp-specialised persistent) and `broken` plays a compile error, a banned cuBLAS call, an mma.sync
  kernel (correct, but not Hopper's family), then the persistent kernel;
- one per attention task (forward, backward, plain, causal): a compile error, then the reference.
`--only NAME` runs one sweep; `--with-ray` runs each again on a local Ray cluster (`bench run --ray
local`), each mode building into a cache of its own, and prints the two throughputs and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "tests" / "data" / "kernels"
REFS = ROOT / "references"
GEMM = {
    "ladder": [REFS / "gemm" / n for n in ("01_simt.cu", "02_wgmma.cu", "03_tma_pipeline.cu", "04_ws_persistent.cu")],
    "broken": [KERNELS / "compile_error.cu", KERNELS / "banned_cublas.cu", KERNELS / "mma_sync_gemm.cu",
               REFS / "gemm" / "04_ws_persistent.cu"],
}  # fmt: skip
ATTENTION = {
    "mha_with_lse_d128": REFS / "attention" / "mha_fwd_d128.cu",
    "mha_with_lse_d128_causal": REFS / "attention" / "mha_fwd_d128_causal.cu",
    "mha_bwd_d128": REFS / "attention" / "mha_bwd_d128.cu",
    "mha_bwd_d128_causal": REFS / "attention" / "mha_bwd_d128_causal.cu",
}
# No console script on a bare GPU host: the CLI through the interpreter.
PTXWB = [sys.executable, "-c", "from workbench.cli.main import main; main()"]


def gpu_name() -> str:
    try:
        query = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
        return (
            subprocess.run(query, check=False, capture_output=True, text=True).stdout.strip()
            or "no GPU listed"
        )
    except OSError:
        return "no nvidia-smi"


def script(path: Path, kernels: list[Path]) -> str:
    turns = [f"Turn {n}: {k.name}.\n\n```cuda\n{k.read_text()}```\n" for n, k in enumerate(kernels, 1)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(turns, indent=1))
    return f"scripted:{path}"


def spec(name: str, models: list[str], task: str, turns: int, trajectories: int, executor: str) -> str:
    listed = ", ".join(json.dumps(m) for m in models)
    return (f'name = "{name}"\nmodels = [{listed}]\ntasks = ["{task}"]\ntargets = ["hopper"]\n'
            f'trajectories = {trajectories}\nturns = {turns}\nexecutor = "{executor}"\nconcurrency = 4\n'
            '[[variants]]\nname = "pack"\n')  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trajectories", type=int, default=3)
    parser.add_argument(
        "--executor", default="local", help="`static` checks the specs and scripts without a GPU."
    )
    parser.add_argument("--only", help="only the sweep of this name (gemm, or an attention task)")
    parser.add_argument("--with-ray", action="store_true",
                        help="each sweep also on a local Ray cluster (`pip install 'ptx-workbench[ray]'`)")  # fmt: skip
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", "/tmp/h200_sweep"))
    specs: list[tuple[str, str]] = []
    gemm_models = [script(out / "scripts" / f"gemm_{name}.json", kernels) for name, kernels in GEMM.items()]
    specs.append(("gemm", spec("gemm", gemm_models, "gemm_n7168_k5120", 4, args.trajectories, args.executor)))
    for task, reference in ATTENTION.items():
        model = script(out / "scripts" / f"{task}_fix.json", [KERNELS / "compile_error.cu", reference])
        specs.append((task, spec(task, [model], task, 2, args.trajectories, args.executor)))
    out.mkdir(parents=True, exist_ok=True)
    log = (out / "summary.log").open("a")

    def say(text: str) -> None:
        print(text, flush=True)
        log.write(text + "\n")
        log.flush()

    # A copy of the checkout on a GPU host may carry a stale .git: the caller can name the commit.
    sha = (
        os.environ.get("PTXWB_GIT_SHA")
        or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], check=False, capture_output=True, text=True, cwd=ROOT
        ).stdout.strip()
    )
    gpu = gpu_name()
    say(f"# bench_h200_sweep: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, git {sha or '?'}, "
        f"{gpu}")  # fmt: skip
    folders: list[str] = []
    # Without --with-ray each sweep runs once; with it, again on a local Ray cluster (one evaluation actor
    # per GPU) into a folder of its own, and the two throughputs are compared side by side.
    modes = [("", [])] + ([("_ray", ["--ray", "local"])] if args.with_ray else [])
    totals = {suffix: [0, 0.0] for suffix, _ in modes}
    for name, text in specs:
        if args.only and name != args.only:
            continue
        path = out / "specs" / f"{name}.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        for suffix, extra in modes:
            folder = out / "sweeps" / f"{name}{suffix}"
            resume = ["--resume"] if (folder / "sweep.json").exists() else []
            # Compared side by side, each mode builds into a cache of its own: both start cold.
            env = {**os.environ, "PTXWB_CACHE": str(out / f"cache{suffix}")} if args.with_ray else None
            started = time.monotonic()
            done = subprocess.run([*PTXWB, "bench", "run", str(path), "--out", str(folder), *resume, *extra],
                                  check=False, capture_output=True, text=True, env=env)  # fmt: skip
            seconds = time.monotonic() - started
            said = (done.stdout + done.stderr).strip()
            say(f"== {name}{suffix}: exit {done.returncode} in {seconds:.0f} s")
            say(said.splitlines()[-1] if said else "")
            folders.append(str(folder))
            count = sum(
                1
                for s in folder.glob("sessions/*.jsonl")
                for line in s.read_text().splitlines()
                if '"type":"evaluation"' in line
            )
            totals[suffix][0] += count
            totals[suffix][1] += seconds
    for suffix, (evaluations, seconds) in totals.items():
        hours = seconds / 3600
        say(f"{'with Ray: ' if suffix else ''}{evaluations} evaluations in {hours * 60:.1f} min on one GPU: "
            f"{evaluations / hours if hours else 0:.0f} evaluations per GPU-hour (builds included; a resumed "
            "sweep counts only what it ran now)")  # fmt: skip
    if args.with_ray and all(seconds for _, seconds in totals.values()):
        plain, ray = (totals[suffix][0] / totals[suffix][1] for suffix in ("", "_ray"))
        say(
            f"Ray's throughput over the plain sweep's: {ray / plain:.3f} (overhead {100 * (1 - ray / plain):.1f} %)"
        )
    report = subprocess.run(
        [*PTXWB, "bench", "report", *folders, "--turns", "1,2,4", "--md", str(out / "report.md"),
         "--html", str(out / "report.html"), "--json", str(out / "cells.json"), "--title", "H200 sweep"],
        check=False, capture_output=True, text=True,
    )  # fmt: skip
    say(report.stdout + report.stderr)


if __name__ == "__main__":
    main()
