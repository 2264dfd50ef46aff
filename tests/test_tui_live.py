"""The live loop in the TUI: the app is the loop's approver. Scripted model, real static executor."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_support import answer, broken_kernel, simt_kernel, wgmma_kernel, write_script
from build_support import session_cache
from tui_pilot import until

from workbench.agent.config import AgentConfig
from workbench.agent.loop import MiniPTXAgent
from workbench.agent.models import make_model
from workbench.agent.models.recorded import ScriptedModel
from workbench.evaluate.executors import make_executor
from workbench.evaluate.gpu.toolchain import find_tool
from workbench.evaluate.result import Status
from workbench.session.events import Candidate, Control, Evaluation, Message
from workbench.session.log import read_session
from workbench.tui.app import WorkbenchApp
from workbench.tui.drivers.live import LiveDriver, Pace, TuiHuman
from workbench.tui.screens.dialogs import EditorScreen, PromptScreen
from workbench.tui.screens.session import SessionScreen
from workbench.tui.widgets.code_pane import CodePane
from workbench.tui.widgets.cuda_editor import CudaEditor

pytestmark = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")
SIZE = (140, 44)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_cache(tmp_path_factory)  # the agent tests' cache: each kernel compiles once a run


def make(
    tmp_path: Path, cache: Path, answers: list[str], pace: Pace, turns: int | None = None
) -> tuple[WorkbenchApp, LiveDriver]:
    script = write_script(tmp_path / "script.json", answers)
    agent = MiniPTXAgent(
        task="gemm_n7168_k5120",
        target="hopper",
        model=ScriptedModel(script),
        executor=make_executor("static", cache),
        out=tmp_path / "live.jsonl",
        config=AgentConfig(turns=turns or len(answers), pack=False),
    )
    driver = LiveDriver(agent, pace=pace)
    return WorkbenchApp.for_driver(driver, theme="textual-dark"), driver


def events(tmp_path: Path) -> list[object]:
    return read_session(tmp_path / "live.jsonl").events


async def test_auto_runs_every_turn_and_shows_the_verdicts(tmp_path: Path, cache: Path) -> None:
    answers = [answer(broken_kernel()), answer(simt_kernel(), tag="cu"), answer(wgmma_kernel())]
    app, driver = make(tmp_path, cache, answers, "auto")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.end is not None)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, SessionScreen)
        statuses = [screen.view.turn(n).evaluation.status for n in (1, 2, 3)]  # type: ignore[union-attr]
        # The static executor runs two tiers: a pass there leaves the verdict `not_run`, never `passed`.
        assert statuses == [Status.compile_error, Status.static_missing_family, Status.not_run]
        assert screen.view.turn(3).evaluation.stages.static.status == Status.passed  # type: ignore[union-attr]
        # The passing turn's SASS is the static tier's real listing, with the GMMA lines marked.
        code = screen.query_one(CodePane)
        await until(pilot, lambda: code.document("sass").family_counts()["GMMA"] >= 1)
        await until(pilot, lambda: bool(code.document("ptx").lines))
    assert [e.result.status for e in events(tmp_path) if isinstance(e, Evaluation)] == statuses


async def test_step_waits_before_the_turn_and_before_the_evaluation(tmp_path: Path, cache: Path) -> None:
    app, driver = make(tmp_path, cache, [answer(broken_kernel()), answer(broken_kernel())], "step")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "paused")
        assert not [e for e in events(tmp_path) if isinstance(e, Message) and e.role == "assistant"]
        await pilot.press("s")
        await until(pilot, lambda: driver.state == "awaiting approval")
        assert driver.approver.source is not None and "no_such_identifier" in driver.approver.source
        # The candidate under review is in the code pane before it is run.
        shown = app.screen.query_one(CodePane).document("cuda").lines
        assert any("no_such_identifier" in line for line in shown)
        await pilot.press("r")
        await until(
            pilot,
            lambda: (
                driver.state == "paused" and 1 in app.screen.view.turns and app.screen.view.turn(1).evaluation
            ),
        )
        await pilot.press("a")
        await until(pilot, lambda: driver.end is not None)
    controls = [(e.turn, e.action, e.by) for e in events(tmp_path) if isinstance(e, Control)]
    assert (1, "step", "human") in controls and (1, "run", "human") in controls
    assert any(action == "auto" for _, action, _ in controls)


async def test_edit_before_run_records_both_sources(tmp_path: Path, cache: Path) -> None:
    app, driver = make(tmp_path, cache, [answer(broken_kernel())], "step")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "paused")
        await pilot.press("s")
        await until(pilot, lambda: driver.state == "awaiting approval")
        await pilot.press("e")
        assert isinstance(app.screen, EditorScreen)
        editor = app.screen.query_one(CudaEditor)
        assert editor._highlights, "the editor highlights CUDA"
        editor.text = simt_kernel()
        await pilot.press("ctrl+s")
        await until(pilot, lambda: driver.end is not None)
    candidate = next(e for e in events(tmp_path) if isinstance(e, Candidate))
    assert candidate.origin == "edited" and candidate.source == simt_kernel()
    assert candidate.original is not None and "no_such_identifier" in candidate.original
    evaluation = next(e for e in events(tmp_path) if isinstance(e, Evaluation))
    assert evaluation.result.status == Status.static_missing_family  # the edit compiled; the model's did not


@pytest.mark.slow
async def test_override_with_a_file_and_skip(tmp_path: Path, cache: Path) -> None:
    mine = tmp_path / "mine.cu"
    mine.write_text(broken_kernel())
    app, driver = make(tmp_path, cache, [answer(simt_kernel()), answer(simt_kernel())], "step")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "paused")
        await pilot.press("s")
        await until(pilot, lambda: driver.state == "awaiting approval")
        await pilot.press("o")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press(*str(mine), "enter")
        await until(
            pilot, lambda: driver.state == "paused" and app.screen.view.turn(1).evaluation is not None
        )
        await pilot.press("s")
        await until(pilot, lambda: driver.state == "awaiting approval")
        await pilot.press("k")
        await until(pilot, lambda: driver.end is not None)
    all_events = events(tmp_path)
    candidates = [e for e in all_events if isinstance(e, Candidate)]
    assert [(c.turn, c.origin) for c in candidates] == [(1, "override")]
    assert candidates[0].source == broken_kernel()
    assert any(isinstance(e, Control) and e.action == "skip" and e.turn == 2 for e in all_events)


async def test_message_then_stop_at_the_review(tmp_path: Path, cache: Path) -> None:
    app, driver = make(tmp_path, cache, [answer(broken_kernel())] * 2, "step")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "paused")
        await pilot.press("m")
        await pilot.press(*"use wgmma", "enter")
        await pilot.press("s")
        await until(pilot, lambda: driver.state == "awaiting approval")
        await pilot.press("X")
        await until(pilot, lambda: driver.end is not None)
        assert driver.end.reason == "stopped_by_person"  # type: ignore[union-attr]
    all_events = events(tmp_path)
    person = [e for e in all_events if isinstance(e, Message) and e.source == "human"]
    assert [(m.turn, m.content) for m in person] == [(1, "use wgmma")]
    assert not [e for e in all_events if isinstance(e, Candidate)]


def human_app(tmp_path: Path, cache: Path, pace: Pace) -> tuple[WorkbenchApp, LiveDriver]:
    human = TuiHuman()
    agent = MiniPTXAgent(
        task="gemm_n7168_k5120",
        target="hopper",
        model=make_model("human", human=human),
        executor=make_executor("static", cache),
        out=tmp_path / "live.jsonl",
        config=AgentConfig(turns=1, pack=False),
    )
    driver = LiveDriver(agent, pace=pace, human=human)
    return WorkbenchApp.for_driver(driver, theme="textual-dark"), driver


async def test_pause_in_auto_waits_at_the_next_step(tmp_path: Path, cache: Path) -> None:
    app, driver = human_app(tmp_path, cache, "auto")
    async with app.run_test(size=SIZE) as pilot:
        await until(
            pilot, lambda: isinstance(app.screen, EditorScreen) and bool(app.screen.query(CudaEditor))
        )
        await pilot.press("escape")  # not yet: the loop keeps waiting for the person's answer
        assert driver.state == "your turn"
        await pilot.press("space")
        assert driver.approver.pace == "step"
        await pilot.press("e")
        assert isinstance(app.screen, EditorScreen)
        app.screen.query_one(CudaEditor).text = broken_kernel()
        await pilot.press("ctrl+s")
        # Paused: the candidate waits for the person instead of running.
        await until(pilot, lambda: driver.state == "awaiting approval")
        await pilot.press("r")
        await until(pilot, lambda: driver.end is not None)
    controls = [e.action for e in events(tmp_path) if isinstance(e, Control)]
    assert "pause" in controls and "run" in controls


async def test_human_model_writes_in_the_editor(tmp_path: Path, cache: Path) -> None:
    app, driver = human_app(tmp_path, cache, "auto")
    async with app.run_test(size=SIZE) as pilot:
        await until(
            pilot, lambda: isinstance(app.screen, EditorScreen) and bool(app.screen.query(CudaEditor))
        )
        assert driver.state == "your turn"
        # The task's own signature, not an unrelated example.
        assert (
            "void run(tvm::ffi::TensorView A,\n         tvm::ffi::TensorView B,"
            in app.screen.query_one(CudaEditor).text
        )
        app.screen.query_one(CudaEditor).text = broken_kernel()
        await pilot.press("ctrl+s")
        await until(pilot, lambda: driver.end is not None)
    candidate = next(e for e in events(tmp_path) if isinstance(e, Candidate))
    assert candidate.source.strip() == broken_kernel().strip()


async def test_fork_continues_from_the_selected_turn(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the fork's file goes into ./runs
    answers = [answer(broken_kernel()), answer(simt_kernel()), answer(wgmma_kernel()), "a fourth answer"]
    app, driver = make(tmp_path, cache, answers, "auto", turns=3)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.end is not None)
        await pilot.press("left_square_bracket", "left_square_bracket", "f")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.driver is not driver)
        forked = app.screen.driver
        assert isinstance(forked, LiveDriver)
        await until(pilot, lambda: forked.state == "paused")  # the fork waits before its turn 2
        await pilot.press("a")
        await until(pilot, lambda: forked.end is not None)
    child = read_session(tmp_path / "runs" / "live-fork-t1.jsonl")
    assert (
        child.start.fork_turn == 1
        and child.start.parent_session == read_session(tmp_path / "live.jsonl").start.session_id
    )
    candidates = [e for e in child.events if isinstance(e, Candidate)]
    assert [c.turn for c in candidates] == [1, 2, 3]
    # The script goes on from turn 1: its second and third answers, not the fourth (the parent used three).
    assert [c.source for c in candidates[1:]] == [simt_kernel(), wgmma_kernel()]
