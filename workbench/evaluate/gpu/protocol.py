"""What the host, the worker, the runner and the judge say to each other, defined once.

Standard library only: the worker and the candidate's processes import it on a bare GPU host, and
`result.py` takes its statuses and stage names from here, so a status is spelled in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

PROTOCOL = 2  # host <-> worker; a worker answering another number is refused at `hello`

# The order the GPU tiers run in: timing before the dynamic tier, whose proof is checked against the
# timed calls' kernels. A failed correctness stops both; the others do not stop each other.
GpuStage = Literal["correctness", "timing", "dynamic"]
GPU_STAGES: tuple[GpuStage, ...] = ("correctness", "timing", "dynamic")


class Status(StrEnum):
    """The closed set of verdicts, for the whole result and for each stage."""

    passed = "passed"
    not_run = "not_run"
    banned = "banned"  # what a cheater does: a library kernel, dynamic loading, a door out of the process
    unsupported = "unsupported"  # an honest construct the workbench does not run (a file, getenv, a header)
    compile_error = "compile_error"
    static_missing_family = "static_missing_family"
    runtime_error = "runtime_error"
    timeout = "timeout"
    incorrect_shape = "incorrect_shape"
    incorrect_dtype = "incorrect_dtype"
    incorrect_numerical = "incorrect_numerical"
    inputs_modified = "inputs_modified"
    foreign_kernel = "foreign_kernel"
    dynamic_not_executed = "dynamic_not_executed"
    low_tensor_share = "low_tensor_share"
    decoy = "decoy"  # the required family ran, and other instructions did the task's work again
    abi_mismatch = "abi_mismatch"  # `run` takes other arguments than the task's inputs and outputs
    faster_than_light = "faster_than_light"  # timed faster than the device's datasheet peaks allow
    # the profiled call ran other kernels, or ran far faster, than the timed ones
    profile_mismatch = "profile_mismatch"
    stray_kernel = "stray_kernel"  # GPU work of the candidate's process outside the call it belongs to
    tampered = "tampered"  # the harness in the candidate's process was changed, or its replies forged
    wall_clock_mismatch = "wall_clock_mismatch"  # timed calls took far longer by the clock than on the GPU
    infrastructure_error = "infrastructure_error"


@dataclass(frozen=True)
class TimeLimits:
    """The worker's limits for one candidate, in seconds; a request may set any of them."""

    start_s: float = 180.0  # a runner, the judge or a tool process getting ready (torch + CUDA context)
    call_floor_s: float = 10.0  # one call of the candidate may take at least this long ...
    call_factor: float = 200.0  # ... and this many times the baseline's time
    dynamic_s: float = 300.0  # the profiled call under Nsight Compute (replays every kernel per pass)
    sanitize_s: float = 120.0  # the call under memcheck (tens of times slower than a plain call)
    call_s: float | None = None  # a fixed limit per call instead of floor/factor (`--call-timeout`)


# How much longer the host waits for a worker reply than the worker's own limits, so the worker's
# status (which names what ran out) reaches the host before the host gives up on the worker.
BUILD_MARGIN_S = 300.0  # a remote build: nvcc's limit plus starting the build stack on the GPU host
BEGIN_MARGIN_S = 600.0  # begin: a runner, the judge, the baseline's timing and the load, each under start_s
STAGE_MARGIN_S = 1800.0  # one stage: up to 400 timed rounds of candidate and baselines, each checked
