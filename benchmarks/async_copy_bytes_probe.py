"""Probe (GPU host): which Nsight Compute metrics tell the bytes a memory-bound task moves through the
asynchronous copy engine (TMA, bulk copies) from the bytes it moves through ordinary loads.

Why: the paged decode and gated delta-net tasks require ASYNC_COPY. `tests/gpu/hostile/decode_token_copy.cu`
is correct, issues one 16-byte bulk copy per CTA whose bytes never reach the answer, and reads every K
and V row with LDG: the family's presence alone passed it. The dynamic tier now bounds the bytes ordinary
loads fetched (`profile.ORDINARY_LOAD_METRICS`: LSU global loads missing L1, LDGSTS) against the task's
minimum bytes, a metric chosen so that honest kernels' repeated broadcast loads (every lane of a warp
reading one value: the gated delta-net references read v that way, a row per warp and token) hit L1 and
do not count. This probe checks that choice on the device: every candidate metric, on every
memory-bound task's kernels, and with `--verdict` each kernel's verdict (the decoy's must be `decoy`).

1. `ncu --query-metrics` on this device; the base metrics whose names match `--pattern` (TMA, bulk,
   LDGSTS, the xbar and LSU global-load paths, DRAM and L2 reads) are kept, with `.sum`.
2. Each kernel is built with the evaluator's build and profiled on its task's headline workload (the
   evaluator's inputs, one unprofiled call first) with those metrics and the per-opcode counts: the
   paged decode's reference, the honest corpus's libcu++ decode and the decoy; the gated delta-net
   decode and multi-token references.
3. A table per task: metric, each kernel's value, and the task's minimum bytes for scale; with
   `--verdict`, each kernel's verdict from the local executor.

Run: `python benchmarks/async_copy_bytes_probe.py [--out FILE.json] [--verdict]`.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# Each memory-bound task's kernels: the honest ones first, then what the rule must fail.
CASES = {
    "gqa_paged_decode_h24_kv8_d128_ps1": {
        "reference (bulk copies)": ROOT / "references" / "gqa" / "paged_decode_bulk.cu",
        "honest (libcu++ memcpy_async)": ROOT / "tests" / "data" / "honest" / "libcu_memcpy_async_decode.cu",
        "decoy (token copy, LDG)": ROOT / "tests" / "gpu" / "hostile" / "decode_token_copy.cu",
    },
    "gdn_decode_qk4_v8_d128_k_last": {
        "reference (bulk state)": ROOT / "references" / "gdn" / "gdn_decode_bulk.cu"
    },
    "gdn_mtp_qk4_v8_d128_k_last": {"reference (bulk state)": ROOT / "references" / "gdn" / "gdn_mtp_bulk.cu"},
}
PATTERN = (
    r"tma|bulk|ldgsts|xbar2l1tex|lsu_mem_global_op_ld|mem_texture|dram__bytes_read"
    r"|lts__t_(sectors|bytes)_srcunit_tex"
)
# Ratios and rates have no `.sum`; only counters are asked for.
NOT_COUNTERS = re.compile(r"rate|pct|ratio|per_|_realtime")
PER_OPCODE = "sass__thread_inst_executed_true_per_opcode"
METRIC_NAME = re.compile(r"^\s*([a-z0-9]+__[a-z0-9_.]+)")
# Profiled one at a time only when ncu refuses the list together: at most this many (each is a process).
MAX_SINGLE = 24


def query_metrics(ncu: str, pattern: str) -> list[str]:
    """The counters matching `pattern`, as `.sum` names this ncu lists (its `all` mode prints every name
    with its suffixes), or base names plus `.sum` where that mode is missing."""
    listed = subprocess.run(
        [ncu, "--query-metrics", "--query-metrics-mode", "all"], capture_output=True, text=True, check=False
    )
    full = listed.returncode == 0
    if not full:
        listed = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, check=True)
    names = {m.group(1) for line in listed.stdout.splitlines() if (m := METRIC_NAME.match(line))}
    if full:
        names = {name.removesuffix(".sum") for name in names if name.endswith(".sum")}
    chosen = sorted(name for name in names if re.search(pattern, name) and not NOT_COUNTERS.search(name))
    return [f"{name}.sum" for name in chosen]


def child(library: str, task_name: str) -> None:
    """One unprofiled call, then one between cudaProfilerStart and Stop, on the task's headline inputs."""
    import torch
    import tvm_ffi

    from workbench.evaluate.gpu.inputs import make_inputs, make_outputs
    from workbench.evaluate.gpu_spec import gpu_spec
    from workbench.tasks import Catalogue
    from workbench.tasks.targets import get_target

    task = Catalogue.load().get(task_name)
    spec = gpu_spec(task, task.workload(), get_target("hopper"))
    run = tvm_ffi.load_module(library)["run"]
    arguments = [*make_inputs(spec, int(spec["seed"])), *make_outputs(spec)]
    run(*arguments)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    run(*arguments)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def profile_once(ncu: str, library: str, task: str, metrics: list[str]) -> dict[str, str] | None:
    """The profiled kernel's values by metric (as ncu prints them, one per launch), or None where ncu
    refused the list (a name this device cannot collect as `.sum`)."""
    log = Path(tempfile.mkdtemp(prefix="async-copy-probe-")) / "ncu.csv"
    argv = [
        ncu, "--profile-from-start", "off", "--clock-control", "none", "--metrics", ",".join(metrics),
        "--csv", "--page", "raw", "--print-units", "base", "--log-file", str(log),
        sys.executable, __file__, "--child", library, "--task", task,
    ]  # fmt: skip
    done = subprocess.run(argv, check=False, capture_output=True, text=True)
    lines = [line for line in log.read_text().splitlines() if line.startswith('"')] if log.exists() else []
    if done.returncode != 0 or len(lines) < 3:
        return None
    rows = list(csv.reader(lines))
    header, values = rows[0], rows[2:]  # rows[1]: units
    return {name: "; ".join(row[i] for row in values) for i, name in enumerate(header) if "__" in name}


def profile(ncu: str, library: str, task: str, metrics: list[str]) -> dict[str, str]:
    """All metrics in one profile, else one at a time (the ones ncu refuses are left out)."""
    wanted = [*metrics, PER_OPCODE]
    together = profile_once(ncu, library, task, wanted)
    if together is not None:
        return together
    values: dict[str, str] = {}
    for metric in wanted[:MAX_SINGLE]:
        values.update(profile_once(ncu, library, task, [metric]) or {metric: "refused"})
    return values | {metric: "not profiled (over the single-metric limit)" for metric in wanted[MAX_SINGLE:]}


def verdict(source: Path, task: str) -> dict:
    from workbench.evaluate.build.nvcc import cache_root
    from workbench.evaluate.executors import make_executor
    from workbench.evaluate.request import EvalRequest

    request = EvalRequest(task=task, target="hopper", source=source.read_text())
    # The build cache the profiling builds went to: the kernel is not compiled again.
    result = asyncio.run(make_executor("local", cache_root()).evaluate(request))
    dynamic = result.stages.dynamic
    return {
        "status": result.model_dump(mode="json")["status"],
        "dynamic": dynamic.message if dynamic else None,
    }


def print_table(task: str, found: dict, metrics: list[str]) -> None:
    names = list(found["kernels"])
    print(f"\ntask {task}: minimum bytes {found['min_bytes']:.4g}")
    print(f"{'metric':72} " + " ".join(f"{n:>30}" for n in names))
    for metric in [*metrics, PER_OPCODE]:
        cells = [found["kernels"][n]["values"].get(metric, "-") for n in names]
        print(f"{metric:72} " + " ".join(f"{c[:30]:>30}" for c in cells))
    for name in names:
        if "verdict" in found["kernels"][name]:
            print(f"{name}: {found['kernels'][name]['verdict']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child")
    parser.add_argument("--task", help="the child's task")
    parser.add_argument("--pattern", default=PATTERN)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--verdict", action="store_true", help="also judge each kernel with the local executor"
    )
    args = parser.parse_args()
    if args.child:
        child(args.child, args.task)
        return 0

    from workbench.evaluate.build.nvcc import build
    from workbench.evaluate.gpu.toolchain import find_tool
    from workbench.tasks import Catalogue
    from workbench.tasks.targets import get_target

    ncu = find_tool("ncu")
    if ncu is None:
        print("async_copy_bytes_probe: ncu not found", file=sys.stderr)
        return 2
    metrics = query_metrics(str(ncu), args.pattern)
    catalogue = Catalogue.load()
    report: dict = {"metrics": metrics, "tasks": {}}
    for task_name, kernels in CASES.items():
        task = catalogue.get(task_name)
        found: dict = {"min_bytes": task.min_bytes(task.workload()), "kernels": {}}
        for name, path in kernels.items():
            stage = asyncio.run(build(path.read_text(), get_target("hopper")))
            if stage.library_path is None:
                print(f"async_copy_bytes_probe: {path.name} did not build: {stage.message}", file=sys.stderr)
                return 1
            entry: dict = {"values": profile(str(ncu), stage.library_path, task_name, metrics)}
            if args.verdict:
                entry["verdict"] = verdict(path, task_name)
            found["kernels"][name] = entry
        report["tasks"][task_name] = found
        print_table(task_name, found, metrics)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
