"""What a command says to the per-user worker service over its socket, and what it hears back.

A command forwards the worker's own requests (`protocol.py`) wrapped with the time it will wait, or asks
the service itself (`status`, `stop`). The service answers with the worker's replies unchanged but for
their `id`, which is the command's, and its own `service_status` and `stopping`. One encode and one
decode each way, checked like every other boundary; the worker's messages inside are checked by
`protocol.py`'s decode. Standard library only.
"""

import json
from typing import Any, Literal, TypedDict, cast

from workbench.evaluate.gpu.protocol import HostRequest, WorkerReply, decode_host
from workbench.evaluate.gpu.typed_check import ProtocolError, check, check_tagged, parsed

# No `from __future__ import annotations` here: the TypedDicts below are checked at run time.


class Forward(TypedDict):
    """One of the worker's requests, and how long the command waits for its final reply."""

    forward: dict[str, Any]
    timeout_s: float


class ServiceCommand(TypedDict):
    service: Literal["status", "stop"]


class ServiceInfo(TypedDict):
    """What a service says of itself in `hello` (under `service`) and in `service_status`."""

    identity: str  # the code it runs (service_paths.code_identity)
    label: str  # the GPUs it serves
    pid: int
    uptime_s: float
    evaluations: int
    queue: int  # commands waiting for the worker
    busy: bool  # a candidate is on the worker now
    idle_limit_s: float
    worker_restarts: int


class ServiceStatus(ServiceInfo):
    type: Literal["service_status"]
    gpus: list[str]


class Stopping(TypedDict):
    type: Literal["stopping"]


SERVICE_REPLIES: dict[str, type] = {"service_status": ServiceStatus, "stopping": Stopping}


def encode_command(message: Forward | ServiceCommand) -> str:
    decode_command(message)
    return json.dumps(message)


def decode_command(data: object) -> "Forward | ServiceCommand":
    """A forwarded worker request (its own fields checked too) or a command to the service."""
    message = parsed(data)
    if "service" in message:
        return cast(ServiceCommand, check(message, ServiceCommand, ""))
    checked = cast(Forward, check(message, Forward, ""))
    if checked["timeout_s"] <= 0:
        raise ProtocolError("timeout_s", "must be above zero")
    try:
        request = decode_host(checked["forward"])
    except ProtocolError as exc:
        raise ProtocolError(f"forward.{exc.field}" if exc.field else "forward", exc.problem) from None
    if "op" not in request:
        raise ProtocolError("forward.op", "is missing")
    return checked


def forwarded(message: "Forward") -> HostRequest:
    return cast(HostRequest, message["forward"])


def encode_reply(message: "WorkerReply | ServiceStatus | Stopping") -> str:
    decode_reply(message)
    return json.dumps(message)


def decode_reply(data: object) -> "WorkerReply | ServiceStatus | Stopping":
    message = parsed(data)
    if message.get("type") in SERVICE_REPLIES:
        return cast(ServiceStatus | Stopping, check_tagged(message, "type", SERVICE_REPLIES))
    reply = decode_host(message)
    if "type" not in reply:
        raise ProtocolError("type", "is missing")
    return cast(WorkerReply, reply)
