"""What the panes show, at the widths people use: nothing cut silently, nothing invented."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import tui_synthetic
from textual.widgets import Collapsible, DataTable, Label, Sparkline
from tui_pilot import until

from workbench.session.log import read_session
from workbench.tui.app import WorkbenchApp
from workbench.tui.drivers.replay import ReplayDriver
from workbench.tui.widgets.verdict import correctness_evidence

ATTENTION_BASELINES = ("cuDNN SDPA (torch sdpa)", "FlashInfer prefill (fa3)")


async def instant(_: float) -> None:
    await asyncio.sleep(0)


def replay(tmp_path: Path, **kwargs: object) -> tuple[WorkbenchApp, ReplayDriver]:
    path = tui_synthetic.write(tmp_path / "s.jsonl", tui_synthetic.events(**kwargs))  # type: ignore[arg-type]
    driver = ReplayDriver(read_session(path), speed=100.0, sleep=instant)
    return WorkbenchApp.for_driver(driver, theme="textual-dark"), driver


async def test_untimed_turns_draw_no_trend(tmp_path: Path) -> None:
    app, driver = replay(tmp_path, turns=3, kinds=["compile_error", "static", "static"])
    async with app.run_test(size=(140, 44)) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        await pilot.pause()
        assert not app.screen.query_one(Sparkline).display
        caption = app.screen.query_one("#trend-caption", Label)
        assert str(caption.render()) == "speedup trend: no timed turn yet"


@pytest.mark.parametrize("columns", [120, 140, 180])
async def test_the_timing_table_fits_its_pane_and_cuts_nothing(tmp_path: Path, columns: int) -> None:
    app, driver = replay(
        tmp_path, turns=3, kinds=["incorrect", "full", "full"], baselines=ATTENTION_BASELINES
    )
    async with app.run_test(size=(columns, 50)) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        await pilot.pause()
        table = app.screen.query_one("#timing-table", DataTable)
        assert table.virtual_size.width <= table.scrollable_content_region.width  # no column past the edge
        labels = [str(c.label).replace("\n", " ") for c in table.columns.values()]
        assert labels[:2] == ["turn", "× cuDNN SDPA"]  # wrapped between words where narrow, never cut
        verdict = str(table.get_row_at(0)[labels.index("verdict")])
        assert verdict.replace("\n", "") == "✘ incorrect_numerical" and "…" not in verdict
        caption = app.screen.query_one("#trend-caption", Label)
        assert str(caption.render()) == "speedup 0.60× → 0.65×\nbest 0.65× at turn 3"
        assert caption.size.height == 2  # both lines shown whole


async def test_a_collapsed_message_keeps_its_line_count_in_a_narrow_pane(tmp_path: Path) -> None:
    session = tui_synthetic.events(turns=1)
    long = (
        "You are writing a kernel for a task with a very long first line that goes on and on\n" + "x\n" * 200
    )
    session[1] = session[1].model_copy(update={"content": long})
    path = tui_synthetic.write(tmp_path / "s.jsonl", session)
    driver = ReplayDriver(read_session(path), speed=100.0, sleep=instant)
    app = WorkbenchApp.for_driver(driver, theme="textual-dark")
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        [folded] = app.screen.query(Collapsible)
        assert folded.title.startswith("202 lines · You are writing")


def test_the_correctness_line_gives_each_output_its_own_numbers() -> None:
    result = tui_synthetic.result(1, "incorrect", tui_synthetic.kernel_source(1))
    lines = correctness_evidence(result).splitlines()
    assert lines[0] == "0/3 trials"
    assert lines[1] == "O: max abs err 0.5 · rel 5.32e+04 · matched 99.10%"
    assert lines[2] == "LSE: max abs err 11.5 · rel 0.4 · matched 8.39%"
