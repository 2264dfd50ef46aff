"""The home screen as a person meets it: type to filter, read the task, enter to run, the runs so far."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tui_synthetic
from textual.widgets import DataTable, Input, Static
from tui_pilot import until

from workbench.session.log import read_session
from workbench.tasks import Catalogue
from workbench.tui.app import WorkbenchApp
from workbench.tui.drivers.live import LiveDriver
from workbench.tui.screens.dialogs import ConfirmScreen
from workbench.tui.screens.home import HomeScreen
from workbench.tui.screens.run_form import StartRunScreen
from workbench.tui.screens.session import SessionScreen

SIZE = (180, 50)


def rows(table: DataTable[object]) -> list[list[str]]:
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def test_type_to_filter_read_the_task_and_enter_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["no code in this answer"] * 2))
    app = WorkbenchApp(lambda: HomeScreen([tmp_path / "runs"]), theme="textual-dark")
    async with app.run_test(size=SIZE) as pilot:
        tasks = app.screen.query_one("#tasks", DataTable)
        await until(pilot, lambda: tasks.row_count == len(Catalogue.load().tasks))
        assert isinstance(app.focused, Input)  # typing shows at once, no Tab first
        await pilot.press(*"causal d128")
        names = [row[0] for row in rows(tasks)]
        assert {"mha_bwd_d128_causal", "mha_with_lse_d128_causal"} <= set(names)
        assert all("causal" in name and "d128" in name for name in names)
        for _ in range(names.index("mha_with_lse_d128_causal")):
            await pilot.press("down")
        facts = str(app.screen.query_one("#task-facts", Static).render())
        assert "mha_with_lse_d128_causal" in facts and "baseline cuDNN SDPA" in facts
        assert "FLOPs" in facts and "speed of light  H100" in facts and "O[B, H, S, D] bfloat16" in facts
        await pilot.press("enter")
        assert (
            isinstance(app.screen, StartRunScreen) and app.screen.run_task.name == "mha_with_lse_d128_causal"
        )
        model = app.screen.query_one("#model", Input)
        assert app.focused is model  # the form opens focused too
        model.value = ""
        await pilot.press(*f"scripted:{script}")
        app.screen.query_one("#turns", Input).value = "2"
        await pilot.press("enter")  # enter submits the form
        await until(pilot, lambda: isinstance(app.screen, SessionScreen))
        driver = app.screen.driver
        assert isinstance(driver, LiveDriver)
        await until(pilot, lambda: driver.state == "paused")
        await pilot.press("escape")  # back home: the run is going, so it asks
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))
    [session] = (tmp_path / "runs").glob("*.jsonl")
    assert read_session(session).events[-1].type == "session_end"


async def test_recent_sessions_show_date_verdict_and_best_speedup(tmp_path: Path) -> None:
    tui_synthetic.write(tmp_path / "one.jsonl", tui_synthetic.events(3))
    app = WorkbenchApp(lambda: HomeScreen([tmp_path]), theme="textual-dark")
    async with app.run_test(size=SIZE) as pilot:
        sessions = app.screen.query_one("#sessions", DataTable)
        await until(pilot, lambda: sessions.row_count == 1)
        [row] = rows(sessions)
        date, task, target, model, turns, verdict, best, name = row
        assert date.startswith("2025-10-") and task == tui_synthetic.TASK and turns == "3"
        assert (target, model) == ("hopper", "synthetic-test-data")
        assert verdict == "passed" and best == "0.65×" and name == "one.jsonl"
