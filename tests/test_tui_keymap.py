"""The keymap and the screen agree: every key has a screen action, and the driver is asked about
exactly the actions the keymap marks as the driver's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import tui_synthetic
from agent_support import answer, write_script

from workbench.agent.config import AgentConfig
from workbench.agent.loop import MiniPTXAgent
from workbench.agent.models.recorded import ScriptedModel
from workbench.evaluate.executors import make_executor
from workbench.session.log import read_session
from workbench.tui import keymap
from workbench.tui.app import WorkbenchApp
from workbench.tui.drivers.author import AuthorDriver
from workbench.tui.drivers.base import Driver
from workbench.tui.drivers.live import LiveDriver
from workbench.tui.drivers.replay import ReplayDriver
from workbench.tui.screens.session import SessionScreen

NAMES = {a.action.split("(")[0] for a in keymap.ACTIONS}


async def instant(_: float) -> None:
    await asyncio.sleep(0)


def test_every_key_has_a_screen_action() -> None:
    assert all(callable(getattr(SessionScreen, f"action_{name}", None)) for name in NAMES)


def author_driver(tmp_path: Path) -> AuthorDriver:
    kernel = tmp_path / "k.cu"
    kernel.write_text(tui_synthetic.kernel_source(1))
    return AuthorDriver(
        task=tui_synthetic.TASK,
        target="hopper",
        kernel=kernel,
        executor=make_executor("static"),
        out=tmp_path / "author.jsonl",
    )


def live_driver(tmp_path: Path) -> LiveDriver:
    script = write_script(tmp_path / "script.json", [answer(tui_synthetic.kernel_source(1))])
    agent = MiniPTXAgent(
        task=tui_synthetic.TASK,
        target="hopper",
        model=ScriptedModel(script),
        executor=make_executor("static"),
        out=tmp_path / "live.jsonl",
        config=AgentConfig(turns=1, pack=False),
    )
    return LiveDriver(agent, pace="step")


def allowed(driver: Driver) -> set[str]:
    return {name for name in NAMES if driver.can(name)}


def test_drivers_answer_only_for_the_keymap_driver_actions(tmp_path: Path) -> None:
    # An action a driver allows but the keymap does not mark would never be asked about.
    session = tui_synthetic.write(tmp_path / "s.jsonl", tui_synthetic.events(2))
    drivers: list[Driver] = [
        ReplayDriver(read_session(session)),
        author_driver(tmp_path),
        live_driver(tmp_path),
    ]
    for driver in drivers:
        assert allowed(driver) and allowed(driver) <= keymap.DRIVER_ACTIONS, driver.mode


async def test_every_keymap_driver_action_is_allowed_by_some_driver(tmp_path: Path) -> None:
    # An action the keymap marks as the driver's that no driver ever allows is a key that never works.
    seen: set[str] = set()
    replay = ReplayDriver(read_session(tui_synthetic.write(tmp_path / "s.jsonl", tui_synthetic.events(2))))
    seen |= allowed(replay)
    replay.player.seek_to_end()  # a played turn can be forked
    seen |= allowed(replay)
    seen |= allowed(author_driver(tmp_path))
    # The live driver in the states the loop waits in: before a turn, then at the candidate's review.
    live = live_driver(tmp_path)
    app = WorkbenchApp.for_driver(live, theme="textual-dark")
    async with app.run_test(size=(140, 44)) as pilot:
        for state, key in [("paused", "s"), ("awaiting approval", "X")]:
            for _ in range(400):
                if live.state == state:
                    break
                await pilot.pause(0.05)
            assert live.state == state
            seen |= allowed(live)
            assert allowed(live) <= keymap.DRIVER_ACTIONS, state
            await pilot.press(key)
        for _ in range(400):
            if live.end is not None:
                break
            await pilot.pause(0.05)
        assert allowed(live) == {"fork"}  # an ended session can only be forked
    assert keymap.DRIVER_ACTIONS <= seen, sorted(keymap.DRIVER_ACTIONS - seen)


async def test_the_screen_asks_the_driver_about_driver_actions(tmp_path: Path) -> None:
    session = tui_synthetic.write(tmp_path / "s.jsonl", tui_synthetic.events(2))
    driver = ReplayDriver(read_session(session), speed=100.0, sleep=instant, paused=True)
    app = WorkbenchApp.for_driver(driver, theme="textual-dark")
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, SessionScreen)
        # Nothing played yet: the driver says no fork (shown, disabled); the screen's own actions go.
        assert screen.check_action("fork", ()) is None
        assert screen.check_action("faster", ()) is True
        assert screen.check_action("help", ()) is True
        # Another mode's action is hidden.
        assert screen.check_action("approve", ()) is False
        await pilot.press("space")
        for _ in range(400):
            if driver.state == "ended":
                break
            await pilot.pause()
        assert screen.check_action("fork", ()) is True
