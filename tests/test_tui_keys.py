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
        await until(pilot, lambda: {"step", "auto", "message"} <= footer_actions(app))
        await pilot.press("a")
        await until(pilot, lambda: driver.end is not None)
        # The footer is composed again when the session ends: wait for the new one, not a half-built one.
        await until(pilot, lambda: {"fork", "previous_turn", "help", "quit"} <= footer_actions(app))
        await until(pilot, lambda: "step" not in footer_actions(app))
        shown = footer_actions(app)
        assert not shown & {"step", "auto", "approve", "edit", "message", "toggle_pause"}, shown
        assert {"fork", "previous_turn", "help", "quit"} <= shown
        assert isinstance(app.screen, SessionScreen)


async def open_session_from_home(app: WorkbenchApp, pilot, folder: Path) -> SessionScreen:  # type: ignore[no-untyped-def]
    from textual.widgets import DataTable

    sessions = app.screen.query_one("#sessions", DataTable)
    await until(pilot, lambda: sessions.row_count == 1)
    sessions.focus()
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, SessionScreen))
    assert isinstance(app.screen, SessionScreen)
    return app.screen


@pytest.mark.parametrize("key", ["escape", "backspace"])
async def test_back_from_a_replay_opened_at_home(tmp_path: Path, key: str) -> None:
    from workbench.tui.screens.home import HomeScreen

    tui_synthetic.write(tmp_path / "one.jsonl", tui_synthetic.events(2))
    app = WorkbenchApp(lambda: HomeScreen([tmp_path]), theme="textual-dark")
    async with app.run_test(size=SIZE) as pilot:
        await open_session_from_home(app, pilot, tmp_path)
        # The new screen's footer is composed after the screen: wait for it, not a half-built one.
        await until(pilot, lambda: "back" in footer_actions(app))
        await pilot.press(key)
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))
        assert app.is_running


async def test_escape_on_the_first_screen_restores_a_zoomed_pane_then_goes_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.tui.screens.home import HomeScreen

    monkeypatch.chdir(tmp_path)
    app, driver = replay_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        await pilot.press("v", "z")
        assert app.screen.maximized is not None
        await pilot.press("escape")  # restores the zoomed pane, as it says
        assert app.screen.maximized is None and isinstance(app.screen, SessionScreen)
        await pilot.press("escape")  # then back: home, where this replay was not opened from
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))


def live_app(tmp_path: Path, first: str = "session") -> tuple[WorkbenchApp, LiveDriver]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["no code in this answer"] * 3))
    agent = MiniPTXAgent(
        task="gemm_n7168_k5120",
        target="hopper",
        model=ScriptedModel(script),
        executor=make_executor("static", tmp_path / "cache"),
        out=tmp_path / "live.jsonl",
        config=AgentConfig(turns=3, pack=False),
    )
    driver = LiveDriver(agent, pace="step")
    return WorkbenchApp.for_driver(driver, theme="textual-dark"), driver


async def test_quit_mid_run_asks_first_and_keeps_the_session(tmp_path: Path) -> None:
    from workbench.session.events import SessionEnd
    from workbench.tui.screens.dialogs import ConfirmScreen

    app, driver = live_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "paused")
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert isinstance(app.screen, SessionScreen) and driver.end is None
        await pilot.press("q")
        await pilot.press("y")
        await pilot.pause()
    assert not app.is_running
    end = read_session(tmp_path / "live.jsonl").events[-1]
    assert isinstance(end, SessionEnd) and end.reason == "stopped_by_person"


async def test_skip_on_the_last_turn_says_so_and_shows_the_kernel_not_judged(tmp_path: Path) -> None:
    from workbench.session.events import Message

    kernel = "__global__ void k() {}\n"
    script = tmp_path / "script.json"
    script.write_text(json.dumps([f"Here.\n\n```cuda\n{kernel}```\n"]))
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
        await pilot.press("s")
        await until(pilot, lambda: driver.state == "awaiting approval")
        await pilot.press("k")
        await until(pilot, lambda: driver.end is not None)
        await pilot.pause()
        cuda = app.screen.query_one(CodePane).document("cuda")
        assert cuda.lines == [kernel.rstrip("\n")]
        assert cuda.summary().startswith("skipped by the person, not judged")
    feedback = [e for e in read_session(tmp_path / "live.jsonl").events if isinstance(e, Message)][-1]
    assert (
        feedback.content.strip()
        == "Turn 1: the person chose not to evaluate this kernel. That was the last turn."
    )


async def test_o_on_a_human_turn_evaluates_the_persons_own_file(tmp_path: Path) -> None:
    from workbench.agent.models import make_model
    from workbench.session.events import Candidate
    from workbench.tui.drivers.live import TuiHuman
    from workbench.tui.screens.dialogs import EditorScreen, PromptScreen

    mine = tmp_path / "mine.cu"
    mine.write_text("#include <cublas_v2.h>\n// my own kernel, judged at once (banned)\n")
    human = TuiHuman()
    agent = MiniPTXAgent(
        task="gemm_n7168_k5120",
        target="hopper",
        model=make_model("human", human=human),
        executor=make_executor("static", tmp_path / "cache"),
        out=tmp_path / "live.jsonl",
        config=AgentConfig(turns=1, pack=False),
    )
    driver = LiveDriver(agent, pace="auto", human=human)
    app = WorkbenchApp.for_driver(driver, theme="textual-dark")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, EditorScreen))
        await pilot.press("escape")  # not the built-in editor: a file of my own
        assert driver.state == "your turn"
        await pilot.press("o")
        assert isinstance(app.screen, PromptScreen)
        app.screen.query_one("#prompt-input").value = str(mine)  # type: ignore[attr-defined]
        await pilot.press("enter")
        await until(pilot, lambda: driver.end is not None)
    candidate = next(e for e in read_session(tmp_path / "live.jsonl").events if isinstance(e, Candidate))
    assert candidate.source.strip() == mine.read_text().strip()


async def test_the_palette_lists_the_screens_actions_before_anything_is_typed(tmp_path: Path) -> None:
    from textual.command import CommandPalette
    from textual.widgets import OptionList

    app, driver = replay_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette))
        options = app.screen.query_one(OptionList)
        await until(pilot, lambda: options.option_count > 5)
        prompts = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert any(p.startswith("Seek back") for p in prompts) and any(p.startswith("Fork") for p in prompts)
