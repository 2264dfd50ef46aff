"""The SASS tab of an evaluation that kept a cubin but no SASS dump: the real cuobjdump, in a worker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import tui_synthetic
from build_support import build_kernel, needs_nvcc, session_cache

from workbench.evaluate.gpu.toolchain import find_tool
from workbench.session.log import read_session
from workbench.tui.app import WorkbenchApp
from workbench.tui.document import CodeDocument
from workbench.tui.drivers.replay import ReplayDriver
from workbench.tui.screens.session import SessionScreen
from workbench.tui.widgets.code_pane import CodePane

needs_cuobjdump = pytest.mark.skipif(find_tool("cuobjdump") is None, reason="cuobjdump is not installed")


async def instant(_: float) -> None:
    await asyncio.sleep(0)


@pytest.fixture(scope="module")
def cubin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wgmma kernel built by the evaluator's own build stage (which disassembles nothing)."""
    build = build_kernel("wgmma_gemm.cu", "hopper", session_cache(tmp_path_factory))
    assert build.cubin_path is not None, build.message
    return Path(build.cubin_path)


async def sass_shown(path: Path) -> tuple[CodeDocument, CodeDocument]:
    """The SASS tab of the last turn as first shown, then once nothing is pending any more."""
    driver = ReplayDriver(read_session(path), speed=100.0, sleep=instant)
    app = WorkbenchApp.for_driver(driver, theme="textual-dark")
    async with app.run_test(size=(140, 44)) as pilot:
        for _ in range(400):
            if driver.state == "ended":
                break
            await pilot.pause()
        assert isinstance(app.screen, SessionScreen)
        code = app.screen.query_one(CodePane)
        first = code.document("sass")  # at once, whatever cuobjdump is doing
        await pilot.press("3")
        for _ in range(600):  # cuobjdump takes well under a second here
            if "disassembling" not in code.document("sass").unavailable:
                break
            await asyncio.sleep(0.05)
        return first, code.document("sass")


@needs_nvcc
@needs_cuobjdump
async def test_a_kept_cubin_is_disassembled_when_the_sass_tab_opens(cubin: Path, tmp_path: Path) -> None:
    session = tui_synthetic.write(tmp_path / "s.jsonl", tui_synthetic.events(2, cubin=cubin))
    first, shown = await sass_shown(session)
    assert "kept no SASS dump: disassembling its cubin" in first.unavailable
    assert shown.unavailable == "" and shown.language == "sass"
    assert any("HGMMA" in line for line in shown.lines)
    assert "GMMA" in shown.marks.values()


@needs_cuobjdump
async def test_a_cubin_cuobjdump_cannot_read_says_why(tmp_path: Path) -> None:
    junk = tmp_path / "kernel.cubin"
    junk.write_bytes(b"not an ELF file")
    session = tui_synthetic.write(tmp_path / "s.jsonl", tui_synthetic.events(2, cubin=junk))
    _, shown = await sass_shown(session)
    assert shown.unavailable.startswith("SASS not available: cuobjdump failed")


async def test_what_is_missing_is_named(tmp_path: Path) -> None:
    gone = tmp_path / "gone.cubin"
    session = tui_synthetic.write(tmp_path / "gone.jsonl", tui_synthetic.events(2, cubin=gone))
    _, shown = await sass_shown(session)
    assert shown.unavailable == (
        f"SASS not available: this evaluation kept no SASS dump, nor its cubin (recorded at {gone})"
    )
    session = tui_synthetic.write(tmp_path / "none.jsonl", tui_synthetic.events(2))
    _, shown = await sass_shown(session)
    assert shown.unavailable == "SASS not available: this evaluation kept no SASS dump and no cubin"
