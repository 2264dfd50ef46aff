"""Source ↔ SASS: each SASS instruction knows its CUDA line (builds use -lineinfo), and `j` goes both ways."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import tui_synthetic
from build_support import KERNELS, build_kernel, needs_nvcc, session_cache
from textual.widgets import Label
from tui_pilot import until

from workbench.evaluate.build.lineinfo import line_table, parse_line_table
from workbench.evaluate.gpu.toolchain import find_tool
from workbench.session.events import Candidate
from workbench.session.log import read_session
from workbench.tui.app import WorkbenchApp
from workbench.tui.drivers.replay import ReplayDriver
from workbench.tui.widgets.code_pane import CodePane

needs_nvdisasm = pytest.mark.skipif(find_tool("nvdisasm") is None, reason="nvdisasm is not installed")

NVDISASM = """\
.text._Z1kPf:
        .type           _Z1kPf,@function
_Z1kPf:
	//## File "/tmp/build-x/kernel.cu", line 27
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   S2R R0, SR_TID.X ;
	//## File "/usr/include/cuda_bf16.hpp", line 585 inlined at "/usr/include/cuda_bf16.hpp", line 597
	//## File "/usr/include/cuda_bf16.hpp", line 608 inlined at "/tmp/build-x/kernel.cu", line 50
        /*0020*/                   F2F.BF16.F32 R2, R3 ;
	//## File "/tmp/build-x/kernel.cu", line 12 inlined at "/tmp/build-x/kernel.cu", line 60
        /*0030*/                   FFMA R4, R5, R6, R7 ;
"""


def test_the_line_table_follows_inlining_to_the_candidates_own_lines() -> None:
    # Unannotated instructions keep the line before; a header's code belongs to the line that called it;
    # a function of the file inlined into another keeps its own line, as Nsight Compute shows it.
    assert parse_line_table(NVDISASM) == {"_Z1kPf": {0x0: 27, 0x10: 27, 0x20: 50, 0x30: 12}}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if find_tool("nvcc") is None:
        pytest.skip("nvcc is not installed")
    stage = build_kernel("wgmma_gemm.cu", "hopper", session_cache(tmp_path_factory))
    assert stage.cubin_path is not None, stage.message
    return Path(stage.cubin_path)


async def instant(_: float) -> None:
    await asyncio.sleep(0)


@needs_nvcc
@needs_nvdisasm
async def test_j_goes_from_a_sass_instruction_to_its_cuda_line_and_back(built: Path, tmp_path: Path) -> None:
    source = (KERNELS / "wgmma_gemm.cu").read_text()
    table = line_table(built)
    assert table and all(lines for lines in table.values())
    events = tui_synthetic.events(2, cubin=built, kinds=["full", "full"])
    events = [e.model_copy(update={"source": source}) if isinstance(e, Candidate) else e for e in events]
    path = tui_synthetic.write(tmp_path / "s.jsonl", events)
    driver = ReplayDriver(read_session(path), speed=100.0, sleep=instant)
    app = WorkbenchApp.for_driver(driver, theme="textual-dark")
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        code = app.screen.query_one(CodePane)
        await pilot.press("3")
        await until(pilot, lambda: bool(code.view("sass").document.source_lines))
        await pilot.press("n")  # the first GMMA instruction
        sass_line = code.view("sass").cursor_line
        assert sass_line is not None and "HGMMA" in code.view("sass").document.lines[sass_line]
        summary = str(app.screen.query_one("#summary-sass", Label).render())
        cuda_line = code.view("sass").document.source_lines[sass_line]
        assert f"← CUDA line {cuda_line}:" in summary
        await pilot.press("j")
        assert code.active == "cuda" and code.view("cuda").cursor_line == cuda_line - 1
        assert "wgmma" in source.splitlines()[cuda_line - 1] or "asm" in source.splitlines()[cuda_line - 1]
        await pilot.press("j")  # and back: every instruction of that line, tinted
        assert code.active == "sass"
        related = code.view("sass").related
        assert sass_line in related and code.view("sass").cursor_line == min(related)
        await pilot.press("down")
        assert code.view("sass").cursor_line == min(related) + 1


@needs_nvcc
@needs_nvdisasm
def test_a_session_carries_the_line_table_with_the_listings(built: Path) -> None:
    from workbench.session.listings import carry

    listings = carry(tui_synthetic.result(1, "full", "source", cubin=built))
    assert listings is not None and listings.line_table() == line_table(built)
