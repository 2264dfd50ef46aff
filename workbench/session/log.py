"""The append-only session file: write one fsync'd line per event; read back whatever is whole."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self, TextIO

from pydantic import ValidationError

from workbench.errors import UserError
from workbench.session.events import EVENT_ADAPTER, Event, SessionStart
from workbench.session.hostpaths import Scrubber
from workbench.session.portable_events import portable_event


def create_new(path: Path, what: str) -> TextIO:
    """Open a new file for writing, its folder made if need be; a file already there is never touched."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocker = next((p for p in path.parents if p.exists()), None)
        why = f"{blocker} is a file" if blocker is not None and not blocker.is_dir() else exc.strerror
        raise UserError(f"{path}: cannot create its folder {path.parent} ({why})") from None
    try:
        # "x": checked and created in one step, so nothing someone made is overwritten.
        return open(path, "x", encoding="utf-8")  # the caller closes it
    except FileExistsError:
        there = "a folder" if path.is_dir() else what
        raise UserError(f"{path}: {there} already exists there") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot write {what} there ({exc.strerror})") from None


class SessionWriter:
    """Appends events to a session file; each line is flushed and fsync'd before `append` returns.

    No host path is written: each event goes through `hostpaths.portable_event` (a verdict names its
    build's files `cache:<key>/<file>`), so a session can be shared as it is.
    """

    def __init__(self, path: Path, start: SessionStart) -> None:
        self.path = path
        self._scrubber = Scrubber()
        self._file = create_new(path, "a session file")
        written = self.append(start)
        assert isinstance(written, SessionStart)
        self.start = written  # as written: a script's model by its file's name

    def append(self, event: Event) -> Event:
        """Write `event`; returns it as written (what a reader of the file gets)."""
        event = portable_event(event, self._scrubber)
        line = EVENT_ADAPTER.dump_json(event).decode("utf-8")
        try:
            self._file.write(line + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            # A full disk or a vanished mount mid-session: one line for the person, not a traceback.
            raise UserError(f"{self.path}: cannot write the session file ({exc.strerror})") from None
        return event

    def close(self) -> None:
        try:
            self._file.close()
        except OSError:
            pass  # only a line that failed is left to flush, and `append` has said why

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


@dataclass
class SessionRead:
    path: Path
    events: list[Event]
    dropped_bytes: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def start(self) -> SessionStart:
        first = self.events[0] if self.events else None
        if not isinstance(first, SessionStart):
            raise UserError(f"{self.path}: not a session file (no session_start line)")
        return first

    def turns(self) -> list[int]:
        return sorted({e.turn for e in self.events if e.turn is not None})


def read_session(path: Path) -> SessionRead:
    """Read every whole event; a line cut short by a crash, and anything after it, is dropped and reported."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None
    events: list[Event] = []
    problems: list[str] = []
    offset = 0
    number = 0
    while offset < len(data):
        end = data.find(b"\n", offset)
        if end < 0:
            problems.append(f"line {number + 1} is incomplete ({len(data) - offset} bytes): dropped")
            break
        number += 1
        raw = data[offset:end]
        try:
            events.append(EVENT_ADAPTER.validate_json(raw))
        except (ValidationError, ValueError) as exc:
            if data.find(b"\n", end + 1) < 0 and not data[end + 1 :].strip():
                # The last line: a write cut short leaves garbage; keep what came before.
                problems.append(f"line {number} is damaged: dropped")
                break
            reason = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            raise UserError(f"{path}:{number}: not a session event ({reason})") from None
        offset = end + 1
    if events and not isinstance(events[0], SessionStart):
        raise UserError(f"{path}: first line is not a session_start event")
    return SessionRead(path, events, len(data) - offset, problems)


def kept_through(read: SessionRead, turn: int) -> list[Event]:
    """What a fork at `turn` keeps: the turns up to it, and the session-level messages (the system prompt)."""
    turns = read.turns()
    if turn < 0 or turn > (max(turns) if turns else 0):
        raise UserError(f"{read.path}: no turn {turn} to fork at (turns: {turns or 'none'})")
    return [
        event
        for event in read.events[1:]
        if (event.turn is not None and event.turn <= turn) or (event.turn is None and event.type == "message")
    ]


def fork_session(
    source: Path, turn: int, destination: Path, session_id: str, model: str | None = None
) -> Path:
    """Copy a session through turn `turn` into a new file whose start names its parent and fork turn."""
    read = read_session(source)
    kept = kept_through(read, turn)
    start = read.start
    new_start = start.model_copy(
        update={
            "session_id": session_id,
            "parent_session": start.session_id,
            "fork_turn": turn,
            "model": model or start.model,
        }
    )
    with SessionWriter(destination, new_start) as writer:
        for event in kept:
            writer.append(event)
    return destination
