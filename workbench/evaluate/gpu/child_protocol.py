"""The worker's messages with the runner (the candidate's process) and with the judge: each command,
each answer, one encode and one decode per boundary. The rest of the protocol is `protocol.py`'s.

Standard library only: the runner and the judge import it beside a candidate.
"""

import json  # noqa: F401
from typing import Any, Literal, NotRequired, TypedDict, cast

from workbench.evaluate.gpu.protocol import Trial
from workbench.evaluate.gpu.typed_check import check, check_answer, check_tagged, parsed

# No `from __future__ import annotations`: decoding reads these TypedDicts' annotations (typed_check.py).


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
    entrant: str  # "candidate", "empty" (the same path's empty call) or a baseline's index
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
    gpu_uuid: str  # the GPU's UUID ("" on the CPU): the worker's lock on it is named so
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
    empty_call: bool  # the candidate's call path can be timed empty (a TVM-FFI library's, not Triton's)


class Armed(TypedDict):
    armed: bool
    changed: list[str]
    parts_s: NotRequired[dict[str, float]]  # the runner's seconds by part of the prepare


class TimingEnded(TypedDict):
    trace: dict[str, Any]
    changed: list[str]
    l2_flush_bytes: int
    settings_set_aside: list[str]  # context settings the candidate changed, put back for the baselines
    parts_s: NotRequired[dict[str, float]]  # the runner's seconds by part of the collection


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
    message = parsed(data)
    if answering is None:
        return cast(RunnerCommand, check_tagged(message, "cmd", RUNNER_COMMANDS))
    if "failed" in message:
        return cast(RunnerFailed, check(message, RunnerFailed, ""))
    if "error" in message:
        return cast(Refused, check(message, Refused, ""))
    return cast(RunnerReply, check_answer(message, answering, RUNNER_REPLIES))


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


class CountersOpenCommand(TypedDict):
    """PM sampling of the timed calls (call_counters.py), opened for a timing stage."""

    cmd: Literal["counters_open"]
    window_s: float  # how long a counted call's window may take (call_counters.window_for)


class CountersCommand(TypedDict):
    """A counted call's sampling started before its prepare; the stage's closed before the dynamic tier
    (every call's counts)."""

    cmd: Literal["counters_start", "counters_close"]


class CountersStopCommand(TypedDict):
    """A counted call's sampling stopped after its answer, with its bracket: the worker's realtime clock
    (ns) just before the call was asked and just after its answer."""

    cmd: Literal["counters_stop"]
    began_ns: int
    ended_ns: int


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
    parts_s: NotRequired[dict[str, float]]  # a timed call's check, its seconds by part


class Released(TypedDict):
    ok: bool


class CountersOpened(TypedDict):
    ok: bool
    why: str  # why the timed calls are not counted here ("" when they are)


class CountedCalls(TypedDict):
    """Every counted call of a timing stage, in call order (each read beside the calls after it)."""

    counts: list[dict[str, float]]  # the samples each call's bracket overlaps, summed; empty where lost
    outgrown: list[int]  # the calls (from 1) whose window outgrew the sampler's hardware buffer
    why: str
    parts_s: dict[str, float]  # the judge's seconds around the calls by part (CallCounters.totals_s)


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
    | CountersOpenCommand
    | CountersCommand
    | CountersStopCommand
    | ExitCommand
)
JudgeReply = (
    JudgeReady
    | SetUp
    | BaselineTimed
    | Snapshot
    | Checked
    | Released
    | CountersOpened
    | CountedCalls
    | Unreadable
    | Refused
)
JUDGE_COMMANDS: dict[str, type] = {
    "setup": SetupCommand,
    "baseline_ms": BaselineCommand,
    "snapshot": SnapshotCommand,
    "check": CheckCommand,
    "check_timed": CheckTimedCommand,
    "release": ReleaseCommand,
    "counters_open": CountersOpenCommand,
    "counters_start": CountersCommand,
    "counters_stop": CountersStopCommand,
    "counters_close": CountersCommand,
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
    "counters_open": CountersOpened,
    "counters_start": Released,
    "counters_stop": Released,
    "counters_close": CountedCalls,
}


def encode_judge(message: "JudgeCommand | JudgeReply", answering: str | None = None) -> dict[str, Any]:
    """A worker <-> judge message, checked, as the channel sends it (the channel adds the nonce)."""
    decode_judge(message, answering)
    return dict(message)


def decode_judge(data: object, answering: str | None = None) -> "JudgeCommand | JudgeReply":
    """A judge command (by `cmd`), or with `answering` the judge's reply to that command, checked. A
    reply may instead say the buffers were unreadable (`unreadable`) or the command failed (`error`)."""
    message = parsed(data)
    if answering is None:
        return cast(JudgeCommand, check_tagged(message, "cmd", JUDGE_COMMANDS))
    if "unreadable" in message:
        return cast(Unreadable, check(message, Unreadable, ""))
    if "error" in message:
        return cast(Refused, check(message, Refused, ""))
    return cast(JudgeReply, check_answer(message, answering, JUDGE_REPLIES))
