"""Author mode: the person's own file is evaluated on each save (watchfiles) and on `x`."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_support import broken_kernel, simt_kernel
from build_support import session_cache
from tui_pilot import until

from workbench.evaluate.executors import make_executor
from workbench.evaluate.gpu.toolchain import find_tool
from workbench.evaluate.result import Status
from workbench.session.events import Candidate, Evaluation, SessionEnd
from workbench.session.log import read_session
from workbench.tui.app import WorkbenchApp
from workbench.tui.drivers.author import AuthorDriver
from workbench.tui.screens.session import SessionScreen
from workbench.tui.widgets.code_pane import CodePane

pytestmark = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")


async def test_each_save_is_evaluated_and_recorded(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    kernel = tmp_path / "kernel.cu"
    kernel.write_text(broken_kernel())
    out = tmp_path / "author.jsonl"
    driver = AuthorDriver(
        task="gemm_n7168_k5120",
        target="hopper",
        kernel=kernel,
        executor=make_executor("static", session_cache(tmp_path_factory)),
        out=out,
        debounce_ms=50,
    )
    app = WorkbenchApp.for_driver(driver, theme="textual-dark")
    async with app.run_test(size=(140, 44)) as pilot:
        screen = app.screen
        assert isinstance(screen, SessionScreen)

        def verdict(turn: int) -> Status | None:
            result = screen.view.turn(turn).evaluation if turn in screen.view.turns else None
            return result.status if result else None

        await until(pilot, lambda: verdict(1) is not None)
        assert verdict(1) == Status.compile_error
        assert "watching kernel.cu" in driver.hint
        kernel.write_text(simt_kernel())  # the person saves in their editor
        await until(pilot, lambda: verdict(2) is not None)
        assert verdict(2) == Status.static_missing_family
        # The new build's SASS is shown (read in a worker).
        await until(pilot, lambda: bool(screen.query_one(CodePane).document("sass").lines))
        await pilot.press("x")  # evaluate again now, unchanged
        await until(pilot, lambda: verdict(3) is not None)
    events = read_session(out).events
    candidates = [e for e in events if isinstance(e, Candidate)]
    assert [(c.turn, c.origin) for c in candidates] == [(1, "override"), (2, "override"), (3, "override")]
    assert candidates[1].source == simt_kernel()
    assert [e.result.status for e in events if isinstance(e, Evaluation)] == [
        Status.compile_error,
        Status.static_missing_family,
        Status.static_missing_family,
    ]
    assert isinstance(events[-1], SessionEnd) and events[-1].reason == "stopped_by_person"
