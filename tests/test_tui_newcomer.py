"""The workbench as a newcomer meets it (issue 28): no traceback, no key that does nothing, nothing cut."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import tui_synthetic
from build_support import needs_nvcc, session_cache
from rich.console import Console
from textual.command import CommandPalette
from textual.widgets import DataTable, OptionList, Static
from textual.widgets._footer import FooterKey
from tui_pilot import until

from workbench.agent.config import AgentConfig
from workbench.agent.loop import MiniPTXAgent
from workbench.agent.models import ScriptedModel
from workbench.errors import UserError
from workbench.evaluate.executors import make_executor
from workbench.evaluate.request import EvalRequest, ProgressCallback
from workbench.evaluate.result import EvalResult, Stages, StaticStage, Status
from workbench.paths import sessions_dir
from workbench.session.events import Candidate, Evaluation, SessionEnd
from workbench.session.log import read_session
from workbench.tui.app import WorkbenchApp
from workbench.tui.drivers.author import AuthorDriver
from workbench.tui.drivers.live import LiveDriver
from workbench.tui.drivers.replay import ReplayDriver
from workbench.tui.model import SessionView
from workbench.tui.screens.dialogs import ConfirmScreen
from workbench.tui.screens.home import HomeScreen
from workbench.tui.screens.session import SessionScreen
from workbench.tui.widgets.code_pane import CodePane
from workbench.tui.widgets.header import HeaderFacts, render_header
from workbench.tui.widgets.timing import TimingPane
from workbench.tui.widgets.verdict import render_verdict

SIZE = (140, 44)


async def instant(_: float) -> None:
    await asyncio.sleep(0)


def footer_actions(app: WorkbenchApp) -> set[str]:
    return {key.action for key in app.screen.query(FooterKey)}


def replay_app(tmp_path: Path, turns: int = 4, paused: bool = False) -> tuple[WorkbenchApp, ReplayDriver]:
    path = tui_synthetic.write(tmp_path / "s.jsonl", tui_synthetic.events(turns))
    driver = ReplayDriver(read_session(path), speed=100.0, sleep=instant, paused=paused)
    return WorkbenchApp.for_driver(driver, theme="textual-dark"), driver


def live_app(tmp_path: Path) -> tuple[WorkbenchApp, LiveDriver]:
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


class Synthetic:
    """An executor that judges at once, without nvcc: a compile error naming the build's file."""

    name = "synthetic"

    def __init__(self, refuse: str | None = None) -> None:
        self.refuse = refuse
        self.sources: list[str] = []
        self.asked = asyncio.Event()  # a refusal waits for it, as a host's answer takes a moment

    async def evaluate(self, request: EvalRequest, progress: ProgressCallback | None = None) -> EvalResult:
        if self.refuse is not None:
            await self.asked.wait()
            raise UserError(self.refuse)
        self.sources.append(request.source)
        return tui_synthetic.result(len(self.sources), "compile_error", request.source)

    async def close(self) -> None:
        pass


def author_app(tmp_path: Path, executor: Synthetic) -> tuple[WorkbenchApp, AuthorDriver, Path]:
    kernel = tmp_path / "mine.cu"
    kernel.write_text(tui_synthetic.kernel_source(1))
    driver = AuthorDriver(
        task=tui_synthetic.TASK,
        target="hopper",
        kernel=kernel,
        executor=executor,  # type: ignore[arg-type]
        out=tmp_path / "author.jsonl",
        debounce_ms=50,
    )
    return WorkbenchApp.for_driver(driver, theme="textual-dark"), driver, kernel


# --- 1, 11: author mode: a save that is not UTF-8, or empty, is no turn and no traceback --------------


async def test_a_save_that_is_not_utf8_or_empty_waits_for_the_next_save(tmp_path: Path) -> None:
    executor = Synthetic()
    app, driver, kernel = author_app(tmp_path, executor)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(executor.sources) == 1)
        kernel.write_bytes(b"// caf\xe9\n")  # a Latin-1 save mid-session
        await until(pilot, lambda: driver.problem is not None)
        assert driver.problem == "mine.cu: not UTF-8 text (byte 6); save it as UTF-8 to evaluate it"
        kernel.write_text("  \n")
        await until(pilot, lambda: driver.problem is not None and "empty" in driver.problem)
        assert driver.state == "error" and app.is_running
        kernel.write_text(tui_synthetic.kernel_source(2))
        await until(pilot, lambda: len(executor.sources) == 2)
        await until(pilot, lambda: driver.problem is None)
    events = read_session(tmp_path / "author.jsonl").events
    assert [e.turn for e in events if isinstance(e, Candidate)] == [1, 2]
    assert isinstance(events[-1], SessionEnd) and events[-1].reason == "stopped_by_person"
    assert events[0].settings["kernel"] == "mine.cu"  # type: ignore[union-attr]  # no host path


async def test_the_verdict_names_the_persons_file_not_the_builds(tmp_path: Path) -> None:
    app, _, _ = author_app(tmp_path, Synthetic())
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, SessionScreen)
        await until(pilot, lambda: 1 in screen.view.turns and screen.view.turn(1).evaluation is not None)
        await pilot.pause()
        console = Console(width=120, record=True)
        console.print(screen.query_one("#verdict-body", Static).content)
        shown = console.export_text()
        assert "mine.cu(4): error" in shown and "kernel.cu" not in shown


async def test_a_session_refused_before_any_verdict_is_not_kept(tmp_path: Path) -> None:
    executor = Synthetic(refuse="--executor ssh://gpu: no NVIDIA GPU on gpu")
    app, driver, _ = author_app(tmp_path, executor)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, SessionScreen) and driver.evaluating)
        executor.asked.set()
        await until(pilot, lambda: driver.failure is not None)
    assert driver.failure == "--executor ssh://gpu: no NVIDIA GPU on gpu"
    assert not (tmp_path / "author.jsonl").exists()  # no junk session for the home screen to list


# --- 2, 12: quitting asks while a run goes, however it is asked for; the palette is the workbench's --


@pytest.mark.parametrize("how", ["ctrl+q", "palette"])
async def test_every_way_to_quit_a_live_run_asks_first(tmp_path: Path, how: str) -> None:
    app, driver = live_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "paused")
        if how == "ctrl+q":
            await pilot.press("ctrl+q")
        else:
            await pilot.press("ctrl+p")
            await until(pilot, lambda: isinstance(app.screen, CommandPalette))
            await pilot.press(*"Quit")
            await pilot.pause()
            await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen))
        assert app.is_running and driver.end is None


async def test_the_palette_opens_on_the_workbenchs_own_commands(tmp_path: Path) -> None:
    app, driver = replay_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette))
        options = app.screen.query_one(OptionList)
        await until(pilot, lambda: options.option_count > 5)
        prompts = [
            str(options.get_option_at_index(i).prompt).split("\n")[0] for i in range(options.option_count)
        ]
        names = [prompt.split(" (")[0] for prompt in prompts]
        assert names[0] == "Seek back"  # the screen's actions first
        assert names[-2:] == ["Home", "Theme"]
        # Textual's own (no key named) are left out: the screen's help, zoom and screenshot say them.
        assert not {"Keys", "Maximize", "Minimize", "Screenshot"} & set(prompts)
        assert "Screenshot (S)" in prompts
        assert names.count("Quit") == 1 and "Quit (q)" in prompts


# --- 3: a maximised pane fits the terminal -------------------------------------------------------------


# The conversation and the timing table are drawn maximised at both widths in test_tui_snapshots; here
# each at one, and the code pane (no snapshot) at both.
@pytest.mark.parametrize(
    ("key", "pane", "columns"),
    [("c", "conversation", 180), ("t", "timing", 120), ("v", "code", 120), ("v", "code", 180)],
)
async def test_a_maximised_pane_is_as_wide_as_the_terminal(
    tmp_path: Path, columns: int, key: str, pane: str
) -> None:
    app, driver = replay_app(tmp_path)
    async with app.run_test(size=(columns, 40)) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        await pilot.press(key, "z")
        await pilot.pause()
        maximized = app.screen.maximized
        assert maximized is not None and maximized.id == pane
        assert maximized.outer_size.width == columns  # both borders on the screen


# --- 5: home: every Tab stop answers enter; the list follows the runs -----------------------------------


async def test_tab_on_home_stops_only_where_enter_opens_something(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    tui_synthetic.write(tmp_path / "one.jsonl", tui_synthetic.events(2))
    app = WorkbenchApp(lambda: HomeScreen([tmp_path]), theme="textual-dark")
    async with app.run_test(size=(180, 50)) as pilot:
        await until(pilot, lambda: app.screen.query_one("#sessions", DataTable).row_count == 1)
        stops = []
        for _ in range(4):
            stops.append(app.focused.id if app.focused else None)
            await pilot.press("tab")
        assert stops == ["filter", "tasks", "sessions", "filter"]  # not the task pane
        assert not app.screen.query_one("#task-pane").can_focus


async def test_the_sessions_list_shows_a_session_made_while_away(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    tui_synthetic.write(tmp_path / "one.jsonl", tui_synthetic.events(2))
    app = WorkbenchApp(lambda: HomeScreen([tmp_path]), theme="textual-dark")
    async with app.run_test(size=(180, 50)) as pilot:
        sessions = app.screen.query_one("#sessions", DataTable)
        await until(pilot, lambda: sessions.row_count == 1)
        sessions.focus()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen))
        tui_synthetic.write(tmp_path / "two.jsonl", tui_synthetic.events(1))  # a run made meanwhile
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))
        await until(pilot, lambda: sessions.row_count == 2)


@pytest.mark.parametrize("columns", [120, 180])
async def test_every_session_column_shows_whole(tmp_path: Path, columns: int) -> None:
    name = "mha_with_lse_d128_causal_fix_h200_with_a_long_name.jsonl"
    start, *rest = tui_synthetic.events(2)
    start = start.model_copy(update={"model": "scripted:references/scripts/mha_causal_fix.json"})
    tui_synthetic.write(tmp_path / name, [start, *rest])
    app = WorkbenchApp(lambda: HomeScreen([tmp_path]), theme="textual-dark")
    async with app.run_test(size=(columns, 40)) as pilot:
        sessions = app.screen.query_one("#sessions", DataTable)
        await until(pilot, lambda: sessions.row_count == 1)
        await pilot.pause()
        titles = [str(column.label) for column in sessions.columns.values()]
        assert titles == ["date", "task", "target", "model", "turns", "verdict", "best", "session"]
        assert sum(c.get_render_width(sessions) for c in sessions.columns.values()) <= sessions.size.width
        cells = [str(cell) for cell in sessions.get_row_at(0)]
        assert cells[3] == "scripted" and cells[-1].replace("\n", "") == name  # wrapped, never cut


# --- 6: replay: every key counts; keys that could change nothing leave; Esc goes home -------------------


async def test_seek_keys_pressed_in_a_row_each_move_a_turn(tmp_path: Path) -> None:
    app, driver = replay_app(tmp_path, turns=5, paused=True)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.player.position == 1)
        await pilot.press("greater_than_sign", "greater_than_sign", "greater_than_sign")
        assert driver.player.played_turn() == 3
        screen = app.screen
        assert isinstance(screen, SessionScreen)
        await until(pilot, lambda: screen.view.latest_turn == 3)


async def test_once_a_replay_ended_its_play_keys_leave_and_do_nothing(tmp_path: Path) -> None:
    app, driver = replay_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        # The footer settles after the state changes (bindings refresh on the next frames): wait for the
        # whole of it, so a busy machine cannot catch it half-way; `until` fails if it never gets there.
        await until(
            pilot,
            lambda: "fork" in footer_actions(app) and not {"toggle_pause", "faster"} & footer_actions(app),
        )
        await pilot.press("plus", "plus", "space")
        assert driver.speed == 100.0 and not driver.player.paused


@pytest.mark.parametrize("key", ["escape", "backspace"])
async def test_back_from_a_replay_the_app_opened_on_goes_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    monkeypatch.chdir(tmp_path)
    app, _ = replay_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "back" in footer_actions(app))
        await pilot.press(key)
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))
        assert app.is_running and len(app.screen_stack) == 1


async def test_home_from_a_live_run_asks_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    app, driver = live_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "paused")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))
        await until(pilot, lambda: driver.end is not None)


# --- 9: text: said once, never cut ---------------------------------------------------------------------


def static_only() -> EvalResult:
    """What the static executor gives: the GPU tiers not run, each saying so in its own message."""
    not_run = "not run: the static executor has no GPU"
    return EvalResult(
        task=tui_synthetic.TASK,
        target="hopper",
        executor="static",
        source_sha256="0" * 64,
        status=Status.static_missing_family,
        stages=Stages(
            build=tui_synthetic.result(2, "static", "x").stages.build,
            static=StaticStage(
                status=Status.static_missing_family, required_family="GMMA", message="GMMA missing"
            ),
            correctness={"status": "not_run", "message": not_run},  # type: ignore[arg-type]
            dynamic={"status": "not_run", "message": not_run},  # type: ignore[arg-type]
            timing={"status": "not_run", "message": not_run},  # type: ignore[arg-type]
        ),
    )


def test_a_tier_not_run_says_so_once() -> None:
    console = Console(width=120, record=True)
    console.print(render_verdict(static_only()))
    text = console.export_text()
    assert "not run not run" not in text
    assert text.count("not run the static executor has no GPU") == 3


@pytest.mark.parametrize("columns", [120, 180])
async def test_the_timing_table_cuts_no_verdict_and_no_header(tmp_path: Path, columns: int) -> None:
    session = tui_synthetic.events(
        3,
        kinds=["incorrect", "full", "full"],
        baselines=("cuDNN SDPA (torch sdpa)", "FlashInfer prefill (fa3)"),
    )
    path = tui_synthetic.write(tmp_path / "attention.jsonl", session)
    driver = ReplayDriver(read_session(path), speed=100.0, sleep=instant)
    app = WorkbenchApp.for_driver(driver, theme="textual-dark")
    async with app.run_test(size=(columns, 50)) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        await pilot.pause()
        table = app.screen.query_one(TimingPane).query_one(DataTable)
        titles = [str(column.label) for column in table.columns.values()]
        cells = [str(cell) for row in range(table.row_count) for cell in table.get_row_at(row)]
        assert not any("…" in text for text in titles + cells)
        assert " ".join(titles).replace("\n", " ").startswith("turn × cuDNN SDPA")
        assert "✘ incorrect_numerical" in [cell.replace("\n", "") for cell in cells]


# --- 13: a listing read in a worker that finishes after its screen went raises nothing ------------------


async def test_a_listing_ready_after_its_screen_went_is_let_go(tmp_path: Path) -> None:
    tui_synthetic.write(tmp_path / "one.jsonl", tui_synthetic.events(2))
    app = WorkbenchApp(lambda: HomeScreen([tmp_path]), theme="textual-dark")
    async with app.run_test(size=SIZE) as pilot:
        sessions = app.screen.query_one("#sessions", DataTable)
        await until(pilot, lambda: sessions.row_count == 1)
        sessions.focus()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen))
        screen = app.screen
        assert isinstance(screen, SessionScreen)
        await until(pilot, lambda: screen.driver.state == "ended")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen) and not screen.is_attached)

        async def read() -> None:  # a listing that took longer than the person stayed
            pass

        await screen._listing_job(read)  # what the worker does last: the screen's panes are gone
        assert app.is_running


@pytest.mark.parametrize("width", [80, 120, 180])
def test_the_headers_hint_keeps_only_whole_parts(width: int) -> None:
    view = SessionView.from_events(tui_synthetic.events(2))
    hint = "< rewinds a turn · [ ] browse turns · f forks at the shown turn"
    facts = HeaderFacts(state="ended", mode="replay", selected_turn=None, hint=hint)
    line = render_header(view, facts, width=width).plain.split("\n")[1]
    assert len(line) <= width
    shown = line.split("  — ")[1].split(" · ") if "  — " in line else []
    assert shown == hint.split(" · ")[: len(shown)]  # a prefix of the parts, each whole
    assert width < 180 or len(shown) == 3


# --- 10: j on a shipped session: its SASS mapped to CUDA lines by a rebuild proven the recorded one ----


# A cold nvcc build of the shipped kernel: minutes on two busy cores, so left to `-m slow`.
@pytest.mark.slow
@needs_nvcc
async def test_j_maps_a_shipped_sessions_sass_by_rebuilding_it_here(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTXWB_CACHE", str(session_cache(tmp_path_factory)))
    read = read_session(sessions_dir() / "gemm_n7168_k5120_ladder_h200.jsonl")
    assert all(
        e.listings is not None and e.listings.lines is None for e in read.events if isinstance(e, Evaluation)
    )
    driver = ReplayDriver(read, speed=1000.0, sleep=instant)
    app = WorkbenchApp.for_driver(driver, theme="textual-dark")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        await pilot.press(*["left_square_bracket"] * 3)  # turn 1, the SIMT kernel: the quickest build
        code = app.screen.query_one(CodePane)
        await pilot.press("j")
        # Rebuilt here, checked against the recorded cubin's hash, and its line table kept.
        await until(pilot, lambda: bool(code.document("sass").source_lines), limit=9000)
        sass = code.document("sass")
        assert any(sass.instructions_of(line) for line in range(1, len(code.document("cuda").lines) + 1))
