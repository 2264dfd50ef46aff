"""The Blackwell attention references through the real build and the static tier for sm_100a (nvcc, cuobjdump;
no GPU): bf16 forward and backward (tcgen05.mma kind::f16, UTCHMMA) and FP8 forward (kind::f8f6f4, UTCQMMA),
each plain and causal. Each must build without spills and hold its task's Blackwell family with the MMA
count its products make, its Tensor Memory loads and the mbarrier its commits arrive on, and no Hopper
wgmma. None has run on a Blackwell GPU; this is all that is checked of them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.build_support import needs_nvcc, session_cache
from workbench.evaluate.executors import make_executor
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import Status
from workbench.tasks import Catalogue

REFERENCES = Path(__file__).resolve().parent.parent / "references"


@dataclass(frozen=True)
class Pair:
    plain: str  # under references/; the causal file is the same name with _causal before _tcgen05
    task: str  # the plain task; the causal one is task + "_causal"
    family: str
    opcode: str
    mmas: int
    kernels: int

    def files(self) -> tuple[Path, Path]:
        plain = REFERENCES / self.plain
        return plain, plain.with_name(plain.name.replace("_tcgen05", "_causal_tcgen05"))


PAIRS = {
    # Per 64-key block: S = Q K^T in 8 K steps, P V in 4.
    "forward": Pair(
        "attention/mha_fwd_d128_tcgen05.cu", "mha_with_lse_d128", "TCGEN05_MMA", "UTCHMMA", 12, 1
    ),
    # kind::f8f6f4 takes K 32: S in 4 steps, P V in 2.
    "fp8_forward": Pair(
        "fp8_attention/fp8_mha_fwd_d128_tcgen05.cu", "fp8_mha_with_lse_d128", "UTCQMMA", "UTCQMMA", 6, 1
    ),
    # dK/dV: S^T and dP^T 8 steps each, dV and dK 4 each; dQ: S and dP 8 each, dQ 4.
    "backward": Pair(
        "attention/mha_bwd_d128_tcgen05.cu", "mha_bwd_d128", "TCGEN05_MMA", "UTCHMMA", 24 + 20, 2
    ),
}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_cache(tmp_path_factory)


@pytest.mark.parametrize("name", list(PAIRS))
def test_each_task_requires_its_family_on_blackwell(name: str) -> None:
    pair, catalogue = PAIRS[name], Catalogue.load()
    for task in (pair.task, pair.task + "_causal"):
        assert catalogue.get(task).target("blackwell").required_family == pair.family


@pytest.mark.parametrize("name", list(PAIRS))
def test_the_causal_file_is_the_plain_file_with_the_switch_on(name: str) -> None:
    plain, causal = (path.read_text().splitlines() for path in PAIRS[name].files())
    differing = [(a, b) for a, b in zip(plain, causal, strict=True) if a != b]
    assert differing == [
        (
            "#define ATTN_CAUSAL false  // this file is the plain variant",
            "#define ATTN_CAUSAL true  // this file is the causal variant",
        )
    ]


# The forward files' causal variants (the plain file with the switch on, checked above) are left to
# -m slow: their plain builds and backward's causal one take the same path through the build and the tier.
_CAUSAL_SLOW = {"forward", "fp8_forward"}


@needs_nvcc
@pytest.mark.parametrize(
    ("name", "causal"),
    [
        pytest.param(name, causal, marks=[pytest.mark.slow] if causal and name in _CAUSAL_SLOW else [])
        for name in PAIRS
        for causal in (False, True)
    ],
)
def test_each_reference_builds_and_passes_the_static_tier(cache: Path, name: str, causal: bool) -> None:
    pair = PAIRS[name]
    source = pair.files()[causal]
    task = pair.task + ("_causal" if causal else "")
    request = EvalRequest(task=task, target="blackwell", source=source.read_text())  # type: ignore[arg-type]
    result = asyncio.run(make_executor("static", cache).evaluate(request, None))
    build, static = result.stages.build, result.stages.static
    assert build.status == Status.passed, build.errors or build.compiler_output
    assert [kernel.spill_stores_bytes + kernel.spill_loads_bytes for kernel in build.resources] == [
        0
    ] * pair.kernels
    assert static.status == Status.passed, static.message
    assert static.required_family == pair.family and static.required_present
    assert static.opcodes[pair.opcode] == pair.mmas
    for family in ("TMEM", "TCGEN05_OTHER", "MBARRIER"):
        assert static.families.get(family, 0) > 0, f"{family} absent (have {static.families})"
    assert static.families.get("GMMA", 0) == 0 and static.opcodes.get("QGMMA", 0) == 0
    assert result.message.startswith("build and static passed")
