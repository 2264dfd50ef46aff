"""The Blackwell FP8 GEMM reference (references/fp8_gemm/fp8_gemm_1d2d_tcgen05.cu) through the real build
and the static tier for sm_100a (nvcc, cuobjdump; no GPU): it must build without spills and hold the
task's Blackwell family, UTCQMMA (tcgen05.mma kind::f8f6f4), with Tensor Memory loads, tcgen05
commit/alloc, TMA and mbarriers beside it, and no bf16 tensor-core path to fall back on. It has never
run on a Blackwell GPU; this is all that is checked of it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.build_support import needs_nvcc, session_cache
from workbench.evaluate.executors import make_executor
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import Status
from workbench.tasks import Catalogue

SOURCE = Path(__file__).resolve().parent.parent / "references" / "fp8_gemm" / "fp8_gemm_1d2d_tcgen05.cu"
TASK = "fp8_gemm_nt_1d2d_n4096_k7168"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_cache(tmp_path_factory)


def test_the_fp8_gemm_requires_utcqmma_on_blackwell() -> None:
    assert Catalogue.load().get(TASK).target("blackwell").required_family == "UTCQMMA"


@needs_nvcc
def test_blackwell_fp8_reference_builds_and_passes_static_with_utcqmma(cache: Path) -> None:
    request = EvalRequest(task=TASK, target="blackwell", source=SOURCE.read_text())  # type: ignore[arg-type]
    result = asyncio.run(make_executor("static", cache).evaluate(request, None))
    build, static = result.stages.build, result.stages.static
    assert build.status == Status.passed, build.errors or build.compiler_output
    assert build.resources, "ptxas reported no kernels"
    for kernel in build.resources:
        assert kernel.spill_stores_bytes == 0 and kernel.spill_loads_bytes == 0, kernel
        assert kernel.stack_frame_bytes == 0, kernel
    assert static.status == Status.passed, static.message
    assert static.required_family == "UTCQMMA" and static.required_present
    assert static.families["UTCQMMA"] == static.opcodes["UTCQMMA"] > 0
    for family in ("TMEM", "TCGEN05_OTHER", "TMA", "MBARRIER"):
        assert static.families.get(family, 0) > 0, f"{family} absent (have {static.families})"
    # No bf16 tcgen05.mma: the FP8 operands go to the tensor core as they are.
    assert static.opcodes.get("UTCHMMA", 0) == 0
    assert result.message.startswith("build and static passed")
