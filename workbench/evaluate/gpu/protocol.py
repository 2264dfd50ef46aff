"""What the host, the worker, the runner and the judge say to each other, defined once.

Standard library only: the worker and the candidate's processes import it on a bare GPU host, and
`result.py` takes its statuses and stage names from here, so a status is spelled in one place.
"""

import json
import types
import typing
from dataclasses import asdict, dataclass, fields, replace
from enum import StrEnum
from typing import Any, Literal, NotRequired, TypedDict, Union, cast

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


class ProtocolError(ValueError):
    """A message that is not one of the protocol's: unknown, a required field missing, a field's type
    wrong. `field` names it (dotted into nested structures) so the receiver's status can say which."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"malformed message: field {field!r} {problem}")
        self.field = field


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


class BuildRequest(TypedDict):
    """The build host's door (`remote_build.py` reads the fields)."""

    op: Literal["build"]
    source: str
    target: str
    required_family: NotRequired[str | None]
    timeout_s: NotRequired[float]


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


class BuiltReply(TypedDict):
    type: Literal["built"]
    build: dict[str, Any]
    static: dict[str, Any] | None
    kernels: list[str] | None


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


HostRequest = (
    HelloRequest | BuildRequest | BeginRequest | StageRequest | EndRequest | EvaluateRequest | ShutdownRequest
)
WorkerReply = (
    HelloReply
    | BuiltReply
    | BegunReply
    | StageReply
    | EndedReply
    | ProgressReply
    | ResultReply
    | ByeReply
    | ErrorReply
)
HOST_REQUESTS: dict[str, type] = {
    "hello": HelloRequest,
    "build": BuildRequest,
    "begin": BeginRequest,
    "stage": StageRequest,
    "end": EndRequest,
    "evaluate": EvaluateRequest,
    "shutdown": ShutdownRequest,
}
WORKER_REPLIES: dict[str, type] = {
    "hello": HelloReply,
    "built": BuiltReply,
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
    message = _parsed(data)
    if "op" in message:
        return cast(HostRequest, _check_tagged(message, "op", HOST_REQUESTS))
    return cast(WorkerReply, _check_tagged(message, "type", WORKER_REPLIES))


# ---------------------------------------------------------------------------- worker <-> runner


class LoadCommand(TypedDict):
    cmd: Literal["load"]
    library: str
    kernels: list[str] | None
    spec: dict[str, Any]
    timing: bool  # make the baselines too


class PrepareCommand(TypedDict):
    """Fresh values into a set's inputs, poison into its outputs."""

    cmd: Literal["prepare"]
    set: Literal["same", "fresh"]
    seed: int


class CallCommand(TypedDict):
    cmd: Literal["call"]
    set: Literal["same", "fresh"]


class TimingStartCommand(TypedDict):
    """Forget the timed calls so far (the warm-up's)."""

    cmd: Literal["timing_start"]


class TimingPrepareCommand(TypedDict):
    """A timed call's fresh inputs, poisoned outputs and the L2 flush, off the clock."""

    cmd: Literal["timing_prepare"]
    entrant: str  # "candidate" or a baseline's index
    seed: int


class TimingCallCommand(TypedDict):
    """The timed call itself, which the worker times from outside."""

    cmd: Literal["timing_call"]
    entrant: str


class TimingEndCommand(TypedDict):
    cmd: Literal["timing_end"]


class StartCommand(TypedDict):
    """A held spare may make its CUDA context now."""

    cmd: Literal["start"]


class ExitCommand(TypedDict):
    cmd: Literal["exit"]


class RunnerReady(TypedDict):
    """The line a runner writes once it can take a candidate."""

    type: Literal["ready"]
    device: str
    trace: str
    trace_note: str | None
    torch: str
    pid: int


class Loaded(TypedDict):
    ok: bool
    exports: dict[str, Any]
    sandbox: bool
    notes: list[str]
    autotuned: dict[str, Any] | None


class Prepared(TypedDict):
    ok: bool


class Called(TypedDict):
    done: bool
    changed: NotRequired[list[str]]  # harness functions that changed during the call
    trace: NotRequired[dict[str, Any]]


class TimingStarted(TypedDict):
    ok: bool
    baselines: list[str]


class Armed(TypedDict):
    armed: bool
    changed: list[str]


class TimingEnded(TypedDict):
    trace: dict[str, Any]
    changed: list[str]
    l2_flush_bytes: int


class RunnerFailed(TypedDict):
    """The candidate's call or load raised: the process is done for."""

    failed: str
    during: NotRequired[str | None]


class Refused(TypedDict):
    """A child that could not serve a command (unknown, malformed, a harness bug)."""

    error: str


RunnerCommand = (
    LoadCommand
    | PrepareCommand
    | CallCommand
    | TimingStartCommand
    | TimingPrepareCommand
    | TimingCallCommand
    | TimingEndCommand
    | StartCommand
    | ExitCommand
)
RunnerReply = (
    RunnerReady | Loaded | Prepared | Called | TimingStarted | Armed | TimingEnded | RunnerFailed | Refused
)
RUNNER_COMMANDS: dict[str, type] = {
    "load": LoadCommand,
    "prepare": PrepareCommand,
    "call": CallCommand,
    "timing_start": TimingStartCommand,
    "timing_prepare": TimingPrepareCommand,
    "timing_call": TimingCallCommand,
    "timing_end": TimingEndCommand,
    "start": StartCommand,
    "exit": ExitCommand,
}
# Each command's answer; "ready" is the line a runner writes unasked, once started.
RUNNER_REPLIES: dict[str, type] = {
    "ready": RunnerReady,
    "load": Loaded,
    "prepare": Prepared,
    "call": Called,
    "timing_start": TimingStarted,
    "timing_prepare": Armed,
    "timing_call": Called,
    "timing_end": TimingEnded,
}


def encode_runner(message: "RunnerCommand | RunnerReply", answering: str | None = None) -> dict[str, Any]:
    """A worker <-> runner message, checked, as the channel sends it (the channel adds the nonce)."""
    decode_runner(message, answering)
    return dict(message)


def decode_runner(data: object, answering: str | None = None) -> "RunnerCommand | RunnerReply":
    """A runner command (by `cmd`), or with `answering` the runner's reply to that command, checked. A
    reply may instead say the candidate failed (`failed`) or the command was refused (`error`)."""
    message = _parsed(data)
    if answering is None:
        return cast(RunnerCommand, _check_tagged(message, "cmd", RUNNER_COMMANDS))
    if "failed" in message:
        return cast(RunnerFailed, _check(message, RunnerFailed, ""))
    if "error" in message:
        return cast(Refused, _check(message, Refused, ""))
    return cast(RunnerReply, _check_answer(message, answering, RUNNER_REPLIES))


# ---------------------------------------------------------------------------- worker <-> judge


class SetupCommand(TypedDict):
    cmd: Literal["setup"]
    spec: dict[str, Any]


class BaselineCommand(TypedDict):
    """The primary baseline's time in the judge's process (sets the candidate's call limit)."""

    cmd: Literal["baseline_ms"]


class SnapshotCommand(TypedDict):
    """Copy a set's inputs before a call; check they hold what `seed` draws."""

    cmd: Literal["snapshot"]
    exports: dict[str, Any]
    seed: int


class CheckCommand(TypedDict):
    cmd: Literal["check"]
    exports: dict[str, Any]
    seed: int
    fresh: bool


class CheckTimedCommand(TypedDict):
    cmd: Literal["check_timed"]
    exports: dict[str, Any]
    seed: int


class ReleaseCommand(TypedDict):
    cmd: Literal["release"]


class JudgeReady(TypedDict):
    type: Literal["ready"]
    device: str
    pid: int


class SetUp(TypedDict):
    ok: bool


class BaselineTimed(TypedDict):
    ms: float


class Snapshot(TypedDict):
    ok: bool
    mismatched: list[str]


class Checked(TypedDict):
    trial: Trial


class Released(TypedDict):
    ok: bool


class Unreadable(TypedDict):
    """The candidate's buffers could not be read: their memory was unmapped or changed under the judge."""

    unreadable: str


JudgeCommand = (
    SetupCommand
    | BaselineCommand
    | SnapshotCommand
    | CheckCommand
    | CheckTimedCommand
    | ReleaseCommand
    | ExitCommand
)
JudgeReply = JudgeReady | SetUp | BaselineTimed | Snapshot | Checked | Released | Unreadable | Refused
JUDGE_COMMANDS: dict[str, type] = {
    "setup": SetupCommand,
    "baseline_ms": BaselineCommand,
    "snapshot": SnapshotCommand,
    "check": CheckCommand,
    "check_timed": CheckTimedCommand,
    "release": ReleaseCommand,
    "exit": ExitCommand,
}
JUDGE_REPLIES: dict[str, type] = {
    "ready": JudgeReady,
    "setup": SetUp,
    "baseline_ms": BaselineTimed,
    "snapshot": Snapshot,
    "check": Checked,
    "check_timed": Checked,
    "release": Released,
}


def encode_judge(message: "JudgeCommand | JudgeReply", answering: str | None = None) -> dict[str, Any]:
    """A worker <-> judge message, checked, as the channel sends it (the channel adds the nonce)."""
    decode_judge(message, answering)
    return dict(message)


def decode_judge(data: object, answering: str | None = None) -> "JudgeCommand | JudgeReply":
    """A judge command (by `cmd`), or with `answering` the judge's reply to that command, checked. A
    reply may instead say the buffers were unreadable (`unreadable`) or the command failed (`error`)."""
    message = _parsed(data)
    if answering is None:
        return cast(JudgeCommand, _check_tagged(message, "cmd", JUDGE_COMMANDS))
    if "unreadable" in message:
        return cast(Unreadable, _check(message, Unreadable, ""))
    if "error" in message:
        return cast(Refused, _check(message, Refused, ""))
    return cast(JudgeReply, _check_answer(message, answering, JUDGE_REPLIES))


# ---------------------------------------------------------------------------- checking

_HINTS: dict[type, dict[str, Any]] = {}


def _parsed(data: object) -> dict[str, Any]:
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise ProtocolError("", f"is not JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ProtocolError("", f"is not an object but {type(data).__name__}")
    return data


def _check_tagged(message: dict[str, Any], tag: str, kinds: dict[str, type]) -> dict[str, Any]:
    if tag not in message:
        raise ProtocolError(tag, "is missing")
    kind = kinds.get(message[tag]) if isinstance(message[tag], str) else None
    if kind is None:
        raise ProtocolError(tag, f"names no message of this channel: {message[tag]!r}")
    return _check(message, kind, "")


def _check_answer(message: dict[str, Any], answering: str, kinds: dict[str, type]) -> dict[str, Any]:
    kind = kinds.get(answering)
    if kind is None:
        raise ProtocolError("cmd", f"names no command with an answer: {answering!r}")
    return _check(message, kind, "")


def _hints(kind: type) -> dict[str, Any]:
    if kind not in _HINTS:
        _HINTS[kind] = typing.get_type_hints(kind)
    return _HINTS[kind]


def _check(message: dict[str, Any], kind: type, prefix: str) -> dict[str, Any]:
    """`message` as the TypedDict `kind` says: its required fields there, each field of its type."""
    required = cast(frozenset[str], kind.__required_keys__)  # type: ignore[attr-defined]
    for name, hint in _hints(kind).items():
        where = f"{prefix}{name}"
        if name not in message:
            if name in required:
                raise ProtocolError(where, "is missing")
            continue
        _check_value(message[name], hint, where)
    return message


def _check_value(value: object, hint: Any, where: str) -> None:
    if not _fits(value, hint, where):
        raise ProtocolError(where, f"should be {_describe(hint)}, not {type(value).__name__} {_short(value)}")


def _fits(value: object, hint: Any, where: str) -> bool:
    """Whether `value` fits `hint`; a nested structure that does not raises for its own field."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if origin in (Union, types.UnionType):
        return any(_fits_quietly(value, arg, where) for arg in typing.get_args(hint))
    if origin is Literal:
        return value in typing.get_args(hint)
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return False
        _check(value, hint, f"{where}.")
        return True
    if origin is list:
        if not isinstance(value, list):
            return False
        (item,) = typing.get_args(hint)
        for number, element in enumerate(value):
            _check_value(element, item, f"{where}[{number}]")
        return True
    if origin is dict:
        return isinstance(value, dict)
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        return isinstance(value, str) and value in hint._value2member_map_
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _fits_quietly(value: object, hint: Any, where: str) -> bool:
    try:
        return _fits(value, hint, where)
    except ProtocolError:
        return False


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) in (Union, types.UnionType):
        return " or ".join(_describe(arg) for arg in typing.get_args(hint))
    if typing.get_origin(hint) is Literal:
        return " or ".join(repr(arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return "null"
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        return "a status"
    name = str(getattr(typing.get_origin(hint), "__name__", None) or getattr(hint, "__name__", hint))
    return "an object" if name == "dict" or typing.is_typeddict(hint) else name


def _short(value: object) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."
