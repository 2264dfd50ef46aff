"""On a Hopper GPU with Nsight Compute: per-instruction executed counts (ncu's SourceCounters) for the
reference GEMM through the `local` executor, placed on the kernel's own SASS listing.

Run on the GPU host from the checkout:
`python -m pytest -m gpu -n 0 -v -s tests/gpu/test_source_counters_gpu.py`.
It checks what the CPU tests could only assume of ncu's source page: that `--print-kernel-base mangled`
names the kernel as the cubin does (else the demangled fallback must have matched), that the Address
column puts every instruction at its cuobjdump offset, and that the predicated-on thread counts of the
HGMMA lines add up to what the raw page's per-opcode metric reports for the same call.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from workbench.evaluate.gpu.source_counters import listing_instructions, match_listing
from workbench.evaluate.local_executor import LocalExecutor
from workbench.evaluate.render import where_warps_waited
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import EvalResult, Status

pytestmark = pytest.mark.gpu

KERNEL = Path(__file__).parent / "kernels" / "wgmma_gemm.cu"
TASK = "gemm_n7168_k5120"


def evaluate(tmp_path: Path) -> EvalResult:
    executor = LocalExecutor(tmp_path / "builds")
    request = EvalRequest(task=TASK, target="hopper", source=KERNEL.read_text(), source_counters=True)

    async def go() -> EvalResult:
        try:
            return await executor.evaluate(request)
        finally:
            await executor.close()

    return asyncio.run(go())


def test_the_reference_gemm_has_counts_for_its_own_kernel_and_its_hgmma_lines_ran(tmp_path: Path) -> None:
    result = evaluate(tmp_path)
    dynamic = result.stages.dynamic
    print(dynamic.message, f"(dynamic tier {dynamic.duration_s} s)")
    for kernel, rows in dynamic.source_counts.items():
        print(kernel, len(rows), "instructions; first:", [row.model_dump() for row in rows[:3]])
    assert result.status == Status.passed, result.message
    assert dynamic.status == Status.passed, dynamic.message
    assert dynamic.source_counts, dynamic.message  # the note in the message says why there are none
    assert set(dynamic.source_counts) <= set(dynamic.kernels)  # the candidate's own kernels only
    hgmma = [row for rows in dynamic.source_counts.values() for row in rows if row.opcode == "HGMMA"]
    assert hgmma and all(row.executed > 0 and row.predicated_on > 0 for row in hgmma), hgmma
    # The same call's raw page counts predicate-true threads per opcode: the lines add up to it.
    assert sum(row.predicated_on for row in hgmma) == dynamic.executed_opcodes["HGMMA"]

    sass_path = result.stages.static.sass_path
    assert sass_path is not None
    lines = Path(sass_path).read_text().splitlines()
    match = match_listing(listing_instructions(lines), dynamic.source_counts)
    assert match.by_order == [], "ncu's addresses did not agree with the listing's offsets"
    assert match.matched == match.rows == sum(map(len, dynamic.source_counts.values()))
    listed = [index for index, line in enumerate(lines) if " HGMMA." in line]
    assert listed and all(match.lines[index].executed > 0 for index in listed)
    # The same section's warp-state samples: the GEMM's warps are found somewhere, with reasons, and
    # the feedback names the hottest instructions by kernel.cu line (the build's line table).
    sampled = [row for rows in dynamic.source_counts.values() for row in rows if row.samples]
    hottest = sorted(sampled, key=lambda row: row.samples)[-5:]
    print("hottest:", [(row.samples, row.opcode, row.line, row.stalls) for row in hottest])
    assert sampled and all(sum(row.stalls.values()) <= row.samples for row in sampled)
    assert any(row.stalls for row in sampled) and any(row.line for row in sampled)
    assert "where the warps were (ncu's" in where_warps_waited(dynamic)
    assert dynamic.sm_throughput_pct is not None and 0 < dynamic.sm_throughput_pct <= 100
    assert dynamic.memory_throughput_pct is not None and 0 < dynamic.memory_throughput_pct <= 100
