"""Executed counts beside the SASS: a turn profiled with source counters shows each instruction's counts in
the gutter and the selected line's in the pane's summary; a turn without them looks as before."""

from __future__ import annotations

import asyncio
from pathlib import Path

import tui_synthetic
from source_page_support import invented_counts, listing_kernels, stored_counts
from textual.widgets import Label
from tui_pilot import until

from workbench.evaluate.result import InstructionCounts
from workbench.session.log import read_session
from workbench.tui.app import WorkbenchApp
from workbench.tui.drivers.replay import ReplayDriver
from workbench.tui.widgets.code_pane import CodePane
from workbench.tui.widgets.code_view import TAG_WIDTH, CodeView, short_count

SASS = Path(__file__).parent / "data" / "tui" / "families_probe.sm_90a.sass"
KERNEL = "_Z14families_probePfmm"


def probe_counts() -> dict[str, list[InstructionCounts]]:
    return stored_counts(SASS.read_text())


async def instant(_: float) -> None:
    await asyncio.sleep(0)


def app_for(
    tmp_path: Path, counts: dict[str, list[InstructionCounts]] | None
) -> tuple[WorkbenchApp, ReplayDriver]:
    events = tui_synthetic.events(2, sass=SASS, counts=counts)
    path = tui_synthetic.write(tmp_path / "s.jsonl", events)
    driver = ReplayDriver(read_session(path), speed=100.0, sleep=instant)
    return WorkbenchApp.for_driver(driver, theme="textual-dark"), driver


def shown(view: CodeView, line: int) -> str:
    """What the view draws for listing line `line` (it must be on screen)."""
    return view.render_line(line - view.scroll_offset.y).text


async def test_counts_show_beside_each_sass_line_and_the_selected_lines_in_the_summary(
    tmp_path: Path,
) -> None:
    app, driver = app_for(tmp_path, probe_counts())
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        code = app.screen.query_one(CodePane)
        await pilot.press("3")
        view = code.view("sass")
        await until(pilot, lambda: bool(view.document.executed))
        document = view.document
        instructions = listing_kernels(SASS.read_text())[KERNEL]
        assert len(document.executed) == len(instructions)  # every instruction line has its counts
        assert code.border_subtitle == "executed: warp instructions · threads on"  # all placed
        await pilot.press("n")  # the first marked line
        line = view.cursor_line
        assert line is not None
        counts = document.executed[line]
        index = next(
            i for i, (offset, _) in enumerate(instructions) if f"/*{offset:04x}*/" in document.lines[line]
        )
        executed, threads, predicated_on = invented_counts(index, instructions[index][1])
        assert (counts.executed, counts.threads, counts.predicated_on) == (executed, threads, predicated_on)
        text = shown(view, line)
        assert f"{short_count(executed)} {short_count(predicated_on)}" in text
        assert text.index(short_count(executed)) < text.index(counts.opcode)  # in the gutter, before the code
        summary = str(app.screen.query_one("#summary-sass", Label).render())
        said = f"SASS line {line + 1}: {executed:,}× · {predicated_on:,}/{threads:,} threads on"
        assert said in summary  # a predicated instruction: some threads had it off
        header = next(i for i, text in enumerate(document.lines) if "Function" in text)
        assert header not in document.executed
        view.goto_line(header)  # no instruction here: the listing's summary again
        await pilot.pause()
        assert str(app.screen.query_one("#summary-sass", Label).render()).startswith("SASS · ")
        await pilot.press("1")  # the legend belongs to the SASS tab
        assert code.border_subtitle == ""


async def test_without_a_profile_nothing_changes(tmp_path: Path) -> None:
    app, driver = app_for(tmp_path, None)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        code = app.screen.query_one(CodePane)
        await pilot.press("3")
        view = code.view("sass")
        await until(pilot, lambda: bool(view.document.lines))
        assert view.document.executed == {}
        summary = str(app.screen.query_one("#summary-sass", Label).render())
        assert "executed" not in summary
        await pilot.press("n")
        line = view.cursor_line
        assert line is not None
        # The gutter is the line number and the family tag only: the code starts where it always did.
        assert view._gutter_width() == view._number_width() + TAG_WIDTH
        text = shown(view, line)
        assert text[view._gutter_width() :].startswith("  /*")
        assert "SASS line" not in str(app.screen.query_one("#summary-sass", Label).render())
        assert code.border_subtitle == ""
