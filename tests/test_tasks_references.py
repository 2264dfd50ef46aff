"""The suite's reference kernels (references/fp8_gemm, gqa, gdn) through the real build and the
static tier of their task's required family (nvcc, cuobjdump; no GPU).

Each must build with the evaluator's command for sm_90a, spill nothing, and hold its task's family in
its own SASS: the FP8 GEMM QGMMA (wgmma e4m3), the paged and ragged prefills GMMA (wgmma bf16), the
paged decode and the gated delta-net steps ASYNC_COPY (cp.async.bulk).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.build_support import needs_nvcc, session_cache
from workbench.evaluate.executors import make_executor
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import Status
from workbench.tasks import Catalogue

REFERENCES = Path(__file__).resolve().parent.parent / "references"
# (file, task, families its SASS must hold besides the required one)
SUITE_REFERENCES = [
    ("fp8_gemm/fp8_gemm_1d2d_ws.cu", "fp8_gemm_nt_1d2d_n4096_k7168", {"TMA", "MBARRIER", "SETMAXNREG"}),
    ("gqa/paged_decode_bulk.cu", "gqa_paged_decode_h24_kv8_d128_ps1", {"BULK", "MBARRIER"}),
    (
        "gqa/paged_prefill_causal.cu",
        "gqa_paged_prefill_causal_h24_kv8_d128_ps1",
        {"TMA", "MBARRIER", "SETMAXNREG"},
    ),
    (
        "gqa/ragged_prefill_causal.cu",
        "gqa_ragged_prefill_causal_h32_kv4_d128",
        {"TMA", "MBARRIER", "SETMAXNREG"},
    ),
    ("gdn/gdn_decode_bulk.cu", "gdn_decode_qk4_v8_d128_k_last", {"BULK", "MBARRIER"}),
    ("gdn/gdn_decode_bulk.cu", "gdn_decode_qk8_v16_d128_k_last", {"BULK", "MBARRIER"}),
    ("gdn/gdn_mtp_bulk.cu", "gdn_mtp_qk4_v8_d128_k_last", {"BULK", "MBARRIER"}),
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_cache(tmp_path_factory)


@needs_nvcc
@pytest.mark.parametrize(("path", "task", "families"), SUITE_REFERENCES, ids=[p[1] for p in SUITE_REFERENCES])
def test_reference_builds_without_spills_and_holds_its_tasks_family(
    path: str, task: str, families: set[str], cache: Path
) -> None:
    request = EvalRequest(task=task, target="hopper", source=(REFERENCES / path).read_text())  # type: ignore[arg-type]
    result = asyncio.run(make_executor("static", cache).evaluate(request, None))
    build = result.stages.build
    assert build.status == Status.passed, build.errors or build.compiler_output
    assert build.resources, "ptxas reported no kernels"
    for kernel in build.resources:
        assert kernel.spill_stores_bytes == 0 and kernel.spill_loads_bytes == 0, kernel
        assert kernel.stack_frame_bytes == 0, kernel
    target = Catalogue.load().get(task).target("hopper")
    static = result.stages.static  # the executor judged it by the task's own family
    assert static.status == Status.passed, static.message
    assert static.required_family == target.required_family and static.families[target.required_family] > 0
    missing = {f for f in families if static.families.get(f, 0) == 0}
    assert not missing, f"families absent from the SASS: {missing} (have {static.families})"
    # The FP8 GEMM has no bf16 wgmma to fall back on; the memory-bound steps no tensor core at all.
    if target.required_family in ("QGMMA", "ASYNC_COPY"):
        assert "HGMMA" not in static.opcodes


@needs_nvcc
@pytest.mark.parametrize(
    ("path", "task"),
    [
        ("gqa/paged_decode_bulk.cu", "gqa_paged_decode_h24_kv8_d128_ps1"),
        # The same bulk copy and mbarrier as the multi-token step's build below: left to -m slow.
        pytest.param("gdn/gdn_decode_bulk.cu", "gdn_decode_qk4_v8_d128_k_last", marks=pytest.mark.slow),
        ("gdn/gdn_mtp_bulk.cu", "gdn_mtp_qk4_v8_d128_k_last"),
    ],
)
def test_memory_bound_references_hold_their_family_on_blackwell_too(
    path: str, task: str, cache: Path
) -> None:
    # cp.async.bulk and mbarrier are the same instructions on sm_100a: UBLKCP there as on sm_90a.
    request = EvalRequest(task=task, target="blackwell", source=(REFERENCES / path).read_text())  # type: ignore[arg-type]
    result = asyncio.run(make_executor("static", cache).evaluate(request, None))
    build, static = result.stages.build, result.stages.static
    assert build.status == Status.passed, build.errors or build.compiler_output
    assert all(kernel.spill_stores_bytes == 0 for kernel in build.resources)
    assert static.status == Status.passed and static.required_family == "ASYNC_COPY"
    assert static.opcodes.get("UBLKCP", 0) > 0


@needs_nvcc
def test_the_static_executor_judges_the_fp8_gemm_by_qgmma(cache: Path) -> None:
    source = (REFERENCES / "fp8_gemm/fp8_gemm_1d2d_ws.cu").read_text()
    request = EvalRequest(task="fp8_gemm_nt_1d2d_n4096_k7168", target="hopper", source=source)  # type: ignore[arg-type]
    result = asyncio.run(make_executor("static", cache).evaluate(request, None))
    static = result.stages.static
    assert static.status == Status.passed, static.message
    assert static.required_family == "QGMMA" and static.required_present
    assert static.families["QGMMA"] == static.opcodes["QGMMA"] > 0
    assert result.message.startswith("build and static passed")


@needs_nvcc
# The shortest interval, the furthest from the file's default, is built in CI; 64 lies between (-m slow).
@pytest.mark.parametrize("interval", [32, pytest.param(64, marks=pytest.mark.slow)])
def test_the_fp8_gemms_other_promotion_intervals_build_and_hold_qgmma(interval: int, cache: Path) -> None:
    """The shorter intervals, for fewer elements outside the tolerance (the file's default, 128, is the
    test above)."""
    source = f"#define FP8_PROMOTE_K {interval}\n" + (REFERENCES / "fp8_gemm/fp8_gemm_1d2d_ws.cu").read_text()
    request = EvalRequest(task="fp8_gemm_nt_1d2d_n4096_k7168", target="hopper", source=source)  # type: ignore[arg-type]
    result = asyncio.run(make_executor("static", cache).evaluate(request, None))
    build, static = result.stages.build, result.stages.static
    assert build.status == Status.passed, build.errors or build.compiler_output
    assert all(k.spill_stores_bytes == 0 and k.spill_loads_bytes == 0 for k in build.resources), (
        build.resources
    )
    assert static.status == Status.passed and static.required_family == "QGMMA" and static.required_present
