"""The Blackwell attention forward reference (references/attention/mha_fwd_d128_tcgen05.cu) through the real
build and the static tier for sm_100a (nvcc, cuobjdump; no GPU): it must build without spills and hold the
task's Blackwell family, tcgen05.mma (UTCHMMA, both products), with its Tensor Memory loads and the
mbarrier its commits arrive on, and no Hopper wgmma. It has never run on a Blackwell GPU; this is all that
is checked of it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.build_support import needs_nvcc, session_cache
from workbench.evaluate.executors import make_executor
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import Status
from workbench.tasks import Catalogue

SOURCE = Path(__file__).resolve().parent.parent / "references" / "attention" / "mha_fwd_d128_tcgen05.cu"
TASK = "mha_with_lse_d128"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_cache(tmp_path_factory)


def test_attention_forward_requires_tcgen05_mma_on_blackwell() -> None:
    assert Catalogue.load().get(TASK).target("blackwell").required_family == "TCGEN05_MMA"


@needs_nvcc
def test_blackwell_attention_reference_builds_and_passes_static_with_tcgen05(cache: Path) -> None:
    request = EvalRequest(task=TASK, target="blackwell", source=SOURCE.read_text())  # type: ignore[arg-type]
    result = asyncio.run(make_executor("static", cache).evaluate(request, None))
    build, static = result.stages.build, result.stages.static
    assert build.status == Status.passed, build.errors or build.compiler_output
    assert [kernel.spill_stores_bytes + kernel.spill_loads_bytes for kernel in build.resources] == [0]
    assert static.status == Status.passed, static.message
    assert static.required_family == "TCGEN05_MMA" and static.required_present
    # Eight K steps of S = Q K^T and four of P V, each one tcgen05.mma.
    assert static.opcodes["UTCHMMA"] == 12
    for family in ("TMEM", "TCGEN05_OTHER", "MBARRIER"):
        assert static.families.get(family, 0) > 0, f"{family} absent (have {static.families})"
    assert static.families.get("GMMA", 0) == 0
    assert result.message.startswith("build and static passed")
