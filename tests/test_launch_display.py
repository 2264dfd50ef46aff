"""Launch configurations and readable kernel names, from a profile recorded on the H200 to what the
agent reads and what the verdict pane shows."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from rich.console import Console

from workbench.evaluate.build.sass import FAMILIES
from workbench.evaluate.gpu.profile import dynamic_stage, parse_raw_csv
from workbench.evaluate.pipeline import name_kernels
from workbench.evaluate.render import feedback_text
from workbench.evaluate.result import DynamicStage, EvalResult, Status, TimingStage, TimingStats
from workbench.tui.widgets.verdict import render_verdict

DATA = Path(__file__).parent / "data" / "ncu"
FAMILY_LISTS = {family: sorted(ops) for family, ops in FAMILIES.items()}
FLOPS = 2.0 * 256 * 7168 * 5120
# What ncu and CUPTI print for the shipped attention session's kernel (an anonymous-namespace template).
MANGLED = "_ZN41_GLOBAL__N__6a3ae09d_9_kernel_cu_f389ed8d8attn_fwdILb1EEEv14CUtensorMap_stS1_S1_P13__nv_bfloat16Pfif"


def profiled_result(launches: list[dict]) -> EvalResult:
    stage = dynamic_stage(launches, FAMILY_LISTS, "GMMA", FLOPS, "hopper")
    result = EvalResult(task="gemm_n7168_k5120", target="hopper", executor="local", source_sha256="0" * 64)
    result.stages.dynamic = DynamicStage.model_validate({k: v for k, v in stage.items() if k != "message"})
    result.stages.static.required_family = "GMMA"
    return result


def real_launches() -> list[dict]:
    return parse_raw_csv((DATA / "wgmma_gemm_m256_raw_details.csv").read_text())


def _steady(ms: float, iterations: int, kernels: list[str] | None = None) -> TimingStats:
    """The candidate's timing stats where every call took `ms`."""
    return TimingStats(
        name="candidate",
        median_ms=ms,
        p25_ms=ms,
        p75_ms=ms,
        min_ms=ms,
        max_ms=ms,
        iterations=iterations,
        kernels=kernels or [],
    )


def test_the_agent_reads_each_launch_with_its_shared_memory_and_occupancy() -> None:
    text = feedback_text(profiled_result(real_launches()))
    assert (
        "launch wgmma_gemm_kernel: 56 blocks × 384 threads, 168 regs, smem 193.1 KiB dynamic + 0 B static "
        "(carveout 196.0 KiB); occupancy 1 block/SM, 12/64 warps (19%, limited by shared memory)"
    ) in text


def test_the_verdict_pane_shows_the_launch_under_the_executed_tier() -> None:
    console = Console(width=200, record=True, color_system=None)
    console.print(render_verdict(profiled_result(real_launches())))
    shown = console.export_text()
    assert "56 blocks × 384 threads" in shown and "limited by shared memory" in shown


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="needs c++filt (binutils)")
def test_mangled_symbols_get_readable_names_kept_with_the_result() -> None:
    launch = {**real_launches()[0], "name": MANGLED}
    result = profiled_result([launch])
    result.stages.timing = TimingStage(
        status=Status.passed,
        candidate=_steady(1, 1, kernels=[MANGLED]),
    )
    name_kernels(result)
    readable = result.kernel_names[MANGLED]
    assert readable.startswith("void (anonymous namespace)::attn_fwd<true>(CUtensorMap_st")
    again = EvalResult.model_validate_json(result.model_dump_json())
    assert again.kernel_names == {MANGLED: readable}
    text = feedback_text(again)
    assert "kernels profiled: attn_fwd<true>" in text and "launch attn_fwd<true>: 56 blocks" in text
    assert MANGLED not in text


def test_the_verdict_pane_reads_a_memory_bound_kernel_in_tb_per_s_with_its_share_of_light() -> None:
    result = profiled_result(real_launches())
    result.stages.timing = TimingStage(
        status=Status.passed,
        candidate=_steady(0.07, 50),
        tflops=11.5,
        tbps=3.85,
        speed_of_light_ms=0.0561,
        light_share=0.80,
        light_bound="memory",
    )
    console = Console(width=200, record=True, color_system=None)
    console.print(render_verdict(result))
    assert "0.07 ms (p25–p75 0.07–0.07) · 3.85 TB/s · 11.50 TFLOP/s · 80% of light" in console.export_text()
    assert "3.85 TB/s · 11.50 TFLOP/s · 80% of the speed of light (memory-bound)" in feedback_text(result)
