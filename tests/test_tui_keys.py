"""Keys the workbench shows work from wherever the focus is; keys that can do nothing are not shown."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import tui_synthetic
from textual.widgets._footer import FooterKey
from tui_pilot import until

from workbench.agent.config import AgentConfig
from workbench.agent.loop import MiniPTXAgent
from workbench.agent.models import ScriptedModel
from workbench.evaluate.executors import make_executor
from workbench.session.log import read_session
from workbench.tui.app import WorkbenchApp
from workbench.tui.drivers.live import LiveDriver
from workbench.tui.drivers.replay import ReplayDriver
from workbench.tui.screens.session import SessionScreen
from workbench.tui.widgets.code_pane import CodePane

SIZE = (140, 44)
HGMMA = "        /*0000*/                   HGMMA.64x8x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT ;\n"


async def instant(_: float) -> None:
    await asyncio.sleep(0)


def replay_app(tmp_path: Path) -> tuple[WorkbenchApp, ReplayDriver]:
    listing = tmp_path / "listing.sass"
    listing.write_text("        /*0000*/                   MOV R1, c[0x0][0x28] ;\n" + HGMMA * 3)
    path = tui_synthetic.write(tmp_path / "s.jsonl", tui_synthetic.events(3, sass=listing))
    driver = ReplayDriver(read_session(path), speed=100.0, sleep=instant)
    return WorkbenchApp.for_driver(driver, theme="textual-dark"), driver


def footer_actions(app: WorkbenchApp) -> set[str]:
    return {key.action for key in app.screen.query(FooterKey)}


@pytest.mark.parametrize("focus", ["conversation", "timing", "code"])
async def test_next_and_previous_mark_work_wherever_the_focus_is(tmp_path: Path, focus: str) -> None:
    app, driver = replay_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        code = app.screen.query_one(CodePane)
        await pilot.press("3")
        await until(pilot, lambda: bool(code.view("sass").document.marks))
        await pilot.press({"conversation": "c", "timing": "t", "code": "v"}[focus])
        await pilot.press("n")
        assert code.view("sass").cursor_line == 1
        await pilot.press("n", "n")
        assert code.view("sass").cursor_line == 3
        await pilot.press("N")
        assert code.view("sass").cursor_line == 2


async def test_keys_that_can_do_nothing_leave_the_footer_once_a_live_session_ended(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["no code in this answer"]))
    agent = MiniPTXAgent(
        task="gemm_n7168_k5120",
        target="hopper",
        model=ScriptedModel(script),
        executor=make_executor("static", tmp_path / "cache"),
        out=tmp_path / "live.jsonl",
        config=AgentConfig(turns=1, pack=False),
    )
    driver = LiveDriver(agent, pace="step")
    app = WorkbenchApp.for_driver(driver, theme="textual-dark")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "paused")
        assert {"step", "auto", "message"} <= footer_actions(app)
        await pilot.press("a")
        await until(pilot, lambda: driver.end is not None)
        await pilot.pause()
        shown = footer_actions(app)
        assert not shown & {"step", "auto", "approve", "edit", "message", "toggle_pause"}, shown
        assert {"fork", "previous_turn", "help", "quit"} <= shown
        assert isinstance(app.screen, SessionScreen)
