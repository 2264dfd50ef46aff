"""mini-swe-agent trajectory JSON (the format PTXBench writes) from and to session files.

Export: `info` (model_stats, config, exit_status, submission), `messages` in OpenAI chat form with an
`extra` dict each, a final `exit` message, `trajectory_format`. Every session event rides along in the
`extra` of the message it belongs to (`ptxwb_events`), so a workbench trajectory imports back exactly.
A trajectory from elsewhere imports as its messages and its exit (no candidates or verdicts).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from pydantic import ValidationError

import workbench
from workbench.errors import UserError
from workbench.jsonfile import read_json
from workbench.session.events import EVENT_ADAPTER, Candidate, Event, Message, SessionEnd, SessionStart
from workbench.session.hostpaths import Scrubber
from workbench.session.log import SessionRead, SessionWriter, create_new
from workbench.session.portable_events import portable_event
from workbench.tasks import get_target, resolve_task

TRAJECTORY_FORMAT = "mini-swe-agent-1.1"
EVENTS_KEY = "ptxwb_events"
START_KEY = "ptxwb_session_start"

# mini-swe-agent / PTXBench exit statuses: Submitted when the target was met, LimitsExceeded for limits.
EXIT_STATUS = {
    "target_met": "Submitted",
    "turn_limit": "LimitsExceeded",
    "cost_limit": "LimitsExceeded",
    "wall_limit": "TimeExceeded",
    "stopped_by_person": "Interrupted",
    "model_error": "ModelError",
    "model_exhausted": "ModelExhausted",
}
REASON = {
    "Submitted": "target_met",
    "LimitsExceeded": "turn_limit",
    "TimeExceeded": "wall_limit",
    "Interrupted": "stopped_by_person",
    "KeyboardInterrupt": "stopped_by_person",
    "ModelExhausted": "model_exhausted",
}


def _dump(event: Event) -> dict[str, Any]:
    # The fields the session file holds, no more: a field added since it was written (with its
    # default) is not carried, so the import writes back the file as it was.
    return EVENT_ADAPTER.dump_python(event, mode="json", exclude_unset=True)


def _message_dict(message: Message, carried: list[Event]) -> dict[str, Any]:
    extra: dict[str, Any] = {"timestamp": message.ts, EVENTS_KEY: [_dump(e) for e in carried]}
    if message.turn is not None:
        extra["turn"] = message.turn
    if message.role == "assistant":
        extra["cost"] = message.cost_usd or 0.0
        if message.usage is not None:
            extra["usage"] = message.usage.model_dump()
        if message.latency_s is not None:
            extra["latency_s"] = message.latency_s
    return {"role": message.role, "content": message.content, "extra": extra}


def to_trajectory(read: SessionRead) -> dict[str, Any]:
    """The session as a mini-swe-agent trajectory dict, with no host path (an older session's are cut)."""
    scrubber = Scrubber()
    start = portable_event(read.start, scrubber)
    assert isinstance(start, SessionStart)
    events = [start, *(portable_event(e, scrubber) for e in read.events[1:])]
    messages: list[dict[str, Any]] = []
    carried: list[Event] = []
    for event in events[1:]:
        carried.append(event)
        if isinstance(event, Message):
            messages.append(_message_dict(event, carried))
            carried = []
    ends = [e for e in events if isinstance(e, SessionEnd)]
    candidates = [e for e in events if isinstance(e, Candidate)]
    end = ends[-1] if ends else None
    exit_status = EXIT_STATUS[end.reason] if end else "Unfinished"
    submission = candidates[-1].source if candidates else ""
    exit_extra: dict[str, Any] = {
        "exit_status": exit_status,
        "submission": submission,
        EVENTS_KEY: [_dump(e) for e in carried],
    }
    if end is not None:
        exit_extra["timestamp"] = end.ts
    messages.append(
        {"role": "exit", "content": end.note or end.reason if end else "unfinished", "extra": exit_extra}
    )
    assistant = [e for e in events if isinstance(e, Message) and e.role == "assistant"]
    settings = dict(start.settings)
    model_settings = settings.pop("model_settings", {})
    executor = settings.pop("executor", None)
    return {
        "info": {
            "model_stats": {
                "instance_cost": sum(m.cost_usd or 0.0 for m in assistant),
                "api_calls": sum(1 for m in assistant if m.source == "model"),
            },
            "config": {
                "agent": {**settings, "step_limit": settings.get("turns", 0)},
                "agent_type": "workbench.agent.loop.MiniPTXAgent",
                "model": {
                    "model_name": start.model,
                    **(model_settings if isinstance(model_settings, dict) else {}),
                },
                "model_type": f"workbench.agent.models ({start.author})",
                "environment": {"executor": executor, "task": start.task, "target": start.target},
                "environment_type": "workbench.evaluate.executors",
            },
            "workbench_version": workbench.__version__,
            "exit_status": exit_status,
            "submission": submission,
            START_KEY: _dump(start),
        },
        "messages": messages,
        "trajectory_format": TRAJECTORY_FORMAT,
    }


def _load_trajectory(path: Path) -> dict[str, Any]:
    data = read_json(path)
    if isinstance(data, list):  # the oldest mini-swe-agent files: a bare message list
        data = {"info": {}, "messages": data}
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise UserError(f"{path}: not a mini-swe-agent trajectory (no `messages` list)")
    if data.get("info") is None:
        data["info"] = {}
    if not isinstance(data["info"], dict):
        raise UserError(f"{path}: not a mini-swe-agent trajectory (`info` is not an object)")
    for number, message in enumerate(data["messages"], 1):
        if not isinstance(message, dict):
            raise UserError(f"{path}: message {number} is not an object")
        if message.get("extra") is None:
            message["extra"] = {}
        if not isinstance(message["extra"], dict):
            raise UserError(f"{path}: message {number}: `extra` is not an object")
    return data


def _object(value: object) -> dict[str, Any]:
    """An optional nested object of a trajectory from elsewhere; anything else counts as absent."""
    return value if isinstance(value, dict) else {}


def _exact_events(path: Path, data: dict[str, Any]) -> list[Event] | None:
    """The carried session events of a workbench export, or None for a trajectory from elsewhere."""
    start = data["info"].get(START_KEY)
    if start is None:
        return None
    raw = [start]
    for number, message in enumerate(data["messages"], 1):
        carried = message["extra"].get(EVENTS_KEY, [])
        if not isinstance(carried, list):
            raise UserError(f"{path}: message {number}: damaged workbench events (not a list)")
        raw.extend(carried)
    try:
        return [EVENT_ADAPTER.validate_python(item) for item in raw]
    except ValidationError as exc:
        raise UserError(f"{path}: damaged workbench events: {exc.errors()[0]['msg']}") from None


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal parts
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else json.dumps(content)


def _foreign_events(data: dict[str, Any], task: str, target: str) -> tuple[SessionStart, list[Event]]:
    info = data["info"]
    model = str(_object(_object(info.get("config")).get("model")).get("model_name", "unknown"))
    start = SessionStart(
        session_id=uuid.uuid4().hex, task=task, target=target, model=model, settings={"imported": True}
    )
    events: list[Event] = []
    turn = 0
    exit_status = info.get("exit_status") or ""
    for message in data["messages"]:
        role = message.get("role")
        timestamp = message["extra"].get("timestamp")
        if role == "exit":
            exit_status = message["extra"].get("exit_status") or exit_status
            continue
        if role == "assistant":
            turn += 1
        if role not in ("system", "user", "assistant", "tool"):
            continue
        cost = message["extra"].get("cost") if role == "assistant" else None
        fields: dict[str, Any] = {
            "turn": turn or None,
            "role": "user" if role == "tool" else role,
            "content": _content(message),
            "source": "model" if role == "assistant" else "workbench",
            "cost_usd": float(cost) if isinstance(cost, int | float) else None,
        }
        if isinstance(timestamp, int | float):
            fields["ts"] = float(timestamp)
        events.append(Message.model_validate(fields))
    if exit_status:
        exit_status = str(exit_status)
        reason = REASON.get(exit_status, "model_error")
        note = f"imported exit status {exit_status}"
        events.append(SessionEnd.model_validate({"turn": turn or None, "reason": reason, "note": note}))
    return start, events


def export_trajectory(read: SessionRead, out: Path) -> Path:
    text = json.dumps(to_trajectory(read), indent=2) + "\n"
    with create_new(out, "a file") as file:
        file.write(text)
    return out


def import_trajectory(path: Path, out: Path, task: str | None = None, target: str | None = None) -> Path:
    """Write a session file from a trajectory: exactly, for a workbench export; messages only otherwise."""
    data = _load_trajectory(path)
    events = _exact_events(path, data)
    if events is None:
        if not task or not target:
            raise UserError(f"{path}: not a workbench export; say which --task and --target it was for")
        resolve_task(task)  # an unknown task or target is a UserError before anything is written
        get_target(target)
        start, rest = _foreign_events(data, task, target)
        with SessionWriter(out, start) as writer:
            for event in rest:
                writer.append(event)
        return out
    if not isinstance(events[0], SessionStart):
        raise UserError(f"{path}: the carried events do not begin with a session start")
    # Each event with exactly the fields it was exported with: the original file, line for line (but
    # for a host path an older export may hold).
    scrubber = Scrubber()
    lines = [
        EVENT_ADAPTER.dump_json(portable_event(event, scrubber), exclude_unset=True).decode("utf-8") + "\n"
        for event in events
    ]
    with create_new(out, "a session file") as file:
        file.write("".join(lines))
    return out
