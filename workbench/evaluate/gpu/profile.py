"""Tier 4, the dynamic proof: Nsight Compute on one call of the candidate, its own kernels only.

ncu is launched before the candidate exists (`--profile-from-start off`), so its start-up and the
profiled process's torch import happen between evaluations; it profiles only what runs between
cudaProfilerStart and cudaProfilerStop, which the profiled child puts around its one call of the
candidate at the timed workload (what is proven is what is timed; `agreement.py` checks that the
profiled call launched what the timed calls launched, and took about as long). The raw page is printed
straight into a log file (no export and re-import, except with source counters: `ncu_command`). Kernel
names are printed mangled and only the candidate's own kernels (the mangled names its cubin defines)
count:
- `sass__thread_inst_executed_true_per_opcode`: predicate-true thread executions per SASS opcode, so a
  wgmma behind a branch never taken, or predicated off, counts zero;
- on Hopper, `sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum`: tensor-pipe FLOPs, against the task's
  FLOPs for that call (a real wgmma GEMM reports exactly 2·M·N·K; a SIMT GEMM with a token wgmma, <1 %);
  for a task that requires QGMMA (FP8 operands), `sm__ops_path_tensor_src_fp8.sum` instead: GH100 has no
  per-instruction (qgmma) op-path metric for FP8, this one counts every FP8 tensor-core operation.

Standard library only: the worker runs this on a bare GPU host.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from workbench.evaluate.gpu.agreement import COUNTERS
from workbench.evaluate.gpu.occupancy import LIMITS, theoretical_occupancy
from workbench.evaluate.gpu.protocol import Status

TENSOR_FLOPS_METRIC = {"hopper": "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum"}
# The tensor-pipe metric that counts a required family's work, where it is not the target's own.
FAMILY_TENSOR_METRIC = {("hopper", "QGMMA"): "sm__ops_path_tensor_src_fp8.sum"}
# The opcodes whose work each tensor metric counts: every other math opcode is other work, wgmma of
# another operand type included (an int8 or FP8 wgmma answering beside a bf16 one run for show).
METRIC_OPCODES = {
    TENSOR_FLOPS_METRIC["hopper"]: frozenset({"HGMMA"}),
    FAMILY_TENSOR_METRIC[("hopper", "QGMMA")]: frozenset({"QGMMA"}),
}
# Families whose work is not tensor-core math (memory-bound tasks): no FLOP share is asked of them.
NO_TENSOR_SHARE = frozenset({"ASYNC_COPY"})
# A memory-bound family's work is moving the task's bytes, and the copy engine (TMA, bulk copies) must
# carry them: what ordinary loads fetched instead is counted, as the tensor families' other work is.
# Base names, asked for only where this ncu lists them (`ncu_metrics.py`): the bytes of the LSU's
# global loads that missed L1 (a warp's broadcast of one index, or a value read again on the same SM,
# hits L1 and is not counted; every byte a decoy streams through LDG misses once), of Ampere's
# cp.async (LDGSTS), cached and not, and of global atomics (which return what they read). The first
# one must be listed for the rule to judge.
ORDINARY_LOAD_METRICS = (
    "l1tex__t_bytes_pipe_lsu_mem_global_op_ld_lookup_miss",
    "l1tex__t_bytes_pipe_lsu_mem_global_op_ldgsts_cache_access",
    "l1tex__t_bytes_pipe_lsu_mem_global_op_ldgsts_cache_bypass",
    "l1tex__t_bytes_pipe_lsu_mem_global_op_atom",
)
# At most this share of the task's minimum bytes fetched by ordinary loads. Measured on the H200
# (benchmarks/results/2026-12-05_async_copy_bytes_77bf9c8_h200.log): the decode reference 0.84 %, the
# honest libcu++ decode 2.2 %, the gated delta-net references 0.7-2.5 %, a decoy streaming the KV cache
# through LDG beside a token bulk copy 100.4 %. A kernel splitting its stream half and half between the
# copy engine and LDG (K by TMA, V by LDG) stays below (~51 % by count).
MAX_ORDINARY_LOAD_SHARE = 0.6
PER_OPCODE_METRIC = "sass__thread_inst_executed_true_per_opcode"
# With source counters (the opt-in "why is it slow" profile), ncu's SpeedOfLight section too: how busy the
# SMs and the memory system were, as shares of their peaks (the section's two headline figures).
THROUGHPUT_METRICS = {
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_throughput_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
}
TIME_METRIC = "gpu__time_duration.sum"
METRICS = (PER_OPCODE_METRIC, TIME_METRIC)
# LaunchStats' metrics (no replay): what a kernel was launched with, compared with CUPTI's timed records.
LAUNCH_METRICS = {
    "grid": "launch__grid_size",
    "block": "launch__block_size",
    "registers": "launch__registers_per_thread",
    "dynamic_smem": "launch__shared_mem_per_block_dynamic",
    "static_smem": "launch__shared_mem_per_block_static",
    "shared_config": "launch__shared_mem_config_size",
}
MIN_TENSOR_SHARE = 0.9
# All the work is accounted for: what every instruction that can do the task's math did, besides the
# required family, from predicate-true thread executions at the fewest FLOPs any shape of it does per
# thread (so a lower bound): mma.sync m16n8k4 tf32 = 1024 FLOPs per warp, m8n8k16 s8 = 2048, m8n8k4
# f64 = 512; wgmma m64n8k8 tf32 = 8192 per warpgroup, m64n8k32 e4m3/s8 = 32768; an FMA is 2, a
# paired one 4. Blackwell's tcgen05.mma is issued by one thread: its smallest shape (M 64, N 8, K 8
# tf32) = 8192 per issue. Not only fused multiply-adds: a multiply-add split in two (`__fmul_rn` then
# `__fadd_rn`: FMUL, FADD; their half2, double and paired forms), IDP's int8 dot products (at their
# 2-wide 4) and one in the log domain (an exponential, MUFU) each stand for at least one of the task's
# FLOPs. Not IMAD or IMUL: nvcc issues IMAD for moves, shifts and adds as well as for addresses, and
# honest kernels that stage their operands element by element ran 9.7-11.8 % of the task's FLOPs in it
# (5 of the 23 honest CUDA kernels refused as decoys on an H100 at 9b34a3d).
LEAST_FLOPS_PER_THREAD = {
    "HMMA": 32,
    "IMMA": 64,
    "DMMA": 16,
    "HGMMA": 64,
    "IGMMA": 256,
    "QGMMA": 256,
    "UTCHMMA": 8192,
    "UTCIMMA": 8192,
    "UTCQMMA": 8192,
    "UTCOMMA": 8192,
    "FFMA": 2,
    "DFMA": 2,
    "FFMA2": 4,
    "HFMA2": 4,
    "FFMA32I": 2,
    "FMUL": 1,
    "FADD": 1,
    "FMUL32I": 1,
    "FADD32I": 1,
    "FSWZADD": 1,
    "FMUL2": 2,
    "FADD2": 2,
    "HMUL2": 2,
    "HADD2": 2,
    "DMUL": 1,
    "DADD": 1,
    "IDP": 4,
    "MUFU": 1,
}
# Beside a tensor family that did the task's FLOPs, at most this share of them done again elsewhere.
# Measured on the H200 (benchmarks/results/2026-12-03_work_accounting_h200.log): 0 for the 16 honest
# corpus kernels and the GEMM reference, 0.013 % attention forward, 0.16 % backward (softmax FMAs); a
# decoy answering from mma.sync m16n8k16 shows 100 % at the shape its SASS holds (25 % at the least).
# With the split and log-domain forms counted, the recorded profiles give 0.00 % for the GEMM reference,
# 0.4-1.4 % for attention forward and backward, 0.8-3.1 % for the FP8 GEMM's promotions and 3.0-4.0 %
# for FP8 attention (benchmarks/work_recount.py, benchmarks/results/2026-12-07_work_recount_no_imad_cpu.txt),
# 0-0.02 % for the 30 honest corpus kernels on an H100 at 6ac1253; a GEMM split into FMUL and FADD 100 %.
MAX_OTHER_SHARE = 0.1
# An attention task's softmax is other work its honest kernels need beside the matrix products, and it
# is the same per query-key score whatever the head dimension, so the bound above leaves less room for it
# as the head dimension shrinks. Beside the 10 %, this many FLOPs per score are allowed. The references
# spend at most 20 per score (FP8 attention's scaling, exponentials, sums and quantisation of P: 3.95 %
# at head dimension 128, which would be 7.9 % at 64); bf16 forward 5.4, backward 5.7. The bound at head
# dimension 64 becomes 35 % of a forward task's FLOPs, 20 % of a backward one's: a path answering either
# product again (50 % of a forward task's FLOPs at any head dimension) still shows above it.
SCORE_FLOPS_ALLOWED = 64.0

_INSTANCE = re.compile(r"\s*([A-Za-z0-9_.]+)\s*:\s*([0-9][0-9,]*(?:\.[0-9]+)?)\s*")


# The raw page as the parse below reads it: every metric's instances, base units.
RAW_PAGE = ("--page", "raw", "--csv", "--print-units", "base", "--print-metric-instances", "details")
REPORT_NAME = "profile.ncu-rep"


def report_file(log_file: str) -> str:
    """Where a run with source counters exports its report: beside its log, in the tool's own folder."""
    return str(Path(log_file).with_name(REPORT_NAME))


def tensor_metric(target: str, required: str = "") -> str | None:
    """The ncu metric that counts the tensor-pipe FLOPs of `required` (the target's family by default)
    on `target`, or None where there is none (Blackwell for now; memory-bound families)."""
    if required in NO_TENSOR_SHARE:
        return None
    return FAMILY_TENSOR_METRIC.get((target, required)) or TENSOR_FLOPS_METRIC.get(target)


def counter_metrics(listed: frozenset[str]) -> tuple[str, ...]:
    """ncu's names of the counters every timed call is sampled for (`agreement.COUNTERS`), of those this
    ncu lists: the profiled call's side of the comparison."""
    return tuple(c.profiled for c in COUNTERS.values() if c.profiled.removesuffix(".sum") in listed)


def ordinary_load_metrics(required: str, listed: frozenset[str]) -> tuple[str, ...]:
    """The `.sum` metrics counting what ordinary loads fetched, for a memory-bound family, of those this
    ncu lists (none unless it lists the first, which the rule needs)."""
    if required not in NO_TENSOR_SHARE or ORDINARY_LOAD_METRICS[0] not in listed:
        return ()
    return tuple(f"{name}.sum" for name in ORDINARY_LOAD_METRICS if name in listed)


def ncu_command(
    ncu: str,
    log_file: str,
    target: str,
    app: list[str],
    source_counters: bool = False,
    required: str = "",
    extra_metrics: Sequence[str] = (),
) -> list[str]:
    """ncu around `app`, profiling only the cudaProfilerStart/Stop range, raw page as CSV into `log_file`;
    `required`: the task's required family, which picks the tensor-pipe metric; `extra_metrics`: more
    to collect (`ordinary_load_metrics`).

    With `source_counters`, SourceCounters and SpeedOfLight are collected too (per-instruction counts
    and warp samples, the SMs' and memory's busy shares; more replay passes) and the report is exported
    to `report_file(log_file)` instead: its pages are printed afterwards (`import_commands`), the log
    keeping ncu's own messages."""
    metrics = list(METRICS)
    metric = tensor_metric(target, required)
    if metric is not None:
        metrics.append(metric)
    metrics.extend(extra_metrics)
    output = (
        ["--section", "SourceCounters", "--section", "SpeedOfLight", "-o", report_file(log_file)]
        if source_counters
        else RAW_PAGE
    )
    return [
        ncu,
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--profile-from-start",
        "off",
        "--print-kernel-base",
        "mangled",
        "--metrics",
        ",".join(metrics),
        "--section",
        "LaunchStats",
        *output,
        "--log-file",
        log_file,
        *app,
    ]


def import_commands(ncu: str, report: str) -> tuple[list[str], list[str]]:
    """The exported report's raw page (what `parse_raw_csv` reads) and its SASS source page."""
    base = [ncu, "-i", report, "--print-kernel-base", "mangled"]
    return [*base, *RAW_PAGE], [*base, "--page", "source", "--csv", "--print-source", "sass"]


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _total(text: str) -> float | None:
    """A cell's value: `384` or, with instances printed, the total before them (`384 (0: 384)`)."""
    head = text.split("(", 1)[0].strip()
    try:
        return _number(head)
    except ValueError:
        return None


def parse_instances(cell: str) -> dict[str, float]:
    """`104,791,272 (UMOV: 13,803,496; HGMMA: 4,587,520; ...)` -> {"UMOV": 13803496, "HGMMA": 4587520, ...}."""
    inside = cell[cell.find("(") + 1 : cell.rfind(")")] if "(" in cell else ""
    values: dict[str, float] = {}
    for part in inside.split(";"):
        match = _INSTANCE.fullmatch(part)
        if match:
            values[match.group(1)] = values.get(match.group(1), 0.0) + _number(match.group(2))
    return values


def _totals(row: list[str], column: dict[str, int], metrics: dict[str, str]) -> dict[str, float]:
    """Each key's metric total in one row of the raw page, where the page has that column and a value."""
    return {
        key: value
        for key, metric in metrics.items()
        if metric in column and (value := _total(row[column[metric]])) is not None
    }


# The one launch of an ncu run's warm range (`candidate_entry.warm_profiled_range`: torch's fill kernel,
# FillFunctor in its mangled name), made before the candidate's library is loaded, so it can only lead.
WARM_KERNEL_MARK = "FillFunctor"
WARM_RAN = "ran"  # the child's `warmed` file says so when that kernel was launched and the range closed


def without_warm_launch(launches: list[dict]) -> list[dict]:
    """The profiled call's launches less the warm range's, which only the first launch can be."""
    if launches and WARM_KERNEL_MARK in launches[0]["name"]:
        return launches[1:]
    return launches


def parse_raw_csv(text: str) -> list[dict]:
    """One dict per profiled kernel launch: name, per-opcode predicate-true threads, tensor FLOPs, time."""
    start = text.find('"ID"')
    if start < 0:
        return []
    rows = list(csv.reader(io.StringIO(text[start:])))
    if len(rows) < 2:
        return []
    header = rows[0]
    column = {name: index for index, name in enumerate(header)}
    launches = []
    for row in rows[1:]:
        if len(row) != len(header) or not row[column["ID"]].strip().isdigit():
            continue  # the units row, or a truncated line
        launch: dict = {
            "name": row[column["Kernel Name"]],
            "opcodes": {},
            "tensor_flops": None,
            "tensor_metric": None,
            "time_ns": None,
        }
        if PER_OPCODE_METRIC in column:
            launch["opcodes"] = parse_instances(row[column[PER_OPCODE_METRIC]])
        for metric in sorted({*TENSOR_FLOPS_METRIC.values(), *FAMILY_TENSOR_METRIC.values()}):
            if metric in column and row[column[metric]].strip():
                launch["tensor_flops"] = _number(row[column[metric]])
                launch["tensor_metric"] = metric
        if TIME_METRIC in column and row[column[TIME_METRIC]].strip():
            launch["time_ns"] = _number(row[column[TIME_METRIC]])

        launch["throughput"] = _totals(row, column, THROUGHPUT_METRICS)
        launch["counters"] = _totals(row, column, {key: c.profiled for key, c in COUNTERS.items()})
        launch["ordinary_load_bytes"] = _totals(row, column, {n: f"{n}.sum" for n in ORDINARY_LOAD_METRICS})
        launch["launch"] = {key: int(value) for key, value in _totals(row, column, LAUNCH_METRICS).items()}
        launches.append(launch)
    return launches


_CONFIG_KEYS = ("grid", "block", "registers", "dynamic_smem", "static_smem", "shared_config")


def launch_configurations(launches: list[dict], target: str) -> list[dict]:
    """Each distinct (kernel, launch configuration) of the profiled call, how often it was launched,
    and its theoretical occupancy under the carveout the driver chose (ptxas cannot know the dynamic
    shared memory of a TMA kernel, nor its block size)."""
    counts = Counter(
        (launch["name"], *(launch.get("launch", {}).get(key) for key in _CONFIG_KEYS)) for launch in launches
    )
    configurations = []
    for (name, *values), count in counts.items():
        config = {key: value for key, value in zip(_CONFIG_KEYS, values, strict=True) if value is not None}
        entry: dict = {"kernel": name, "count": count, **config}
        if target in LIMITS and config.get("block") and "registers" in config:
            found = theoretical_occupancy(
                threads_per_block=config["block"],
                registers_per_thread=config["registers"],
                static_shared_bytes=config.get("static_smem", 0),
                dynamic_shared_bytes=config.get("dynamic_smem", 0),
                target=target,
                shared_config_bytes=config.get("shared_config"),
            )
            entry.update(
                blocks_per_sm=found.blocks_per_sm,
                warps_per_sm=found.warps_per_sm,
                max_warps=found.max_warps,
                limiter=found.limiter,
            )
        configurations.append(entry)
    return configurations


def other_work(
    opcodes: dict[str, float],
    required: frozenset[str] | set[str],
    per_thread: dict[str, float] | None = None,
) -> dict[str, float]:
    """FLOPs (a lower bound) each math instruction outside the required family did in one call: at the
    fewest any of its shapes does per thread, or, for a matrix multiply, at the fewest among the shapes
    the candidate's own SASS holds (`per_thread`, the static tier's `mma_flops_per_thread`), where that is more."""
    shapes = per_thread or {}
    return {
        opcode: threads * max(LEAST_FLOPS_PER_THREAD[opcode], shapes.get(opcode, 0.0))
        for opcode, threads in opcodes.items()
        if opcode in LEAST_FLOPS_PER_THREAD and opcode not in required and threads > 0
    }


def dynamic_stage(
    launches: list[dict],
    families: dict[str, list[str]],
    required: str,
    task_flops: float | None,
    target: str,
    own_kernels: set[str] | None = None,
    task_min_bytes: float | None = None,
    mma_flops_per_thread: dict[str, float] | None = None,
    scores: float | None = None,
) -> dict:
    """The dynamic stage dict from the parsed launches of one profiled call. With `own_kernels`, a launch
    of any other kernel (cuBLAS reached through dlopen, say) is left out: its instructions and tensor work
    never count for the candidate (the correctness tier fails such a call as foreign_kernel). For a
    memory-bound family, `task_min_bytes` scales what ordinary loads fetched, where ncu counted it; the
    other work's matrix multiplies count at their shapes in the candidate's SASS (`mma_flops_per_thread`);
    an attention task's query-key `scores` widen the bound on other work by their softmax's allowance."""
    launches, foreign = _own_launches(launches, own_kernels)
    wanted = tensor_metric(target, required)
    opcodes, tensor_flops = _summed_work(launches, wanted)
    executed_families = _executed_families(opcodes, families, required)
    stage: dict = {
        "status": Status.passed,
        "kernels": sorted({launch["name"] for launch in launches}),
        "launches": launch_configurations(launches, target),
        "executed_families": dict(sorted(executed_families.items())),
        "executed_opcodes": {
            op: int(n) for op, n in sorted(opcodes.items(), key=lambda item: -item[1]) if n > 0
        },
        "required_executed": executed_families.get(required, 0) > 0,
        "tensor_flops": tensor_flops,
        "task_flops": task_flops,
        "tensor_share": None,
    }
    if foreign:
        stage["ignored_kernels"] = foreign
    stage.update(_throughput(launches))
    if not launches:
        stage["status"] = Status.dynamic_not_executed
        stage["message"] = "the profiled call ran none of the candidate's kernels" + (
            f" (only {len(foreign)} kernel(s) it does not define: {', '.join(foreign[:3])})"
            if foreign
            else ""
        )
        return stage
    if not stage["required_executed"]:
        members = "/".join(sorted(families.get(required, [])))
        stage["status"] = Status.dynamic_not_executed
        stage["message"] = (
            f"no thread executed {required} ({members}): predicate-true thread count 0 over the "
            f"{len(launches)} launch(es) of one call"
        )
        return stage
    threads = executed_families[required]
    if tensor_flops is not None and task_flops:
        counted = METRIC_OPCODES.get(wanted or "", frozenset(families.get(required, [])))
        other = other_work(opcodes, counted, mma_flops_per_thread)
        if not _judge_tensor_share(stage, required, threads, other, scores or 0.0):
            return stage
    elif required in NO_TENSOR_SHARE:
        if not _judge_ordinary_loads(stage, required, threads, launches, task_min_bytes):
            return stage
    else:
        stage["message"] = f"{required}: {threads:,} predicate-true thread executions" + _uncounted_note(
            wanted, tensor_flops, target
        )
    if foreign:
        stage["message"] += f"; {len(foreign)} kernel(s) not its own left out: {', '.join(foreign[:3])}"
    return stage


def _throughput(launches: list[dict]) -> dict[str, float]:
    """The SMs' and the memory system's busy shares over the call, each launch weighed by its time."""
    found: dict[str, float] = {}
    for key in THROUGHPUT_METRICS:
        weighed = [
            (launch["throughput"][key], launch.get("time_ns") or 0.0)
            for launch in launches
            if key in launch.get("throughput", {})
        ]
        time = sum(ns for _, ns in weighed)
        if weighed and time > 0:
            found[key] = sum(value * ns for value, ns in weighed) / time
    return found


def _own_launches(launches: list[dict], own_kernels: set[str] | None) -> tuple[list[dict], list[str]]:
    """The launches of the candidate's own kernels, and the names of the others left out."""
    if own_kernels is None:
        return launches, []
    foreign = sorted({launch["name"] for launch in launches if launch["name"] not in own_kernels})
    return [launch for launch in launches if launch["name"] in own_kernels], foreign


def _summed_work(launches: list[dict], wanted: str | None) -> tuple[dict[str, float], float | None]:
    """Predicate-true threads per opcode over all the launches, and their tensor-pipe FLOPs by `wanted`."""
    opcodes: dict[str, float] = {}
    tensor_flops: float | None = None
    for launch in launches:
        for opcode, threads in launch["opcodes"].items():
            opcodes[opcode] = opcodes.get(opcode, 0.0) + threads
        # Only the metric that counts the required family's pipe is a share of the task's FLOPs.
        if launch["tensor_flops"] is not None and launch.get("tensor_metric", wanted) == wanted:
            tensor_flops = (tensor_flops or 0.0) + launch["tensor_flops"]
    return opcodes, tensor_flops


def _executed_families(
    opcodes: dict[str, float], families: dict[str, list[str]], required: str
) -> dict[str, int]:
    """Predicate-true threads per instruction family, each opcode counted in the first family holding it."""
    family_of: dict[str, str] = {}  # the first family holding an opcode keeps it (`sass.FAMILIES`' order)
    for family, members in families.items():
        for opcode in members:
            family_of.setdefault(opcode, family)
    executed_families: dict[str, int] = {}
    for opcode, threads in opcodes.items():
        holder = family_of.get(opcode)
        if holder is not None and threads > 0:
            executed_families[holder] = executed_families.get(holder, 0) + int(threads)
    if required in families and required not in family_of.values():
        # A narrower family (QGMMA within GMMA) is counted when it is the one required.
        narrow = sum(int(opcodes.get(opcode, 0.0)) for opcode in families[required])
        if narrow > 0:
            executed_families[required] = narrow
    return executed_families


def _other_work_bound(task_flops: float, scores: float) -> float:
    """The most other work allowed, as a share of the task's FLOPs: `MAX_OTHER_SHARE`, and an attention
    task's softmax allowance for its `scores` beside it."""
    return MAX_OTHER_SHARE + SCORE_FLOPS_ALLOWED * scores / task_flops


def _judge_tensor_share(
    stage: dict, required: str, threads: int, other: dict[str, float], scores: float
) -> bool:
    """Judge the tensor pipe's share of the task's FLOPs and the work done besides it (`other`; an
    attention task's `scores` allow its softmax): sets the stage's shares and message, and its status
    where it fails (then False)."""
    tensor_flops, task_flops = stage["tensor_flops"], stage["task_flops"]
    share = tensor_flops / task_flops
    stage["tensor_share"] = share
    stage["other_work_share"] = sum(other.values()) / task_flops
    bound = _other_work_bound(task_flops, scores)
    if share >= MIN_TENSOR_SHARE and stage["other_work_share"] > bound:
        paths = ", ".join(
            f"{op} {flops / task_flops:.0%}" for op, flops in sorted(other.items(), key=lambda i: -i[1])[:3]
        )
        stage["status"] = Status.decoy
        stage["message"] = (
            f"{required} did {share:.1%} of the task's FLOPs, and other instructions did at least "
            f"{stage['other_work_share']:.0%} of them again ({paths}; at most {bound:.0%} allowed"
            f"{_softmax_note(scores)}): the answer can come from them; the required family must do the "
            "work, once"
        )
        return False
    if share < MIN_TENSOR_SHARE:
        stage["status"] = Status.low_tensor_share
        stage["message"] = (
            f"{required} ran ({threads:,} predicate-true thread executions) but the tensor pipe did {share:.1%} of the "
            f"task's FLOPs ({tensor_flops:.3g} of {task_flops:.3g}): the math happens elsewhere"
        )
        return False
    stage["message"] = (
        f"{required} executed by {threads:,} threads; tensor pipe did {share:.1%} of the task's FLOPs"
    )
    return True


def _softmax_note(scores: float) -> str:
    if not scores:
        return ""
    return f", {MAX_OTHER_SHARE:.0%} and {SCORE_FLOPS_ALLOWED:g} FLOPs per query-key score for the softmax"


def _judge_ordinary_loads(
    stage: dict, required: str, threads: int, launches: list[dict], task_min_bytes: float | None
) -> bool:
    """Judge what ordinary loads fetched against the task's minimum bytes: sets the stage's share and
    message, and its status where the copy engine did not carry the bytes (then False)."""
    counted: dict[str, float] = {}
    for launch in launches:
        for name, value in (launch.get("ordinary_load_bytes") or {}).items():
            counted[name] = counted.get(name, 0.0) + value
    head = f"{required}: {threads:,} predicate-true thread executions"
    if ORDINARY_LOAD_METRICS[0] not in counted or not task_min_bytes:
        why = (
            f"this ncu does not list {ORDINARY_LOAD_METRICS[0]}"
            if ORDINARY_LOAD_METRICS[0] not in counted
            else "the task states no minimum bytes"
        )
        stage["message"] = f"{head} (memory-bound family: what ordinary loads fetched was not judged: {why})"
        return True
    fetched = sum(counted.values())
    share = fetched / task_min_bytes
    stage["ordinary_load_bytes"] = fetched
    stage["task_min_bytes"] = task_min_bytes
    stage["ordinary_load_share"] = share
    if share > MAX_ORDINARY_LOAD_SHARE:
        stage["status"] = Status.decoy
        stage["message"] = (
            f"{required} ran ({threads:,} predicate-true thread executions), but ordinary loads (LDG, "
            f"LDGSTS, atomics) fetched {share:.0%} of the task's minimum bytes ({fetched:.4g} of {task_min_bytes:.4g}; "
            f"at most {MAX_ORDINARY_LOAD_SHARE:.0%} allowed): the copy engine must carry the data, not run "
            "beside it"
        )
        return False
    stage["message"] = f"{head}; ordinary loads fetched {share:.1%} of the task's minimum bytes"
    return True


def _uncounted_note(wanted: str | None, tensor_flops: float | None, target: str) -> str:
    """Why no tensor-FLOP share was judged: a metric not collected, or none for the target."""
    if wanted is not None:
        return "" if tensor_flops is not None else f" ({wanted} was not collected)"
    return f" (no tensor-FLOP metric for {target} yet)"
