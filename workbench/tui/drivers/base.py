"""What feeds a session screen: a replay, an author's kernel file, or the live agent loop.

A driver produces items (session events, streamed text, evaluation progress) into a `Sink` (the
screen) and takes the person's controls. The screen renders; the driver holds the session's state.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from workbench.agent.items import LiveItem
from workbench.errors import UserError
from workbench.session.events import Event
from workbench.tui.replay import ReplayDelta

if TYPE_CHECKING:  # a headless driver (benchmarks/latency.py on the GPU host) runs without textual
    from textual.app import App

Item = Event | LiveItem | ReplayDelta


class Sink(Protocol):
    @property
    def app(self) -> App[Any]: ...

    async def ingest(self, item: Item) -> None: ...

    async def rebuild(self, events: list[Event]) -> None: ...

    def state_changed(self) -> None: ...


class Driver:
    """The base driver: no controls; subclasses add theirs and say which are possible right now."""

    mode: str = ""
    state: str = "idle"
    speed: float | None = None
    session_path: Path | None = None
    # Why the session could not go on (one line); the command that opened the app reports it.
    failure: str | None = None

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

    @property
    def own_file(self) -> tuple[str, str] | None:
        """The person's kernel file (name, language) when the candidates are theirs (author mode)."""
        return None

    def pending_source(self, turn: int) -> str | None:
        """A candidate of `turn` waiting for the person's review, not yet a session event."""
        return None

    def open(self) -> None:
        """Create what the session writes, before the screen opens: a `UserError` now, not on the screen."""

    async def run(self, sink: Sink) -> None:
        raise NotImplementedError

    def fail(self, sink: Sink, error: UserError) -> None:
        """End the app, non-zero: a session that cannot be written cannot go on."""
        self.failure = self.failure or str(error)  # the first failure is the cause
        sink.app.exit(return_code=2)

    async def close(self) -> None:
        """Stop background work (called when the screen goes away)."""
