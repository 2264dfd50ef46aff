"""Tier 4, the dynamic proof: Nsight Compute on one call of the candidate, its own kernels only.

`ncu --clock-control none` profiles the kernels whose mangled names the candidate's cubin defines
(`--kernel-name regex:^(...)$`), in a child that makes the inputs of the task's smallest workload and
calls the candidate once. From the report (`--page raw --print-metric-instances details`):
- `sass__thread_inst_executed_true_per_opcode`: predicate-true thread executions per SASS opcode, so a
  wgmma behind a branch never taken, or predicated off, counts zero;
- on Hopper, `sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum`: tensor-pipe FLOPs, against the task's
  FLOPs for that call (a real wgmma GEMM reports exactly 2·M·N·K; a SIMT GEMM with a token wgmma, <1 %).

Standard library only: the worker runs this on a bare GPU host.
"""

from __future__ import annotations

import csv
import io
import re

TENSOR_FLOPS_METRIC = {"hopper": "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum"}
PER_OPCODE_METRIC = "sass__thread_inst_executed_true_per_opcode"
TIME_METRIC = "gpu__time_duration.sum"
METRICS = (PER_OPCODE_METRIC, TIME_METRIC)
MIN_TENSOR_SHARE = 0.9

_INSTANCE = re.compile(r"\s*([A-Za-z0-9_.]+)\s*:\s*([0-9][0-9,]*(?:\.[0-9]+)?)\s*")


def kernel_filter(kernels: list[str]) -> str:
    """ncu's `--kernel-name` value matching exactly these mangled names."""
    return "regex:^(" + "|".join(re.escape(name) for name in sorted(set(kernels))) + ")$"


def ncu_command(ncu: str, report: str, kernels: list[str], target: str, app: list[str]) -> list[str]:
    metrics = list(METRICS)
    if target in TENSOR_FLOPS_METRIC:
        metrics.append(TENSOR_FLOPS_METRIC[target])
    return [
        ncu,
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--kernel-name-base",
        "mangled",
        "--kernel-name",
        kernel_filter(kernels),
        "--metrics",
        ",".join(metrics),
        "--export",
        report,
        "--force-overwrite",
        *app,
    ]


def import_command(ncu: str, report: str) -> list[str]:
    return [
        ncu,
        "--import",
        report,
        "--page",
        "raw",
        "--csv",
        "--print-units",
        "base",
        "--print-metric-instances",
        "details",
    ]


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def parse_instances(cell: str) -> dict[str, float]:
    """`104,791,272 (UMOV: 13,803,496; HGMMA: 4,587,520; ...)` -> {"UMOV": 13803496, "HGMMA": 4587520, ...}."""
    inside = cell[cell.find("(") + 1 : cell.rfind(")")] if "(" in cell else ""
    values: dict[str, float] = {}
    for part in inside.split(";"):
        match = _INSTANCE.fullmatch(part)
        if match:
            values[match.group(1)] = values.get(match.group(1), 0.0) + _number(match.group(2))
    return values


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
            "time_ns": None,
        }
        if PER_OPCODE_METRIC in column:
            launch["opcodes"] = parse_instances(row[column[PER_OPCODE_METRIC]])
        for metric in TENSOR_FLOPS_METRIC.values():
            if metric in column and row[column[metric]].strip():
                launch["tensor_flops"] = _number(row[column[metric]])
        if TIME_METRIC in column and row[column[TIME_METRIC]].strip():
            launch["time_ns"] = _number(row[column[TIME_METRIC]])
        launches.append(launch)
    return launches


def dynamic_stage(
    launches: list[dict],
    families: dict[str, list[str]],
    required: str,
    task_flops: float | None,
    target: str,
) -> dict:
    """The dynamic stage dict from the parsed launches of one profiled call."""
    opcodes: dict[str, float] = {}
    tensor_flops: float | None = None
    for launch in launches:
        for opcode, threads in launch["opcodes"].items():
            opcodes[opcode] = opcodes.get(opcode, 0.0) + threads
        if launch["tensor_flops"] is not None:
            tensor_flops = (tensor_flops or 0.0) + launch["tensor_flops"]
    family_of = {opcode: family for family, members in families.items() for opcode in members}
    executed_families: dict[str, int] = {}
    for opcode, threads in opcodes.items():
        family = family_of.get(opcode)
        if family is not None and threads > 0:
            executed_families[family] = executed_families.get(family, 0) + int(threads)
    stage: dict = {
        "status": "passed",
        "kernels": sorted({launch["name"] for launch in launches}),
        "executed_families": dict(sorted(executed_families.items())),
        "executed_opcodes": {
            op: int(n) for op, n in sorted(opcodes.items(), key=lambda item: -item[1]) if n > 0
        },
        "required_executed": executed_families.get(required, 0) > 0,
        "tensor_flops": tensor_flops,
        "task_flops": task_flops,
        "tensor_share": None,
    }
    if not launches:
        stage["status"] = "dynamic_not_executed"
        stage["message"] = "the profiled call ran none of the candidate's kernels"
        return stage
    if not stage["required_executed"]:
        wanted = "/".join(sorted(families.get(required, [])))
        stage["status"] = "dynamic_not_executed"
        stage["message"] = (
            f"no thread executed {required} ({wanted}): predicate-true thread count 0 over the "
            f"{len(launches)} launch(es) of one call"
        )
        return stage
    threads = executed_families[required]
    if tensor_flops is not None and task_flops:
        share = tensor_flops / task_flops
        stage["tensor_share"] = share
        if share < MIN_TENSOR_SHARE:
            stage["status"] = "low_tensor_share"
            stage["message"] = (
                f"{required} ran ({threads:,} predicate-true thread executions) but the tensor pipe did {share:.1%} of the "
                f"task's FLOPs ({tensor_flops:.3g} of {task_flops:.3g}): the math happens elsewhere"
            )
            return stage
        stage["message"] = (
            f"{required} executed by {threads:,} threads; tensor pipe did {share:.1%} of the task's FLOPs"
        )
    else:
        note = "" if target in TENSOR_FLOPS_METRIC else f" (no tensor-FLOP metric for {target} yet)"
        stage["message"] = f"{required}: {threads:,} predicate-true thread executions{note}"
    return stage
