"""Replay playback: order, pace from timestamps, streaming of answers, pause and seek (no UI)."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from tui_synthetic import events

from workbench.session.events import Message
from workbench.tui.model import SessionView
from workbench.tui.replay import MAX_SPEED, MIN_SPEED, ReplayDelta, ReplayPlayer


class RecordingSleep:
    """Stands in for asyncio.sleep: records the requested waits and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await asyncio.sleep(0)


async def play_all(player: ReplayPlayer) -> list[object]:
    return [item async for item in player.items()]


async def test_replay_yields_every_event_in_order_with_streamed_answers() -> None:
    session = events(3)
    player = ReplayPlayer(session, speed=1.0, sleep=RecordingSleep())
    items = await play_all(player)
    played = [i for i in items if not isinstance(i, ReplayDelta)]
    assert played == session
    # Each answer is typed out before its whole message arrives, and the pieces add up to it.
    for message in (e for e in session if isinstance(e, Message) and e.role == "assistant"):
        index = items.index(message)
        pieces = []
        for item in reversed(items[:index]):
            if not isinstance(item, ReplayDelta):
                break
            pieces.insert(0, item.text)
        assert "".join(pieces) == message.content


async def test_replay_waits_follow_timestamps_over_speed() -> None:
    session = events(2)
    sleep = RecordingSleep()
    await play_all(ReplayPlayer(session, speed=10.0, sleep=sleep))
    gaps = [max(0.0, b.ts - a.ts) / 10.0 for a, b in itertools.pairwise(session)]
    assert abs(sum(sleep.waits) - sum(gaps)) < 1e-9


async def test_replay_caps_long_gaps() -> None:
    session = events(2)
    session[4] = session[4].model_copy(update={"ts": session[3].ts + 3600})
    sleep = RecordingSleep()
    await play_all(ReplayPlayer(session, speed=1.0, max_gap_s=2.0, sleep=sleep))
    assert max(sleep.waits) <= 2.0


async def test_pause_holds_playback_until_resume() -> None:
    player = ReplayPlayer(events(2), sleep=RecordingSleep())
    player.pause()
    task = asyncio.ensure_future(play_all(player))
    for _ in range(20):
        await asyncio.sleep(0)
    assert player.position == 1 and not task.done()  # only the start event
    player.resume()
    items = await task
    assert player.finished and items


async def test_seek_back_and_forward_by_turn() -> None:
    session = events(3)
    player = ReplayPlayer(session, sleep=RecordingSleep())
    await play_all(player)
    player.seek_to_end_of(2)
    view = SessionView.from_events(player.played())
    assert view.turn_numbers == [1, 2] and view.end is None
    assert player.played_turn() == 2
    player.seek_to_end_of(None)
    assert SessionView.from_events(player.played()).turn_numbers == []
    assert len(player.played()) == 3  # the start and the two opening messages
    rest = await play_all(player)
    assert [i for i in rest if not isinstance(i, ReplayDelta)] == session[3:]


def test_speed_is_kept_in_range() -> None:
    player = ReplayPlayer(events(1))
    player.set_speed(1e9)
    assert player.speed == MAX_SPEED
    player.set_speed(0.0)
    assert player.speed == MIN_SPEED


@pytest.mark.parametrize("speed", [0.0, MIN_SPEED / 2, MAX_SPEED * 2])
def test_a_speed_out_of_range_is_refused(speed: float) -> None:
    with pytest.raises(ValueError, match="speed must be from"):
        ReplayPlayer(events(1), speed=speed)
