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
from textual.widgets import DataTable, Input, Select, Static
from tui_pilot import until

from workbench.agent.config import AgentConfig
from workbench.evaluate.gpu.toolchain import find_tool
from workbench.session.log import read_session
from workbench.tasks import Catalogue, resolve_task
from workbench.tui.app import WorkbenchApp
from workbench.tui.drivers.live import LiveDriver
from workbench.tui.drivers.replay import ReplayDriver
from workbench.tui.replay import MAX_SPEED, MIN_SPEED
from workbench.tui.screens.home import HomeScreen
from workbench.tui.screens.run_form import StartRunScreen
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


async def test_home_lists_sessions_and_replays_one(tmp_path: Path) -> None:
    tui_synthetic.write(tmp_path / "one.jsonl", tui_synthetic.events(2))
    app = WorkbenchApp(lambda: HomeScreen([tmp_path]), theme="textual-dark")
    async with app.run_test(size=(140, 40)) as pilot:
        sessions = app.screen.query_one("#sessions", DataTable)
        await until(pilot, lambda: sessions.row_count == 1)
        assert app.screen.query_one("#tasks", DataTable).row_count == len(Catalogue.load().tasks)
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
        form = await open_run_form(app, pilot, "gemm_n7168_k5120")
        form.query_one("#model", Input).value = f"scripted:{script}"
        form.query_one("#turns", Input).value = "1"
        await start_and_finish(app, pilot, "a")
    assert len(list((tmp_path / "runs").glob("gemm_n7168_k5120_hopper_*.jsonl"))) == 1


async def open_run_form(app: WorkbenchApp, pilot: Pilot[None], task: str) -> StartRunScreen:
    tasks = app.screen.query_one("#tasks", DataTable)
    tasks.focus()
    tasks.move_cursor(row=tasks.get_row_index(task))
    await pilot.press("enter")
    assert isinstance(app.screen, StartRunScreen)
    return app.screen


async def start_and_finish(app: WorkbenchApp, pilot: Pilot[None], key: str) -> None:
    """Start the filled form's run, wait for it to pause before turn 1 (step pace), press `key`
    (approve, or stop), and wait for the session to end."""
    await pilot.click("#start")
    await until(pilot, lambda: isinstance(app.screen, SessionScreen))
    driver = app.screen.driver
    assert isinstance(driver, LiveDriver)
    await until(pilot, lambda: driver.state == "paused")
    await pilot.press(key)
    await until(pilot, lambda: driver.end is not None)


async def test_run_form_records_workload_pack_and_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    script = write_script(tmp_path / "script.json", [answer(broken_kernel())])
    task = resolve_task("mha_with_lse_d128_causal")
    other = next(w.uuid for w in task.workloads if w.uuid != task.workload().uuid)
    app = WorkbenchApp(lambda: HomeScreen([tmp_path / "runs"]), theme="textual-dark")
    async with app.run_test(size=(140, 44)) as pilot:
        form = await open_run_form(app, pilot, task.name)
        # The defaults are `ptxwb run`'s: the headline workload, the pack without a variant, 8 turns.
        assert form.query_one("#workload", Select).value == task.workload().uuid
        assert form.config() == AgentConfig(workload=task.workload().uuid)
        form.query_one("#model", Input).value = f"scripted:{script}"
        form.query_one("#workload", Select).value = other
        form.query_one("#pack", Select).value = (True, "fa3_forward")
        for field, value in [("turns", "2"), ("cost_limit_usd", "0.5"), ("wall_limit_s", "600")]:
            form.query_one(f"#{field}", Input).value = value
        form.query_one("#target_speedup", Input).value = "1.25"
        await start_and_finish(app, pilot, "X")
    (path,) = (tmp_path / "runs").glob(f"{task.name}_hopper_*.jsonl")
    start = read_session(path).start
    assert start.pack_id is not None and start.pack_id.startswith("hopper+fa3_forward@")
    assert {k: start.settings[k] for k in ("workload", "pack", "pack_variant")} == {
        "workload": other,
        "pack": True,
        "pack_variant": "fa3_forward",
    }
    assert (start.settings["turns"], start.settings["cost_limit_usd"]) == (2, 0.5)
    assert (start.settings["wall_limit_s"], start.settings["target_speedup"]) == (600.0, 1.25)


async def test_run_form_offers_the_chosen_targets_pack_variants(tmp_path: Path) -> None:
    app = WorkbenchApp(lambda: HomeScreen([tmp_path]), theme="textual-dark")
    async with app.run_test(size=(140, 44)) as pilot:
        form = await open_run_form(app, pilot, "gemm_n7168_k5120")
        pack = form.query_one("#pack", Select)
        pack.value = (True, "fa3_forward")
        form.query_one("#target", Select).value = "blackwell"
        await pilot.pause()
        # Blackwell's pack has no fa3_forward: the pack stays on, without the variant.
        assert pack.value == (True, None)
        pack.value = (True, "fa4_forward")
        assert form.config().pack_variant == "fa4_forward"


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("turns", "0", "bad setting turns: Input should be greater than or equal to 1"),
        ("cost_limit_usd", "-1", "bad setting cost_limit_usd: Input should be greater than 0"),
        ("wall_limit_s", "soon", "bad setting wall_limit_s: Input should be a valid number"),
        ("target_speedup", "0", "bad setting target_speedup: Input should be greater than 0"),
        ("executor", "cloud", "unknown executor 'cloud'"),
    ],
)
async def test_run_form_refuses_a_bad_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, value: str, words: str
) -> None:
    monkeypatch.chdir(tmp_path)
    script = write_script(tmp_path / "script.json", [answer(broken_kernel())])
    app = WorkbenchApp(lambda: HomeScreen([tmp_path / "runs"]), theme="textual-dark")
    async with app.run_test(size=(140, 44)) as pilot:
        form = await open_run_form(app, pilot, "gemm_n7168_k5120")
        form.query_one("#model", Input).value = f"scripted:{script}"
        form.query_one(f"#{field}", Input).value = value
        await pilot.click("#start")
        await pilot.pause()
        assert app.screen is form  # the form stays, with one message saying what is wrong
        error = form.query_one("#error", Static)
        assert error.display and str(error.render()).startswith(words)
    assert not (tmp_path / "runs").exists()


async def test_run_form_says_when_the_session_file_cannot_be_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").write_text("a file where the runs folder would go\n")
    script = write_script(tmp_path / "script.json", [answer(broken_kernel())])
    app = WorkbenchApp(lambda: HomeScreen([tmp_path / "runs"]), theme="textual-dark")
    async with app.run_test(size=(140, 44)) as pilot:
        form = await open_run_form(app, pilot, "gemm_n7168_k5120")
        form.query_one("#model", Input).value = f"scripted:{script}"
        await pilot.click("#start")
        await pilot.pause()
        assert app.screen is form  # nothing started: the form says why
        assert "cannot create its folder" in str(form.query_one("#error", Static).render())
    assert (tmp_path / "runs").read_text() == "a file where the runs folder would go\n"


async def test_run_form_refuses_a_model_whose_key_is_not_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    app = WorkbenchApp(lambda: HomeScreen([tmp_path / "runs"]), theme="textual-dark")
    async with app.run_test(size=(140, 44)) as pilot:
        form = await open_run_form(app, pilot, "gemm_n7168_k5120")
        form.query_one("#model", Input).value = "openai/test-model"
        await pilot.click("#start")
        await pilot.pause()
        assert app.screen is form
        error = str(form.query_one("#error", Static).render())
        assert error == "no credentials for openai/test-model: OPENAI_API_KEY not set in the environment"
    assert not (tmp_path / "runs").exists()
