"""What feeds a session screen: a replay, an author's kernel file, or the live agent loop.

A driver produces items (session events, streamed text, evaluation progress) into a `Sink` (the
screen) and takes the person's controls. The screen renders; the driver holds the session's state.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from workbench.agent.items import LiveItem
from workbench.session.events import Event
from workbench.tui.replay import ReplayDelta

Item = Event | LiveItem | ReplayDelta


class Sink(Protocol):
    async def ingest(self, item: Item) -> None: ...

    async def rebuild(self, events: list[Event]) -> None: ...

    def state_changed(self) -> None: ...


class Driver:
    """The base driver: no controls; subclasses add theirs and say which are possible right now."""

    mode: str = ""
    state: str = "idle"
    speed: float | None = None
    session_path: Path | None = None

    def can(self, action: str) -> bool:
        """Whether `action` (a keymap action name) is possible now."""
        return False

    @property
    def hint(self) -> str:
        """What the person can do now, in a few words, for the header."""
        return ""

    @property
    def next_turn(self) -> int | None:
        """The turn being prepared before any of its events exist (the header's n of n/N)."""
        return None

    def pending_source(self, turn: int) -> str | None:
        """A candidate of `turn` waiting for the person's review, not yet a session event."""
        return None

    async def run(self, sink: Sink) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        """Stop background work (called when the screen goes away)."""
