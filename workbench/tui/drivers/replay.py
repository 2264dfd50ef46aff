"""Replay a recorded session in the screen: timed playback, pause, speed and seek by turn."""

from __future__ import annotations

import asyncio
from pathlib import Path

from workbench.session.log import SessionRead
from workbench.tui import keymap
from workbench.tui.drivers.base import Driver, Sink
from workbench.tui.replay import ReplayPlayer, Sleep

# The keymap's driver actions of replay mode: the ones this driver answers.
ACTIONS = frozenset(a.action for a in keymap.for_mode("replay") if a.driver)
# The ones that only mean something while there is more to play.
PLAYING = frozenset({"toggle_pause", "faster", "slower", "seek_forward"})


class ReplayDriver(Driver):
    mode = "replay"

    def __init__(
        self, read: SessionRead, *, speed: float = 1.0, sleep: Sleep | None = None, paused: bool = False
    ) -> None:
        self.player = ReplayPlayer(read.events, speed=speed, sleep=sleep or asyncio.sleep)
        self.session_path: Path | None = read.path
        self._start = read.start
        self._sink: Sink | None = None
        self._more = asyncio.Event()
        self._seeks = 0
        self._redrawing = asyncio.Lock()
        if paused:
            self.player.pause()

    @property
    def speed(self) -> float | None:  # type: ignore[override]
        return self.player.speed

    @property
    def state(self) -> str:  # type: ignore[override]
        if self.player.finished:
            return "ended"
        return "paused" if self.player.paused else "playing"

    @property
    def hint(self) -> str:
        if self.player.finished:
            return "< rewinds a turn · [ ] browse turns · f forks at the shown turn"
        if self.player.paused:
            return "space plays · < > seek by turn · + - speed"
        return "space pauses · + - speed · < > seek by turn"

    @property
    def own_file(self) -> tuple[str, str] | None:
        # An author session: the person's file, as the author screen named it.
        kernel = self._start.settings.get("kernel")
        if self._start.author != "human" or not isinstance(kernel, str):
            return None
        return Path(kernel).name, str(self._start.settings.get("language", "cuda"))

    def can(self, action: str) -> bool:
        if action == "fork":
            return self.player.played_turn() is not None
        if self.player.finished and action in PLAYING:
            return False  # nothing left to play: pausing or a new speed would change nothing shown
        return action in ACTIONS

    async def run(self, sink: Sink) -> None:
        self._sink = sink
        while True:
            sink.state_changed()
            async for item in self.player.items():
                await sink.ingest(item)
            sink.state_changed()
            # At the end: wait for a seek back, then play on from there.
            self._more.clear()
            await self._more.wait()

    def toggle_pause(self) -> None:
        if self.player.paused:
            self.player.resume()
        else:
            self.player.pause()
        self._changed()

    def faster(self) -> None:
        self.player.set_speed(self.player.speed * 2)
        self._changed()

    def slower(self) -> None:
        self.player.set_speed(self.player.speed / 2)
        self._changed()

    def seek(self, direction: int) -> None:
        """Rewind to the end of the previous turn, or jump to the end of the next one.

        The play position moves at once, so every key counts even while a redraw is under way;
        `redraw` then shows the position the last seek left.
        """
        turns = self.player.turns()
        here = self.player.played_turn()
        if direction < 0:
            earlier = [t for t in turns if here is not None and t < here]
            self.player.seek_to_end_of(earlier[-1] if earlier else None)
        else:
            later = [t for t in turns if here is None or t > here]
            if later:
                self.player.seek_to_end_of(later[0])
            else:
                self.player.seek_to_end()
        self._seeks += 1
        self._more.set()
        self._changed()

    async def redraw(self) -> None:
        """Fold what has been played into the screen after seeks; one redraw for a burst of them."""
        seeks = self._seeks
        async with self._redrawing:
            if seeks != self._seeks or self._sink is None:
                return  # a later seek redraws, from where it left the player
            await self._sink.rebuild(self.player.played())
        self._changed()

    def _changed(self) -> None:
        if self._sink is not None:
            self._sink.state_changed()
