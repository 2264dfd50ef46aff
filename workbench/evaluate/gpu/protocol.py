"""What the host, the worker, the runner and the judge say to each other, defined once.

This module: the protocol's version, the stage names, the statuses, the time limits and the host <->
worker messages; `child_protocol.py` holds the worker's messages with the runner and the judge, and
`typed_check.py` the check of a message against its TypedDict that every decode runs.

Standard library only: the worker and the candidate's processes import it on a bare GPU host, and
`result.py` takes its statuses and stage names from here, so a status is spelled in one place.
"""

import json
from dataclasses import asdict, dataclass, fields, replace
from enum import StrEnum
from typing import Any, Literal, NotRequired, TypedDict, cast

from workbench.evaluate.gpu.typed_check import ProtocolError, check_tagged, parsed

# No `from __future__ import annotations` here: on Python 3.11 a TypedDict whose annotations are strings
# cannot tell NotRequired fields, and decoding reads the annotations to check a message.

# Host <-> worker; a worker answering another number is refused at `hello`. 3: the runner's timing
# commands are spelled out (timing_start, timing_prepare, timing_call, timing_end).
PROTOCOL = 3

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

    @classmethod
    def of(cls, settings: "dict[str, float] | None") -> "TimeLimits":
        """The defaults with a request's `timeouts` over them; a name that is no limit is malformed."""
        names = {field.name for field in fields(cls)}
        for name in settings or {}:
            if name not in names:
                raise ProtocolError(f"timeouts.{name}", "is not a time limit")
        return replace(cls(), **(settings or {}))

    def wire(self) -> dict[str, float]:
        """The limits as a request's `timeouts` (an unset `call_s` left out)."""
        return {name: value for name, value in asdict(self).items() if value is not None}

    def call_limit_s(self, baseline_ms: float) -> float:
        """One call's limit: the fixed one, else the floor or the factor times the baseline's time."""
        if self.call_s is not None:
            return float(self.call_s)
        return max(self.call_floor_s, self.call_factor * baseline_ms / 1e3)


# How much longer the host waits for a worker reply than the worker's own limits, so the worker's
# status (which names what ran out) reaches the host before the host gives up on the worker.
BUILD_MARGIN_S = 300.0  # a remote build: nvcc's limit plus starting the build stack on the GPU host
BEGIN_MARGIN_S = 600.0  # begin: a runner, the judge, the baseline's timing and the load, each under start_s
STAGE_MARGIN_S = 1800.0  # one stage: up to 400 timed rounds of candidate and baselines, each checked


# The worker's pace of the timing stage, which a request's `pace` may change (tests run it at zero).
WARMUP_S = 0.25  # timed rounds after at least this long of warm-up (the card settles into its clocks)
TIMED_S = 0.3  # at least `iterations` timed rounds, more while they fit in this long


# ---------------------------------------------------------------------------- shared structures

StageRecord = dict[str, Any]  # one stage in `EvalResult`'s JSON shape (result.py's models check it)


class StageHead(TypedDict):
    """What every stage record carries, whichever stage it is."""

    status: Status
    message: NotRequired[str]
    duration_s: NotRequired[float]


class Trial(TypedDict):
    """The judge's verdict on one call's outputs and inputs."""

    seed: int
    passed: bool
    fresh_addresses: bool
    outputs: dict[str, Any]
    status: Status
    message: str
    timed_call: NotRequired[int]  # set by the worker on a timed call's trial


# ---------------------------------------------------------------------------- host <-> worker


class HelloRequest(TypedDict):
    op: Literal["hello"]


class _CandidateFields(TypedDict):
    """What begin and evaluate both carry: the library, its kernels' names and the task's workload."""

    library: str
    spec: dict[str, Any]
    kernels: NotRequired[list[str] | None]  # None: read them from the library (`sass_path` helps)
    sass_path: NotRequired[str | None]
    stages: NotRequired[list[GpuStage] | None]
    timeouts: NotRequired[dict[str, float] | None]  # TimeLimits' fields by name
    sanitize: NotRequired[bool]
    seed: NotRequired[int | None]  # replays one evaluation's inputs; else a fresh secret
    pace: NotRequired[dict[str, float] | None]  # warmup_s, timed_s


class BeginRequest(_CandidateFields):
    """One candidate's GPU tiers begin: its processes start and it loads."""

    op: Literal["begin"]


class StageRequest(TypedDict):
    op: Literal["stage"]
    stage: str  # an unknown stage is answered with an infrastructure_error stage, not refused
    trials: NotRequired[int]
    warmup: NotRequired[int]
    iterations: NotRequired[int]


class EndRequest(TypedDict):
    op: Literal["end"]
    warm: NotRequired[bool]  # start the next candidate's processes now


class EvaluateRequest(_CandidateFields):
    """begin, every stage and end in one request, with progress events."""

    op: Literal["evaluate"]
    trials: NotRequired[int]
    warmup: NotRequired[int]
    iterations: NotRequired[int]
    warm: NotRequired[bool]


class ShutdownRequest(TypedDict):
    op: Literal["shutdown"]


class HelloReply(TypedDict):
    type: Literal["hello"]
    protocol: int
    host: str
    python: str
    gpus: list[str]
    ncu: str | None
    sanitizer: str | None


class BegunReply(TypedDict):
    type: Literal["begun"]
    ok: bool
    status: NotRequired[Status]  # with `message`, when the candidate could not begin
    message: NotRequired[str]
    phases_s: NotRequired[dict[str, float]]
    device: NotRequired[str | None]
    trace: NotRequired[str | None]
    call_limit_s: NotRequired[float]
    seed: NotRequired[int]


class StageReply(TypedDict):
    type: Literal["stage"]
    stage: str
    result: StageHead


class EndedReply(TypedDict):
    type: Literal["ended"]


class ProgressReply(TypedDict):
    type: Literal["progress"]
    stage: str
    state: Literal["started", "finished"]
    status: NotRequired[Status]
    message: NotRequired[str]


class ResultReply(TypedDict):
    type: Literal["result"]
    stages: dict[str, StageRecord]
    device: str | None
    trace: str | None
    phases_s: dict[str, float] | None
    seed: int | None


class ByeReply(TypedDict):
    type: Literal["bye"]


class ErrorReply(TypedDict):
    """A request the worker could not serve: malformed, unknown, out of order, or a worker bug."""

    type: Literal["error"]
    message: str
    status: NotRequired[Status]


HostRequest = HelloRequest | BeginRequest | StageRequest | EndRequest | EvaluateRequest | ShutdownRequest
WorkerReply = (
    HelloReply | BegunReply | StageReply | EndedReply | ProgressReply | ResultReply | ByeReply | ErrorReply
)
HOST_REQUESTS: dict[str, type] = {
    "hello": HelloRequest,
    "begin": BeginRequest,
    "stage": StageRequest,
    "end": EndRequest,
    "evaluate": EvaluateRequest,
    "shutdown": ShutdownRequest,
}
WORKER_REPLIES: dict[str, type] = {
    "hello": HelloReply,
    "begun": BegunReply,
    "stage": StageReply,
    "ended": EndedReply,
    "progress": ProgressReply,
    "result": ResultReply,
    "bye": ByeReply,
    "error": ErrorReply,
}


def encode_host(message: "HostRequest | WorkerReply") -> str:
    """One line of the host <-> worker channel (a request has `op`, a reply `type`), checked first."""
    decode_host(message)
    return json.dumps(message)


def decode_host(data: object) -> "HostRequest | WorkerReply":
    """A request (by `op`) or a reply (by `type`) of the host <-> worker channel, checked. `data` is a
    line or its parsed object; `id` and fields this version does not know pass through."""
    message = parsed(data)
    if "op" in message:
        return cast(HostRequest, check_tagged(message, "op", HOST_REQUESTS))
    return cast(WorkerReply, check_tagged(message, "type", WORKER_REPLIES))
