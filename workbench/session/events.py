"""Typed session events: one JSON object per line, discriminated by `type`.

The first line of every session file is a `session_start` event that carries the schema version.
Secrets never enter an event: the settings hold the names of things, never keys.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from workbench.evaluate.result import EvalResult
from workbench.session.listings import Listings

SESSION_SCHEMA: Final = "ptxwb.session"
SESSION_SCHEMA_VERSION = 1


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ts: float = Field(default_factory=time.time, description="seconds since the epoch")
    turn: int | None = Field(default=None, description="1-based turn; none for session-level events")


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int = 0
    completion_tokens: int = 0


class SessionStart(_Event):
    type: Literal["session_start"] = "session_start"
    schema_name: Literal["ptxwb.session"] = SESSION_SCHEMA
    schema_version: int = SESSION_SCHEMA_VERSION
    session_id: str
    task: str
    target: str
    model: str = Field(description="model string, `human`, `replay:…` or `scripted:…`")
    author: Literal["model", "human", "scripted", "replay"] = "model"
    settings: dict[str, Any] = Field(default_factory=dict)
    pack_id: str | None = None
    pack_hash: str | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    parent_session: str | None = None
    fork_turn: int | None = None


class Message(_Event):
    type: Literal["message"] = "message"
    role: Literal["system", "user", "assistant"]
    content: str
    source: Literal["model", "human", "replay", "scripted", "workbench"]
    usage: Usage | None = None
    cost_usd: float | None = None
    latency_s: float | None = None


class Candidate(_Event):
    type: Literal["candidate"] = "candidate"
    source: str
    origin: CandidateOrigin
    original: str | None = Field(default=None, description="the model's source when the person edited it")
    sha256: str


class Evaluation(_Event):
    type: Literal["evaluation"] = "evaluation"
    result: EvalResult
    listings: Listings | None = Field(
        default=None, description="the build's PTX and SASS, compressed (absent in older sessions)"
    )


class Control(_Event):
    type: Literal["control"] = "control"
    action: Literal["pause", "resume", "step", "auto", "stop", "run", "edit", "replace", "skip", "fork"]
    by: Literal["human", "workbench"]
    note: str = ""


EndReason = Literal[
    "target_met",
    "turn_limit",
    "cost_limit",
    "wall_limit",
    "stopped_by_person",
    "model_error",
    "model_exhausted",
]
CandidateOrigin = Literal["model", "edited", "override"]


class SessionEnd(_Event):
    type: Literal["session_end"] = "session_end"
    reason: EndReason = Field(description="model_exhausted: a replay or scripted model served all it holds")
    note: str = ""


class RepairMark(_Event):
    """A person marks (or unmarks) two evaluated turns as a repair example for Fixit; the last mark of a
    pair wins. `turn` is the fixed turn, so a fork keeps the marks of the turns it keeps."""

    type: Literal["repair_mark"] = "repair_mark"
    failed_turn: int = Field(ge=1)
    fixed_turn: int = Field(ge=1)
    marked: bool = Field(default=True, description="false: an unmark, the pair is not an example")
    by: Literal["human", "workbench"] = "human"
    note: str = ""


Event = Annotated[
    SessionStart | Message | Candidate | Evaluation | Control | SessionEnd | RepairMark,
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
