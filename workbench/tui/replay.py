"""Timed playback of a recorded session: events at their recorded pace times a speed, pause and seek.

No model and no GPU: the events are the recording. The model's answers are typed out over the time
they took (as the live view streams them), so a replay looks like the session did.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from workbench.session.events import Event, Message

Sleep = Callable[[float], Awaitable[None]]

# Streamed pieces per second of replay time: smooth enough to look live, few enough to stay cheap.
STREAM_RATE_HZ = 30
_PIECES = re.compile(r"\S+\s*|\s+")

# Playback speeds, for `--speed` and the speed keys alike: a speed the command line accepts is one
# the keys can move away from (they halve and double within these bounds).
MIN_SPEED = 0.25
MAX_SPEED = 1000.0


def speed_in_range(speed: float) -> bool:
    return MIN_SPEED <= speed <= MAX_SPEED


@dataclass(frozen=True)
class ReplayDelta:
    """A piece of a recorded assistant message, shown before the whole message arrives."""

    turn: int | None
    text: str


ReplayItem = Event | ReplayDelta


class ReplayPlayer:
    """Plays `events` (a session's, start first) through `items()`; pause, resume, speed and seek.

    Seeking moves the play position and bumps a generation counter, so a wait in progress notices and
    the player continues from the new position; the caller refolds `played()` into its view.
    """

    def __init__(
        self,
        events: list[Event],
        *,
        speed: float = 1.0,
        max_gap_s: float = 10.0,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if not speed_in_range(speed):
            raise ValueError(f"speed must be from {MIN_SPEED:g} to {MAX_SPEED:g} (got {speed:g})")
        self.events = events
        self.speed = speed
        self.max_gap_s = max_gap_s
        self.position = 0
        self._sleep = sleep
        self._running = asyncio.Event()
        self._running.set()
        self._generation = 0

    # --- controls --------------------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    @property
    def finished(self) -> bool:
        return self.position >= len(self.events)

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def set_speed(self, speed: float) -> None:
        self.speed = min(max(speed, MIN_SPEED), MAX_SPEED)

    def played(self) -> list[Event]:
        return self.events[: self.position]

    def turns(self) -> list[int]:
        return sorted({e.turn for e in self.events if e.turn is not None})

    def played_turn(self) -> int | None:
        """The turn of the last event played."""
        for event in reversed(self.played()):
            if event.turn is not None:
                return event.turn
        return None

    def seek_to_end_of(self, turn: int | None) -> None:
        """Move to just after the last event of `turn` (None: before the first turn)."""
        position = 0
        first_turn = self._first_turn_index()
        for index, event in enumerate(self.events):
            if (
                event.turn is None
                and index < first_turn
                or turn is not None
                and event.turn is not None
                and event.turn <= turn
            ):
                position = index + 1
        self.position = max(position, 1)
        self._generation += 1

    def seek_to_end(self) -> None:
        self.position = len(self.events)
        self._generation += 1

    def _first_turn_index(self) -> int:
        return next((i for i, e in enumerate(self.events) if e.turn is not None), len(self.events))

    # --- playback --------------------------------------------------------------------------------

    def _gap(self, index: int) -> float:
        if index == 0:
            return 0.0
        recorded = max(0.0, self.events[index].ts - self.events[index - 1].ts)
        return min(recorded / self.speed, self.max_gap_s)

    async def _wait(self, seconds: float, generation: int) -> bool:
        """Sleep, honouring pause; False when a seek happened meanwhile."""
        await self._running.wait()
        if seconds > 0:
            await self._sleep(seconds)
        await self._running.wait()
        return generation == self._generation

    async def items(self) -> AsyncIterator[ReplayItem]:
        while self.position < len(self.events):
            generation = self._generation
            index = self.position
            event = self.events[index]
            gap = self._gap(index)
            if index == 0:
                # The start event names the session: shown at once, even when starting paused.
                self.position = 1
                yield event
                continue
            if isinstance(event, Message) and event.role == "assistant" and gap > 0:
                pieces = _PIECES.findall(event.content)
                count = max(1, min(len(pieces), int(gap * STREAM_RATE_HZ)))
                per_chunk = -(-len(pieces) // count)
                interrupted = False
                for start in range(0, len(pieces), per_chunk):
                    if not await self._wait(gap / count, generation):
                        interrupted = True
                        break
                    yield ReplayDelta(event.turn, "".join(pieces[start : start + per_chunk]))
                if interrupted:
                    continue
            elif not await self._wait(gap, generation):
                continue
            if generation != self._generation:
                continue
            self.position = index + 1
            yield event
