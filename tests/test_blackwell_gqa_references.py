"""The Blackwell GQA prefill references (ragged and paged, causal) through the real build and the static
tier for sm_100a (nvcc, cuobjdump; no GPU). Each must build without spills and hold TCGEN05_MMA with the
MMA count its products make (per 64-key block: S = Q K^T in 8 K steps, P V in 4), its Tensor Memory loads
and the mbarrier its commits arrive on, and no Hopper wgmma. None has run on a Blackwell GPU; this is all
that is checked of them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.build_support import needs_nvcc, session_cache
from workbench.evaluate.executors import make_executor
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import Status
from workbench.tasks import Catalogue

GQA = Path(__file__).resolve().parent.parent / "references" / "gqa"
REFERENCES = {
    "gqa_ragged_prefill_causal_h32_kv4_d128": GQA / "ragged_prefill_causal_tcgen05.cu",
    "gqa_paged_prefill_causal_h24_kv8_d128_ps1": GQA / "paged_prefill_causal_tcgen05.cu",
}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_cache(tmp_path_factory)


def test_both_tasks_require_tcgen05_mma_on_blackwell() -> None:
    catalogue = Catalogue.load()
    assert {catalogue.get(task).target("blackwell").required_family for task in REFERENCES} == {"TCGEN05_MMA"}


def test_the_paged_file_is_the_ragged_file_with_the_switch_on() -> None:
    ragged, paged = (path.read_text().splitlines() for path in REFERENCES.values())
    differing = [(a, b) for a, b in zip(ragged, paged, strict=True) if a != b]
    assert differing == [
        (
            "#define GQA_PAGED false  // this file is the ragged variant",
            "#define GQA_PAGED true  // this file is the paged variant",
        )
    ]


@needs_nvcc
@pytest.mark.parametrize("task", list(REFERENCES))
def test_each_reference_builds_and_passes_the_static_tier(cache: Path, task: str) -> None:
    request = EvalRequest(task=task, target="blackwell", source=REFERENCES[task].read_text())  # type: ignore[arg-type]
    result = asyncio.run(make_executor("static", cache).evaluate(request, None))
    build, static = result.stages.build, result.stages.static
    assert build.status == Status.passed, build.errors or build.compiler_output
    assert [kernel.spill_stores_bytes + kernel.spill_loads_bytes for kernel in build.resources] == [0]
    assert static.status == Status.passed, static.message
    assert static.required_family == "TCGEN05_MMA" and static.required_present
    assert static.opcodes["UTCHMMA"] == 12
    for family in ("TMEM", "TCGEN05_OTHER", "MBARRIER"):
        assert static.families.get(family, 0) > 0, f"{family} absent (have {static.families})"
    assert static.families.get("GMMA", 0) == 0
    assert result.message.startswith("build and static passed")
