"""Snapshots of the key screens (pytest-textual-snapshot; Textual is pinned exactly).

The session is the synthetic test session replayed instantly; its SASS is the probe kernel's real
cuobjdump listing kept under tests/data/tui. Nothing on these screens reads the wall clock.
Regenerate after an intended change with `pytest tests/test_tui_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import tui_synthetic
from source_page_support import stored_counts
from textual.pilot import Pilot

from workbench.session.log import read_session
from workbench.tui.app import WorkbenchApp
from workbench.tui.drivers.replay import ReplayDriver

DATA = Path(__file__).resolve().parent / "data" / "tui"


async def instant(_: float) -> None:
    await asyncio.sleep(0)


@pytest.fixture
def app(tmp_path: Path) -> tuple[WorkbenchApp, ReplayDriver]:
    session = tui_synthetic.events(4, sass=DATA / "families_probe.sm_90a.sass")
    path = tui_synthetic.write(tmp_path / "session.jsonl", session)
    driver = ReplayDriver(read_session(path), speed=100.0, sleep=instant)
    return WorkbenchApp.for_driver(driver, theme="textual-dark"), driver


async def settle(pilot: Pilot[None]) -> None:
    """Let mounts, layout, scrolling and background parses finish before the picture is taken."""
    for _ in range(5):
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()


def played(driver: ReplayDriver, *keys: str):  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot[None]) -> None:
        for _ in range(2000):
            if driver.state == "ended":
                break
            await pilot.pause()
        await settle(pilot)
        await pilot.press(*keys)
        await settle(pilot)

    return run_before


def test_session_wide(app, snap_compare) -> None:  # type: ignore[no-untyped-def]
    application, driver = app
    assert snap_compare(application, terminal_size=(140, 44), run_before=played(driver))


def test_session_80x24(app, snap_compare) -> None:  # type: ignore[no-untyped-def]
    application, driver = app
    assert snap_compare(application, terminal_size=(80, 24), run_before=played(driver))


def test_sass_with_marked_lines(app, snap_compare) -> None:  # type: ignore[no-untyped-def]
    application, driver = app
    assert snap_compare(application, terminal_size=(140, 44), run_before=played(driver, "3", "n"))


def test_compile_error_turn(app, snap_compare) -> None:  # type: ignore[no-untyped-def]
    application, driver = app
    keys = ("left_square_bracket",) * 3 + ("g",)
    assert snap_compare(application, terminal_size=(140, 44), run_before=played(driver, *keys))


def test_help_screen(app, snap_compare) -> None:  # type: ignore[no-untyped-def]
    application, driver = app
    assert snap_compare(application, terminal_size=(100, 40), run_before=played(driver, "question_mark"))


@pytest.fixture
def attention_app(tmp_path: Path) -> tuple[WorkbenchApp, ReplayDriver]:
    """An attention-like session: a wrong first turn (two outputs), then timed turns against two baselines."""
    session = tui_synthetic.events(
        3,
        kinds=["incorrect", "full", "full"],
        baselines=("cuDNN SDPA (torch sdpa)", "FlashInfer prefill (fa3)"),
    )
    path = tui_synthetic.write(tmp_path / "attention.jsonl", session)
    driver = ReplayDriver(read_session(path), speed=100.0, sleep=instant)
    return WorkbenchApp.for_driver(driver, theme="textual-dark"), driver


@pytest.mark.parametrize("columns", [120, 180])
def test_columns_at_common_widths(attention_app, snap_compare, columns: int) -> None:  # type: ignore[no-untyped-def]
    # The timing table, the trend caption and the folded messages at the widths a demo runs at.
    application, driver = attention_app
    assert snap_compare(application, terminal_size=(columns, 50), run_before=played(driver))


@pytest.mark.parametrize("columns", [120, 180])
def test_a_wrong_turn_at_common_widths(attention_app, snap_compare, columns: int) -> None:  # type: ignore[no-untyped-def]
    # The verdict of a wrong turn: one correctness line per output.
    application, driver = attention_app
    keys = ("left_square_bracket", "left_square_bracket")
    assert snap_compare(application, terminal_size=(columns, 50), run_before=played(driver, *keys))


@pytest.fixture
def counted_app(tmp_path: Path) -> tuple[WorkbenchApp, ReplayDriver]:
    """The probe session profiled with source counters: every SASS instruction has its counts."""
    sass = DATA / "families_probe.sm_90a.sass"
    session = tui_synthetic.events(4, sass=sass, counts=stored_counts(sass.read_text()))
    path = tui_synthetic.write(tmp_path / "counted.jsonl", session)
    driver = ReplayDriver(read_session(path), speed=100.0, sleep=instant)
    return WorkbenchApp.for_driver(driver, theme="textual-dark"), driver


@pytest.mark.parametrize("columns", [120, 180])
def test_sass_with_executed_counts_at_common_widths(counted_app, snap_compare, columns: int) -> None:  # type: ignore[no-untyped-def]
    # The counts column beside each instruction, the legend, and the marked line's counts above.
    application, driver = counted_app
    assert snap_compare(application, terminal_size=(columns, 50), run_before=played(driver, "3", "n"))


@pytest.mark.parametrize("columns", [120, 180])
@pytest.mark.parametrize("pane", ["c", "t"])
def test_a_maximised_pane_at_common_widths(attention_app, snap_compare, columns: int, pane: str) -> None:  # type: ignore[no-untyped-def]
    # Zoomed (z), the conversation and the timing table fill the terminal, both borders on screen.
    application, driver = attention_app
    assert snap_compare(application, terminal_size=(columns, 50), run_before=played(driver, pane, "z"))


@pytest.fixture
def gemm_family_app(tmp_path: Path) -> tuple[WorkbenchApp, ReplayDriver]:
    """A GEMM session whose first kernel has HMMA, not GMMA: the longest verdict beside cuBLAS."""
    session = tui_synthetic.events(
        3, kinds=["missing_family", "full", "full"], baselines=("cuDNN SDPA (torch sdpa)",)
    )
    path = tui_synthetic.write(tmp_path / "family.jsonl", session)
    driver = ReplayDriver(read_session(path), speed=100.0, sleep=instant)
    return WorkbenchApp.for_driver(driver, theme="textual-dark"), driver


@pytest.mark.parametrize("columns", [120, 180])
def test_long_verdicts_and_baselines_wrap_whole_at_common_widths(
    gemm_family_app, snap_compare, columns: int
) -> None:  # type: ignore[no-untyped-def]
    # `✘ static_missing_family` and `× cuDNN SDPA` in the timing table, the code header's hint: whole.
    application, driver = gemm_family_app
    assert snap_compare(application, terminal_size=(columns, 40), run_before=played(driver))
