"""The Blackwell attention backward references (references/attention/mha_bwd_d128[_causal]_tcgen05.cu) through
the real build and the static tier for sm_100a (nvcc, cuobjdump; no GPU): each must build its two kernels
without spills and hold the task's Blackwell family, tcgen05.mma (UTCHMMA, all five products), with its
Tensor Memory loads and the mbarriers its commits arrive on, and no Hopper wgmma. Neither has run on a
Blackwell GPU; this is all that is checked of them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.build_support import needs_nvcc, session_cache
from workbench.evaluate.executors import make_executor
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import Status
from workbench.tasks import Catalogue

FOLDER = Path(__file__).resolve().parent.parent / "references" / "attention"
PLAIN = FOLDER / "mha_bwd_d128_tcgen05.cu"
CAUSAL = FOLDER / "mha_bwd_d128_causal_tcgen05.cu"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_cache(tmp_path_factory)


def test_attention_backward_requires_tcgen05_mma_on_blackwell() -> None:
    catalogue = Catalogue.load()
    for task in ("mha_bwd_d128", "mha_bwd_d128_causal"):
        assert catalogue.get(task).target("blackwell").required_family == "TCGEN05_MMA"


def test_the_causal_file_is_the_plain_file_with_the_switch_on() -> None:
    plain, causal = PLAIN.read_text().splitlines(), CAUSAL.read_text().splitlines()
    differing = [(a, b) for a, b in zip(plain, causal, strict=True) if a != b]
    assert differing == [
        (
            "#define ATTN_CAUSAL false  // this file is the plain variant",
            "#define ATTN_CAUSAL true  // this file is the causal variant",
        )
    ]


@needs_nvcc
@pytest.mark.parametrize(("source", "task"), [(PLAIN, "mha_bwd_d128"), (CAUSAL, "mha_bwd_d128_causal")])
def test_blackwell_attention_backward_builds_and_passes_static_with_tcgen05(
    cache: Path, source: Path, task: str
) -> None:
    request = EvalRequest(task=task, target="blackwell", source=source.read_text())  # type: ignore[arg-type]
    result = asyncio.run(make_executor("static", cache).evaluate(request, None))
    build, static = result.stages.build, result.stages.static
    assert build.status == Status.passed, build.errors or build.compiler_output
    assert [kernel.spill_stores_bytes + kernel.spill_loads_bytes for kernel in build.resources] == [0, 0]
    assert static.status == Status.passed, static.message
    assert static.required_family == "TCGEN05_MMA" and static.required_present
    # dK/dV: S^T and dP^T 8 K steps each, dV and dK 4 each; dQ: S and dP 8 each, dQ 4.
    assert static.opcodes["UTCHMMA"] == 24 + 20
    for family in ("TMEM", "TCGEN05_OTHER", "MBARRIER"):
        assert static.families.get(family, 0) > 0, f"{family} absent (have {static.families})"
    assert static.families.get("GMMA", 0) == 0
    assert result.message.startswith("build and static passed")
