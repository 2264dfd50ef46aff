"""Why a kernel is slow, from the same ncu run: the warp-state samples SourceCounters takes per SASS
instruction (`Warp Stall Sampling (All Samples)` and a column per stall reason, as the H200 probe's page
names them), kept with the counts, placed on kernel.cu's lines by the cubin's line table, and shown to
the agent (the hottest instructions and why their warps waited) and on the SASS view's status line;
and ncu's SpeedOfLight figures (how busy the SMs and the memory system were) from the same profile.

Nsight Compute cannot run here: pages are written in its format (`source_page_support.py`), the rows
from real cuobjdump listings; the line table is a real build's."""

from __future__ import annotations

from pathlib import Path

import pytest
from build_support import KERNELS, needs_nvcc
from source_page_support import built_wgmma_gemm, stored_counts

from workbench.evaluate.build.sass import FAMILIES
from workbench.evaluate.gpu.profile import THROUGHPUT_METRICS, dynamic_stage, ncu_command, parse_raw_csv
from workbench.evaluate.gpu.toolchain import find_tool
from workbench.evaluate.pipeline import place_source_lines
from workbench.evaluate.render import dynamic_lines, feedback_text, where_warps_waited
from workbench.evaluate.result import DynamicStage, EvalResult, Status
from workbench.tui.document import CodeDocument

DATA = Path(__file__).parent / "data"
PROBE = (DATA / "tui" / "families_probe.sm_90a.sass").read_text()
PROBE_KERNEL = "_Z14families_probePfmm"
FAMILY_LISTS = {family: sorted(ops) for family, ops in FAMILIES.items()}


def samples(index: int, sass: str) -> dict[str, str]:
    """Warps found mostly at the HGMMA (waiting on it) and a little everywhere else; the "(Not Issued)"
    twin of a reason splits the same samples again and must not count twice."""
    if sass.startswith("NOP"):
        return {}
    if "HGMMA" in sass:
        return {
            "Warp Stall Sampling (All Samples)": "1,200",
            "stall_wait": "700",
            "stall_math": "300",
            "stall_long_sb": "200",
            "stall_wait (Not Issued)": "650",
        }
    return {"Warp Stall Sampling (All Samples)": "10", "stall_long_sb": "6", "stall_selected": "4"}


def probe_stage() -> DynamicStage:
    counts = stored_counts(PROBE, extra=samples, launches=2)
    return DynamicStage(status=Status.passed, kernels=[PROBE_KERNEL], source_counts=counts)


def test_samples_and_their_stall_reasons_are_read_by_column_and_summed_over_launches() -> None:
    counts = probe_stage().source_counts[PROBE_KERNEL]
    (hgmma,) = [row for row in counts if row.opcode == "HGMMA"]
    assert hgmma.samples == 2400  # two launches of the one call
    assert list(hgmma.stalls.items()) == [("wait", 1400), ("math", 600), ("long_sb", 400)]
    others = [row for row in counts if row.opcode not in ("HGMMA", "NOP")]
    assert others and all(
        row.samples == 20 and row.stalls == {"long_sb": 12, "selected": 8} for row in others
    )


def test_the_agent_reads_where_the_warps_were_hottest_first_with_their_reasons() -> None:
    stage = probe_stage()
    total = sum(row.samples for row in stage.source_counts[PROBE_KERNEL])
    text = where_warps_waited(stage)
    assert text.startswith(f"where the warps were (ncu's {total:,} warp samples): HGMMA at +0x")
    assert "HGMMA at +0x" in text and f"{2400 / total:.0%} (wait 58%, math 25%)" in text
    assert text.count(" · ") == 4  # five instructions
    # With the line table placed, the agent reads lines of its own file.
    for row in stage.source_counts[PROBE_KERNEL]:
        row.line = 40 if row.opcode == "HGMMA" else 12
    result = EvalResult(task="gemm_n7168_k5120", target="hopper", executor="local", source_sha256="0" * 64)
    result.stages.dynamic = stage
    assert "): kernel.cu:40 HGMMA" in feedback_text(result)
    assert where_warps_waited(DynamicStage(status=Status.passed)) == ""


def test_the_sass_view_says_a_lines_share_of_the_samples_and_why() -> None:
    document = CodeDocument.from_text(PROBE, "sass", "hopper").with_counts(probe_stage().source_counts)
    (line,) = [index for index, text in enumerate(document.lines) if "HGMMA" in text]
    assert document.samples_at(line) == (
        f"{2400 / document.samples:.1%} of warp samples (wait 58%, math 25%, long_sb 17%)"
    )
    assert document.samples_at(0) == ""  # the header line: no instruction


@needs_nvcc
@pytest.mark.skipif(find_tool("nvdisasm") is None, reason="nvdisasm is not installed")
def test_each_profiled_instruction_gets_its_kernel_cu_line_from_the_cubin(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    build, listing = built_wgmma_gemm(tmp_path_factory)
    counts = stored_counts(listing, extra=samples)
    result = EvalResult(task="gemm_n7168_k5120", target="hopper", executor="local", source_sha256="0" * 64)
    result.stages.build = build
    result.stages.dynamic = DynamicStage(status=Status.passed, source_counts=counts)
    place_source_lines(result)
    source = (KERNELS / "wgmma_gemm.cu").read_text().splitlines()
    placed = [row.line for rows in counts.values() for row in rows if row.line is not None]
    assert len(placed) > 100 and all(1 <= line <= len(source) for line in placed)
    (hgmma,) = [row for rows in counts.values() for row in rows if row.opcode == "HGMMA"]
    # ptxas gives the wgmma its block's first asm statement (the fence before it): the same few lines.
    assert hgmma.line is not None
    assert any("wgmma.mma_async" in text for text in source[hgmma.line - 1 : hgmma.line + 4])


def test_the_slow_kernel_profile_says_how_busy_the_sms_and_the_memory_were() -> None:
    counted = ncu_command("ncu", "/tmp/run/ncu.log", "hopper", ["app"], source_counters=True)
    assert counted[counted.index("SpeedOfLight") - 1] == "--section"
    assert "SpeedOfLight" not in ncu_command("ncu", "/tmp/run/ncu.log", "hopper", ["app"])
    header, units, row = (DATA / "ncu" / "wgmma_gemm_m256_raw_details.csv").read_text().splitlines()[:3]
    columns = ",".join(f'"{metric}"' for metric in THROUGHPUT_METRICS.values())
    page = "\n".join([f"{header},{columns}", f'{units},"%","%"', f'{row},"78.46","41.2"'])
    (launch,) = parse_raw_csv(page)
    assert launch["throughput"] == {"sm_throughput_pct": 78.46, "memory_throughput_pct": 41.2}
    # Two launches of one call: each weighed by its time.
    slow = {**launch, "time_ns": 3 * launch["time_ns"], "throughput": {"sm_throughput_pct": 18.46,
                                                                        "memory_throughput_pct": 81.2}}  # fmt: skip
    stage = dynamic_stage([launch, slow], FAMILY_LISTS, "GMMA", None, "hopper")
    assert stage["sm_throughput_pct"] == pytest.approx((78.46 + 3 * 18.46) / 4)
    assert stage["memory_throughput_pct"] == pytest.approx((41.2 + 3 * 81.2) / 4)
    lines = dynamic_lines(DynamicStage.model_validate({k: v for k, v in stage.items() if k != "message"}))
    assert "ncu's SpeedOfLight throughput: compute (SM) 33% · memory 71% of peak" in lines
