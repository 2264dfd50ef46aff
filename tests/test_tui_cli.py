"""The TUI commands' user errors (one line, exit 2) and the home screen (tasks, sessions, start a run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tui_synthetic
from agent_support import answer, broken_kernel, write_script
from textual.pilot import Pilot
from textual.widgets import DataTable, Input

from workbench.evaluate.toolchain import find_tool
from workbench.tui.app import WorkbenchApp
from workbench.tui.drivers.live import LiveDriver
from workbench.tui.drivers.replay import ReplayDriver
from workbench.tui.replay import MAX_SPEED, MIN_SPEED
from workbench.tui.screens.home import HomeScreen, StartRunScreen
from workbench.tui.screens.session import SessionScreen

PTXWB = Path(sys.executable).parent / "ptxwb"


def ptxwb(*args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({"PTXWB_HOME": str(home)} if home else {})}
    return subprocess.run(
        [str(PTXWB), *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )


def one_line_error(done: subprocess.CompletedProcess[str], words: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_demo_without_sessions_says_so(tmp_path: Path) -> None:
    (tmp_path / "sessions").mkdir()
    one_line_error(ptxwb("demo", home=tmp_path), "no session to replay in")


def test_replay_errors(tmp_path: Path) -> None:
    one_line_error(ptxwb("replay", str(tmp_path / "nope.jsonl")), "no such file")
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"type": "message"}\n{"x": 1}\n')
    one_line_error(ptxwb("replay", str(junk)), "not a session event")
    good = tui_synthetic.write(tmp_path / "good.jsonl", tui_synthetic.events(1))
    one_line_error(ptxwb("replay", str(good), "--speed", "0"), "--speed")


@pytest.mark.parametrize(
    ("command", "speed"),
    [("replay", MIN_SPEED / 2), ("replay", MAX_SPEED * 2), ("demo", MIN_SPEED / 2)],
)
def test_speed_out_of_the_keys_range_is_refused(tmp_path: Path, command: str, speed: float) -> None:
    # The range named is the one the speed keys clamp to.
    args = (
        [str(tui_synthetic.write(tmp_path / "good.jsonl", tui_synthetic.events(1)))]
        if command == "replay"
        else []
    )
    one_line_error(
        ptxwb(command, *args, "--speed", f"{speed:g}"),
        f"--speed must be from {MIN_SPEED:g} to {MAX_SPEED:g} (got {speed:g})",
    )


def test_author_errors(tmp_path: Path) -> None:
    one_line_error(
        ptxwb("author", str(tmp_path / "missing.cu"), "--task", "gemm_n7168_k5120"), "no such file"
    )
    kernel = tmp_path / "k.cu"
    kernel.write_text(broken_kernel())
    one_line_error(ptxwb("author", str(kernel), "--task", "no_such_task"), "unknown task")
    one_line_error(
        ptxwb("author", str(kernel), "--task", "gemm_n7168_k5120", "--target", "ampere"), "unknown target"
    )
    one_line_error(
        ptxwb("author", str(kernel), "--task", "gemm_n7168_k5120", "--executor", "cloud"), "unknown executor"
    )


async def until(pilot: Pilot[None], condition, limit: int = 2400) -> None:  # type: ignore[no-untyped-def]
    for _ in range(limit):
        if condition():
            return
        await pilot.pause(0.05)
    raise AssertionError("the app never got there")


async def test_home_lists_sessions_and_replays_one(tmp_path: Path) -> None:
    tui_synthetic.write(tmp_path / "one.jsonl", tui_synthetic.events(2))
    app = WorkbenchApp(lambda: HomeScreen([tmp_path]), theme="textual-dark")
    async with app.run_test(size=(140, 40)) as pilot:
        sessions = app.screen.query_one("#sessions", DataTable)
        await until(pilot, lambda: sessions.row_count == 1)
        assert app.screen.query_one("#tasks", DataTable).row_count == 31
        sessions.focus()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen))
        assert isinstance(app.screen.driver, ReplayDriver)


@pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")
async def test_home_starts_a_live_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    script = write_script(tmp_path / "script.json", [answer(broken_kernel())])
    app = WorkbenchApp(lambda: HomeScreen([tmp_path / "runs"]), theme="textual-dark")
    async with app.run_test(size=(140, 44)) as pilot:
        tasks = app.screen.query_one("#tasks", DataTable)
        tasks.focus()
        tasks.move_cursor(row=tasks.get_row_index("gemm_n7168_k5120"))
        await pilot.press("enter")
        assert isinstance(app.screen, StartRunScreen)
        app.screen.query_one("#model", Input).value = f"scripted:{script}"
        app.screen.query_one("#turns", Input).value = "1"
        await pilot.click("#start")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen))
        driver = app.screen.driver
        assert isinstance(driver, LiveDriver)
        await until(pilot, lambda: driver.state == "paused")  # step pace: waits before turn 1
        await pilot.press("a")
        await until(pilot, lambda: driver.end is not None)
    assert len(list((tmp_path / "runs").glob("gemm_n7168_k5120_hopper_*.jsonl"))) == 1
