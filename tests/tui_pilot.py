"""Waiting on a running Textual app in the TUI tests."""

from __future__ import annotations

from collections.abc import Callable

from textual.pilot import Pilot


async def until(pilot: Pilot[None], condition: Callable[[], bool], limit: int = 2400) -> None:
    """Let the app run until `condition` holds (at most `limit` pauses of 50 ms)."""
    for _ in range(limit):
        if condition():
            return
        await pilot.pause(0.05)
    raise AssertionError("the app never got there")
