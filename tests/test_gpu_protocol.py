"""The GPU side's one protocol (`evaluate/gpu/protocol.py`): each boundary's messages survive encode and
decode whole, and a malformed or unknown message is an infrastructure_error naming the field, on the
receiving side of every boundary (the worker for the host's requests, the session for the runner's and
the judge's answers, the runner and the judge for the worker's commands)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from workbench.evaluate.gpu import child_protocol, protocol
from workbench.evaluate.gpu.isolation import Child, Reply
from workbench.evaluate.gpu.protocol import ProtocolError, Status, TimeLimits
from workbench.evaluate.gpu.session import Session
from workbench.evaluate.gpu.stage_failed import StageFailed
from workbench.evaluate.gpu.worker import Worker, child_argv, judge_argv

TRIAL = {
    "seed": 7,
    "passed": True,
    "fresh_addresses": False,
    "outputs": {"C": {"name": "C", "passed": True}},
    "status": "passed",
    "message": "",
}

HOST_MESSAGES: list[dict[str, Any]] = [
    {"op": "hello"},
    {"op": "begin", "library": "/k.so", "kernels": ["k"], "spec": {"axes": {}}, "stages": ["correctness"]},
    {"op": "stage", "stage": "timing", "warmup": 2, "iterations": 6},
    {"op": "end", "warm": False},
    {"op": "evaluate", "library": "/k.so", "spec": {}, "timeouts": {"dynamic_s": 30.0}, "seed": None},
    {"op": "shutdown"},
    {
        "type": "hello",
        "protocol": 3,
        "host": "h",
        "python": "3.11",
        "gpus": [],
        "ncu": None,
        "sanitizer": None,
    },
    {"type": "begun", "ok": False, "status": "infrastructure_error", "message": "the judge: gone"},
    {"type": "stage", "stage": "timing", "result": {"status": "passed", "message": "", "duration_s": 1.5}},
    {"type": "ended"},
    {"type": "progress", "stage": "timing", "state": "finished", "status": "timeout", "message": "slow"},
    {"type": "result", "stages": {}, "device": None, "trace": None, "phases_s": None, "seed": 3},
    {"type": "bye"},
    {"type": "error", "message": "no candidate begun", "status": "infrastructure_error"},
]

RUNNER_MESSAGES: list[tuple[dict[str, Any], str | None]] = [
    ({"cmd": "load", "library": "/k.so", "kernels": None, "spec": {}, "timing": True}, None),
    ({"cmd": "prepare", "set": "fresh", "seed": 3}, None),
    ({"cmd": "call", "set": "same"}, None),
    ({"cmd": "timing_start"}, None),
    ({"cmd": "timing_prepare", "entrant": "0", "seed": 4}, None),
    ({"cmd": "timing_call", "entrant": "candidate"}, None),
    ({"cmd": "timing_end"}, None),
    ({"cmd": "start"}, None),
    (
        {
            "type": "ready",
            "device": "cpu",
            "gpu_uuid": "",
            "trace": "wall",
            "trace_note": None,
            "torch": "2",
            "pid": 1,
        },
        "ready",
    ),
    ({"ok": True, "exports": {}, "sandbox": False, "notes": [], "autotuned": None}, "load"),
    ({"ok": True}, "prepare"),
    ({"done": True, "changed": [], "trace": {"windows": []}}, "call"),
    ({"ok": True, "baselines": ["cuBLAS"], "empty_call": True}, "timing_start"),
    ({"armed": True, "changed": []}, "timing_prepare"),
    ({"done": True}, "timing_call"),
    ({"trace": {}, "changed": [], "l2_flush_bytes": 0, "settings_set_aside": []}, "timing_end"),
    ({"failed": "RuntimeError: CUDA error", "during": "call"}, "call"),
    ({"error": "unknown command 'fly'"}, "load"),
]

JUDGE_MESSAGES: list[tuple[dict[str, Any], str | None]] = [
    ({"cmd": "setup", "spec": {}}, None),
    ({"cmd": "baseline_ms"}, None),
    ({"cmd": "snapshot", "exports": {}, "seed": 1}, None),
    ({"cmd": "check", "exports": {}, "seed": 1, "fresh": True}, None),
    ({"cmd": "check_timed", "exports": {}, "seed": 1}, None),
    ({"cmd": "release"}, None),
    ({"type": "ready", "device": "cpu", "pid": 2}, "ready"),
    ({"ok": True}, "setup"),
    ({"ms": 0.25}, "baseline_ms"),
    ({"ok": False, "mismatched": ["A"]}, "snapshot"),
    ({"trial": TRIAL}, "check"),
    ({"trial": {**TRIAL, "status": "incorrect_numerical", "passed": False}}, "check_timed"),
    ({"ok": True}, "release"),
    ({"unreadable": "the buffer was unmapped"}, "check"),
    ({"cmd": "counters_open", "window_s": 0.25}, None),
    ({"cmd": "counters_start"}, None),
    (
        {
            "cmd": "counters_stop",
            "began_ns": 1_796_551_501_594_598_996,
            "ended_ns": 1_796_551_501_594_660_000,
        },
        None,
    ),
    ({"cmd": "counters_close"}, None),
    ({"ok": False, "why": "no GPU to sample"}, "counters_open"),
    ({"ok": True}, "counters_start"),
    ({"ok": True}, "counters_stop"),
    (
        {
            "counts": [
                {"tensor_cycles": 135_468_048.0, "fma_instructions": 13_080_000.0},
                {},
            ],
            "outgrown": [],
            "why": "a call gave 1 samples (70 made room for)",
            "parts_s": {"start": 0.002, "settle": 0.00005, "stop": 0.003, "decode": 0.001},
        },
        "counters_close",
    ),
    ({"counts": [{}], "outgrown": [1], "why": "", "parts_s": {}}, "counters_close"),
]


@pytest.mark.parametrize("message", HOST_MESSAGES, ids=lambda m: m.get("op") or m["type"])
def test_host_worker_messages_round_trip(message: dict[str, Any]) -> None:
    line = protocol.encode_host(message)  # type: ignore[arg-type]
    assert protocol.decode_host(line) == message
    assert protocol.decode_host({**message, "id": 4}) == {
        **message,
        "id": 4,
    }  # the transport's id rides along


@pytest.mark.parametrize(("message", "answering"), RUNNER_MESSAGES, ids=lambda m: str(m)[:30])
def test_worker_runner_messages_round_trip(message: dict[str, Any], answering: str | None) -> None:
    wire = child_protocol.encode_runner(message, answering)  # type: ignore[arg-type]
    assert child_protocol.decode_runner(json.loads(json.dumps(wire)), answering) == message


@pytest.mark.parametrize(("message", "answering"), JUDGE_MESSAGES, ids=lambda m: str(m)[:30])
def test_worker_judge_messages_round_trip(message: dict[str, Any], answering: str | None) -> None:
    wire = child_protocol.encode_judge(message, answering)  # type: ignore[arg-type]
    assert child_protocol.decode_judge(json.loads(json.dumps(wire)), answering) == message


@pytest.mark.parametrize(
    ("decode", "message", "field"),
    [
        (protocol.decode_host, {"op": "fly"}, "op"),
        (protocol.decode_host, {"op": "stage"}, "stage"),
        (protocol.decode_host, {"op": "stage", "stage": 3}, "stage"),
        (protocol.decode_host, {"op": "begin", "library": "/k.so", "spec": {}, "stages": "timing"}, "stages"),
        (
            protocol.decode_host,
            {"type": "stage", "stage": "x", "result": {"status": "fine"}},
            "result.status",
        ),
        (protocol.decode_host, {"no": "tag"}, "type"),
        (protocol.decode_host, "[1, 2]", ""),
        (child_protocol.decode_runner, {"cmd": "tgo", "entrant": "candidate"}, "cmd"),
        (child_protocol.decode_runner, {"cmd": "prepare", "set": "other", "seed": 1}, "set"),
        (child_protocol.decode_runner, {"cmd": "timing_prepare", "entrant": "0", "seed": True}, "seed"),
        (child_protocol.decode_judge, {"cmd": "check", "exports": {}, "seed": 1}, "fresh"),
        (child_protocol.decode_judge, {"cmd": "snapshot", "exports": [], "seed": 1}, "exports"),
        # The sampling is opened for the window the stage expects; a counted call's stop carries its
        # bracket, both ends of it.
        (child_protocol.decode_judge, {"cmd": "counters_open"}, "window_s"),
        (child_protocol.decode_judge, {"cmd": "counters_stop", "began_ns": 1}, "ended_ns"),
        (child_protocol.decode_judge, {"cmd": "counters_stop", "began_ns": 1.5, "ended_ns": 2}, "began_ns"),
    ],
)
def test_a_malformed_message_names_its_field(decode: Any, message: object, field: str) -> None:
    with pytest.raises(ProtocolError) as raised:
        decode(message)
    assert raised.value.field == field and repr(field) in str(raised.value)


def test_a_malformed_answer_names_its_field() -> None:
    with pytest.raises(ProtocolError, match="'exports'") as raised:
        child_protocol.decode_runner({"ok": True, "sandbox": True, "notes": [], "autotuned": None}, "load")
    assert raised.value.field == "exports"
    with pytest.raises(ProtocolError) as raised:
        child_protocol.decode_judge({"trial": {**TRIAL, "seed": "7"}}, "check")
    assert raised.value.field == "trial.seed"
    # One call's counts where the close answers every counted call's.
    with pytest.raises(ProtocolError) as raised:
        child_protocol.decode_judge(
            {"counts": {"tensor_cycles": 1.0}, "outgrown": [], "why": "", "parts_s": {}},
            "counters_close",
        )
    assert raised.value.field == "counts"


def test_time_limits_are_the_defaults_a_request_overrides() -> None:
    assert TimeLimits.of(None) == TimeLimits()
    limits = TimeLimits.of({"dynamic_s": 30.0, "call_s": 2.0})
    assert limits.dynamic_s == 30.0 and limits.call_limit_s(baseline_ms=500.0) == 2.0
    assert TimeLimits().call_limit_s(baseline_ms=500.0) == 100.0  # 200 x the baseline over the 10 s floor
    assert "call_s" not in TimeLimits().wire()
    with pytest.raises(ProtocolError) as raised:
        TimeLimits.of({"dynamic": 30.0})
    assert raised.value.field == "timeouts.dynamic"


# ------------------------------------------------------------------ each receiving side


def _worker_replies(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = io.StringIO()
    worker = Worker(out)
    try:
        for request in requests:
            assert worker.handle(request)
    finally:
        worker.close()
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_the_worker_answers_a_malformed_request_with_an_infrastructure_error() -> None:
    replies = _worker_replies(
        [
            {"op": "stage", "id": 1},
            {"op": "begin", "id": 2, "library": "/k.so", "spec": {}, "timeouts": {"dynamic": 1.0}},
            {"op": "begin", "id": 3, "library": 5, "spec": {}},
            # The build op left the worker (the GPU host builds through remote_build): refused, not served.
            {"op": "build", "id": 4, "source": "", "target": "hopper"},
        ]
    )
    assert [reply["status"] for reply in replies] == [Status.infrastructure_error] * 4
    assert [reply["id"] for reply in replies] == [1, 2, 3, 4]
    assert "names no message" in replies[3]["message"]
    assert "'stage' is missing" in replies[0]["message"]
    assert "'timeouts.dynamic'" in replies[1]["message"]
    assert "'library'" in replies[2]["message"]


def _session() -> Session:
    """A session of a real worker on the CPU device, for a candidate with no kernels (nothing is read)."""
    request = {
        "op": "begin",
        "library": "/nowhere/k.so",
        "kernels": [],
        "spec": {"device": "cpu", "axes": {}},
    }
    return Session(Worker(io.StringIO()), request)  # type: ignore[arg-type]


def test_a_malformed_runner_answer_ends_the_stage_with_an_infrastructure_error() -> None:
    # What came back on the candidate's channel (a candidate can write there: `tampered` tests forge it).
    answer = Reply({"armed": "yes", "changed": [], "nonce": "n"})
    command: Any = {"cmd": "timing_prepare", "entrant": "candidate", "seed": 1}
    with pytest.raises(StageFailed) as raised:
        _session()._runner_answer(command, answer, "timing: preparing a call")
    assert raised.value.stage["status"] == Status.infrastructure_error
    assert raised.value.stage["message"].startswith(
        "timing: preparing a call: malformed message: field 'armed'"
    )


def test_a_malformed_judge_answer_ends_the_stage_with_an_infrastructure_error() -> None:
    command: Any = {"cmd": "check", "exports": {}, "seed": 7, "fresh": False}
    with pytest.raises(StageFailed) as raised:
        _session()._judge_answer(command, {"trial": {**TRIAL, "outputs": None}})
    assert raised.value.stage["status"] == Status.infrastructure_error
    assert "field 'trial.outputs'" in raised.value.stage["message"]


def _refusals(argv: list[str], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The real process on the CPU device, started as the worker starts it, asked `messages` over its
    private pipes: its replies without their nonces."""
    child = Child(argv, env={"PTXWB_DEVICE": "cpu"})
    try:
        assert child.receive(120).ok  # its ready line
        replies = [child.request(message, 120).data or {} for message in messages]
    finally:
        child.close()
    return [{key: value for key, value in reply.items() if key != "nonce"} for reply in replies]


def test_the_runner_refuses_a_malformed_command_naming_the_field() -> None:
    replies = _refusals(child_argv(), [{"cmd": "prepare", "set": "same"}, {"cmd": "tgo"}])
    assert replies == [
        {"error": "malformed message: field 'seed' is missing"},
        {"error": "unknown command 'tgo'"},
    ]


def test_the_judge_refuses_a_malformed_command_naming_the_field() -> None:
    replies = _refusals(judge_argv(), [{"cmd": "check_timed", "exports": {}}])
    assert replies == [{"error": "malformed message: field 'seed' is missing"}]
