"""The sweep screen over a finished scripted sweep, driven with Textual's pilot: grid → cell → replay."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_support import sweep_scripted
from build_support import session_cache
from textual.widgets import DataTable, Static
from tui_pilot import until

from workbench.tui.app import WorkbenchApp
from workbench.tui.screens.session import SessionScreen
from workbench.tui.screens.sweep import CellScreen, SweepScreen

pytestmark = pytest.mark.nvcc


def cells(table: DataTable[object]) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_grid_opens_a_cell_then_a_replay(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    folder, _ = await sweep_scripted(tmp_path, session_cache(tmp_path_factory))
    app = WorkbenchApp(lambda: SweepScreen(folder))
    async with app.run_test(size=(160, 40)) as pilot:
        grid = app.screen.query_one(DataTable)
        await until(pilot, lambda: grid.row_count == 2)
        rows = cells(grid)
        # model, target, task, variant, done, running, correct, SASS, static, best: a static sweep at
        # T = 2 measures no correctness (its turns 2 built and never ran), only the static tier.
        assert [r[4:] for r in rows] == [
            ["2/2", "0", "n/a", "n/a", "0/2", "–"],
            ["2/2", "0", "n/a", "n/a", "2/2", "–"],
        ]
        assert rows[1][0].endswith("fixes.json") and rows[1][3] == "no-pack"
        assert "4/4 trajectories done" in str(app.screen.query_one("#title", Static).render())
        grid.move_cursor(row=1)
        await pilot.press("enter")
        await until(
            pilot,
            lambda: isinstance(app.screen, CellScreen) and app.screen.query_one(DataTable).row_count == 2,
        )
        trajectories = cells(app.screen.query_one(DataTable))
        assert trajectories == [
            ["t000", "finished", "turn_limit", "static_missing_family not_run", "–"],
            ["t001", "finished", "turn_limit", "static_missing_family not_run", "–"],
        ]
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen))
        assert app.screen.driver.session_path.name.endswith("t000.jsonl")  # type: ignore[union-attr]
        await pilot.press("escape")
