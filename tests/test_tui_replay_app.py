"""The session screen over a replay, driven with Textual's pilot: every key of replay mode."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import tui_synthetic
from textual.pilot import Pilot

from workbench.session.log import read_session
from workbench.tui.app import WorkbenchApp
from workbench.tui.drivers.replay import ReplayDriver
from workbench.tui.replay import MAX_SPEED, MIN_SPEED
from workbench.tui.screens.dialogs import PromptScreen
from workbench.tui.screens.help import HelpScreen
from workbench.tui.screens.session import SessionScreen
from workbench.tui.widgets.code_pane import CodePane
from workbench.tui.widgets.conversation import ConversationPane, MessageBlock
from workbench.tui.widgets.header import SessionHeader
from workbench.tui.widgets.timing import TimingPane

SIZE = (140, 44)


async def instant(_: float) -> None:
    await asyncio.sleep(0)


@pytest.fixture
def session_file(tmp_path: Path) -> Path:
    listing = tmp_path / "listing.sass"
    listing.write_text(
        "        /*0000*/                   HGMMA.64x8x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT ;\n"
    )
    return tui_synthetic.write(tmp_path / "session.jsonl", tui_synthetic.events(4, sass=listing))


def make_app(path: Path, *, paused: bool = False, speed: float = 100.0) -> tuple[WorkbenchApp, ReplayDriver]:
    driver = ReplayDriver(read_session(path), speed=speed, sleep=instant, paused=paused)
    return WorkbenchApp.for_driver(driver, theme="textual-dark"), driver


async def until(pilot: Pilot[None], condition, limit: int = 400) -> None:  # type: ignore[no-untyped-def]
    for _ in range(limit):
        if condition():
            return
        await pilot.pause()
    raise AssertionError("the app never got there")


def screen(app: WorkbenchApp) -> SessionScreen:
    assert isinstance(app.screen, SessionScreen)
    return app.screen


def header_text(app: WorkbenchApp) -> str:
    return str(app.screen.query_one(SessionHeader).render())


async def test_replay_plays_to_the_end_and_shows_the_last_turn(session_file: Path) -> None:
    app, driver = make_app(session_file)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        await pilot.pause()
        s = screen(app)
        assert s.view.turn_numbers == [1, 2, 3, 4]
        assert "turn 4/4" in header_text(app) and "ended" in header_text(app)
        code = s.query_one(CodePane)
        assert "turn 4" in code.document("cuda").lines[0]
        assert code.document("ptx").unavailable.startswith("PTX not available")
        await until(pilot, lambda: code.document("sass").marks == {0: "GMMA"})  # read in a worker
        assert "turn 3" in "\n".join(code.document("diff").lines)
        assert len(s.query_one(TimingPane).query_one("#timing-table").rows) == 4
        assistants = [b for b in s.query(MessageBlock) if b.message and b.message.role == "assistant"]
        assert len(assistants) == 4 and not any(b.streaming for b in s.query(MessageBlock))


async def test_space_pauses_and_resumes(session_file: Path) -> None:
    app, driver = make_app(session_file, paused=True)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(10):
            await pilot.pause()
        assert driver.player.position == 1 and "paused" in header_text(app)
        await pilot.press("space")
        await until(pilot, lambda: driver.state == "ended")
        assert driver.player.finished


async def test_speed_keys(session_file: Path) -> None:
    app, driver = make_app(session_file, paused=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("plus")
        assert driver.speed == 200.0
        await pilot.press("minus", "minus")
        assert driver.speed == 50.0
        assert "×50" in header_text(app)


@pytest.mark.parametrize(
    ("start", "toward_bound", "away"),
    [(MIN_SPEED, "minus", "plus"), (MAX_SPEED, "plus", "minus")],
)
async def test_speed_keys_stop_at_the_bounds_the_command_line_accepts(
    session_file: Path, start: float, toward_bound: str, away: str
) -> None:
    # `--speed` accepts exactly these bounds, so a replay started at one can be left by a key.
    app, driver = make_app(session_file, paused=True, speed=start)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(toward_bound)
        assert driver.speed == start
        await pilot.press(away)
        assert driver.speed != start and MIN_SPEED <= driver.speed <= MAX_SPEED


async def test_seek_back_and_forward_redraws_the_panes(session_file: Path) -> None:
    app, driver = make_app(session_file)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        driver.player.pause()
        await pilot.press("less_than_sign")
        await until(pilot, lambda: screen(app).view.turn_numbers == [1, 2, 3])
        await pilot.pause()
        assert "turn 3" in screen(app).query_one(CodePane).document("cuda").lines[0]
        assert "── turn 4 ──" not in [str(label.render()) for label in app.screen.query(".turn-rule")]
        await pilot.press("greater_than_sign")
        await until(pilot, lambda: screen(app).view.turn_numbers == [1, 2, 3, 4])


async def test_listings_not_loaded_in_advance_load_in_a_worker(tmp_path: Path) -> None:
    sass = tmp_path / "listing.sass"
    sass.write_text("        /*0000*/                   HGMMA.64x8x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT ;\n")
    ptx = tmp_path / "kernel.ptx"
    ptx.mkdir()  # a listing that cannot be read: the tab says why
    app, _ = make_app(
        tui_synthetic.write(tmp_path / "s.jsonl", tui_synthetic.events(3, ptx=ptx, sass=sass)), paused=True
    )
    async with app.run_test(size=SIZE) as pilot:
        # Seeking shows turn 2 without playing its evaluation: nothing read its listings in advance.
        await pilot.press("greater_than_sign", "greater_than_sign")
        await until(pilot, lambda: screen(app).view.turn_numbers == [1, 2])
        code = screen(app).query_one(CodePane)
        code.activate("sass")
        assert code.view("sass").document.unavailable == f"loading SASS from {sass} …"
        # The shown tab takes the listing by itself once the worker has read and marked it.
        await until(pilot, lambda: code.view("sass").document.marks == {0: "GMMA"})
        assert code.document("ptx").unavailable == f"loading PTX from {ptx} …"
        await until(pilot, lambda: not code.document("ptx").unavailable.startswith("loading"))
        assert code.document("ptx").unavailable == "PTX not readable: Is a directory"


async def test_turn_navigation_and_tabs(session_file: Path) -> None:
    app, driver = make_app(session_file)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        await pilot.press("left_square_bracket", "left_square_bracket")
        s = screen(app)
        assert s.selected == 2
        assert "turn 2" in s.query_one(CodePane).document("cuda").lines[0]
        assert "turn 2/4 (latest 4)" in header_text(app)
        await pilot.press("3")
        assert s.query_one(CodePane).active == "sass"
        await pilot.press("d")
        assert s.query_one(CodePane).active == "diff"
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert s.selected is None  # back to following the latest turn


async def test_goto_error_jumps_to_the_compiler_error_line(session_file: Path) -> None:
    app, driver = make_app(session_file)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        await pilot.press(*["left_square_bracket"] * 3)
        assert screen(app).selected == 1
        await pilot.press("g")
        code = screen(app).query_one(CodePane)
        assert code.active == "cuda" and code.view("cuda").cursor_line == 3  # kernel.cu(4), 0-based


async def test_marked_lines_jump_in_the_sass_tab(session_file: Path) -> None:
    app, driver = make_app(session_file)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        await pilot.press("3", "n")
        assert screen(app).query_one(CodePane).view("sass").cursor_line == 0


async def test_fork_writes_a_child_session(
    session_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app, driver = make_app(session_file)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        await pilot.press("left_square_bracket", "left_square_bracket", "f")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press("enter")
        await pilot.pause()
    # Into the user's runs folder, never beside the parent (the install's sessions/ for a demo).
    child = read_session(tmp_path / "runs" / "session-fork-t2.jsonl")
    assert child.start.parent_session == "synthetic-0001" and child.start.fork_turn == 2
    assert child.turns() == [1, 2]


async def test_write_kernel_and_screenshot(
    session_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app, driver = make_app(session_file)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        await pilot.press("w")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press("enter")
        await pilot.press("S")
        await pilot.pause()
    written = tmp_path / "gemm_n7168_k5120-turn4.cu"
    assert written.read_text() == tui_synthetic.kernel_source(4)
    shots = list(tmp_path.glob("ptxwb-gemm_n7168_k5120-turn4-*.svg"))
    assert len(shots) == 1 and shots[0].read_text().startswith("<svg")


async def test_help_palette_zoom_and_conversation(session_file: Path) -> None:
    app, driver = make_app(session_file)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, SessionScreen)
        # The command palette runs screen actions by name.
        await pilot.press("ctrl+p")
        await pilot.press(*"Prev turn")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert screen(app).selected == driver.player.turns()[-2]
        await pilot.press("v", "z")
        assert app.screen.maximized is not None and app.screen.maximized.id == "code"
        await pilot.press("z")
        assert app.screen.maximized is None
        await pilot.press("c")
        assert app.screen.focused is not None and app.screen.focused.id == "conversation"
        assert isinstance(app.screen.focused, ConversationPane)


async def test_narrow_terminal_swaps_conversation_and_code(session_file: Path) -> None:
    app, driver = make_app(session_file)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        s = screen(app)
        assert s.has_class("-narrow")
        assert not s.query_one("#conversation").display
        await pilot.press("c")
        assert s.query_one("#conversation").display and not s.query_one("#work").display
        await pilot.press("v")
        assert s.query_one("#work").display and not s.query_one("#conversation").display


async def test_quit(session_file: Path) -> None:
    app, _ = make_app(session_file, paused=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_streamed_text_is_dropped_when_the_model_call_is_retried(session_file: Path) -> None:
    from workbench.agent.items import ModelRetry, TextDelta

    app, _ = make_app(session_file, paused=True)
    async with app.run_test(size=SIZE) as pilot:
        s = screen(app)
        await s.ingest(TextDelta(turn=1, text="half an answ"))
        await pilot.pause()
        assert [b for b in s.query(MessageBlock) if b.streaming]
        await s.ingest(ModelRetry(turn=1, attempt=1, delay_s=2.0, error="rate limited"))
        await pilot.pause()
        assert not [b for b in s.query(MessageBlock) if b.streaming]


async def test_theme_change_recolours_the_code(session_file: Path) -> None:
    app, driver = make_app(session_file)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        view = screen(app).query_one(CodePane).view("cuda")
        dark = view.render_line(0)
        app.theme = "textual-light"
        await pilot.pause()
        assert not app.current_theme.dark
        assert view.render_line(0).text == dark.text and view.render_line(0) != dark


async def test_a_screen_being_dismissed_ignores_its_drivers_last_state_change(session_file: Path) -> None:
    # A driver may report a state change after going back took the screen's panes away: harmless
    # there, while on the current screen a missing pane is still an error.
    from textual.css.query import NoMatches
    from textual.screen import Screen

    driver = ReplayDriver(read_session(session_file), speed=100.0, sleep=instant)
    app = WorkbenchApp(lambda: Screen(), theme="textual-dark")  # the screen a session is opened from
    async with app.run_test(size=SIZE) as pilot:
        shown = SessionScreen(driver)
        await app.push_screen(shown)
        await until(pilot, lambda: driver.state == "ended")
        await shown.query_one(SessionHeader).remove()
        with pytest.raises(NoMatches):
            shown.state_changed()
        app.pop_screen()  # back
        await pilot.pause()
        assert not shown.is_current
        shown.state_changed()
