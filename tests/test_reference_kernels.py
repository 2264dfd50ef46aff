"""The reference kernels (references/) through the real build and static tiers (nvcc, cuobjdump).

They are the evaluator's positive controls on Hopper: each must build with the evaluator's command,
spill nothing, and show the required instruction family in its own SASS. The ladder's first step
(SIMT) is the negative control: it builds but has no wgmma, so the static tier must flag it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.build_support import needs_nvcc, session_cache
from workbench.evaluate.executors import make_executor
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import EvalResult, StaticStage, Status

REFERENCES = Path(__file__).resolve().parent.parent / "references"

# (file, task, instruction families its SASS must hold besides the required GMMA). The plain
# attention files differ from their causal twins only in one #define, so the causal ones stand for both.
# The headline GEMM's builds by default; the other references with -m slow (each is a long build).
SLOW = pytest.mark.slow
HOPPER_REFERENCES = [
    pytest.param("gemm/02_wgmma.cu", "gemm_n7168_k5120", set(), marks=SLOW),
    pytest.param("gemm/03_tma_pipeline.cu", "gemm_n7168_k5120", {"TMA", "MBARRIER"}, marks=SLOW),
    pytest.param("gemm/04_ws_persistent.cu", "gemm_n7168_k5120", {"TMA", "MBARRIER", "SETMAXNREG"}),
    pytest.param(
        "attention/mha_fwd_d128_causal.cu",
        "mha_with_lse_d128_causal",
        {"TMA", "MBARRIER", "SETMAXNREG"},
        marks=SLOW,
    ),
    pytest.param(
        "attention/mha_bwd_d128_causal.cu",
        "mha_bwd_d128_causal",
        {"TMA", "MBARRIER", "SETMAXNREG", "BULK"},
        marks=SLOW,
    ),
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_cache(tmp_path_factory)


def evaluate(path: str, task: str, cache: Path) -> EvalResult:
    executor = make_executor("static", cache)
    request = EvalRequest(task=task, target="hopper", source=(REFERENCES / path).read_text())  # type: ignore[arg-type]
    return asyncio.run(executor.evaluate(request, None))


@needs_nvcc
@pytest.mark.parametrize(
    ("path", "task", "families"), HOPPER_REFERENCES, ids=[p.values[0] for p in HOPPER_REFERENCES]
)
def test_reference_builds_without_spills_and_shows_hopper_instructions(
    path: str, task: str, families: set[str], cache: Path
) -> None:
    built_clean_with(evaluate(path, task, cache), "GMMA", families)


def built_clean_with(result: EvalResult, required: str, families: set[str]) -> StaticStage:
    """The static stage of a reference built with no spills and no stack, its task's required family
    present and `families` in its SASS."""
    build, static = result.stages.build, result.stages.static
    assert build.status == Status.passed, build.errors or build.compiler_output
    assert build.resources, "ptxas reported no kernels"
    for kernel in build.resources:
        assert kernel.spill_stores_bytes == 0 and kernel.spill_loads_bytes == 0, kernel
        assert kernel.stack_frame_bytes == 0, kernel
    assert static.status == Status.passed
    assert static.required_family == required and static.required_present
    missing = {f for f in families if static.families.get(f, 0) == 0}
    assert not missing, f"families absent from the SASS: {missing} (have {static.families})"
    return static


# The FP8 attention pair (both products on wgmma e4m3 -> QGMMA). Both files are built (a few seconds
# each): each is its own task's reference, and their register budgets differ (the causal mask).
FP8_ATTENTION_REFERENCES = [
    ("fp8_attention/fp8_mha_fwd_d128.cu", "fp8_mha_with_lse_d128"),
    ("fp8_attention/fp8_mha_fwd_d128_causal.cu", "fp8_mha_with_lse_d128_causal"),
]


@needs_nvcc
@pytest.mark.parametrize(
    ("path", "task"), FP8_ATTENTION_REFERENCES, ids=[p for p, _ in FP8_ATTENTION_REFERENCES]
)
def test_fp8_attention_reference_builds_without_spills_and_shows_qgmma(
    path: str, task: str, cache: Path
) -> None:
    static = built_clean_with(
        evaluate(path, task, cache), "QGMMA", {"QGMMA", "TMA", "MBARRIER", "SETMAXNREG"}
    )
    # Both products on the FP8 pipe: no bf16/f16 wgmma beside the QGMMAs.
    assert static.opcodes.get("HGMMA", 0) == 0, static.opcodes


@needs_nvcc
@pytest.mark.parametrize(
    ("path", "task"),
    # The causal file holds the plain one's code and its mask: the plain build is left to -m slow.
    [pytest.param(*FP8_ATTENTION_REFERENCES[0], marks=pytest.mark.slow), FP8_ATTENTION_REFERENCES[1]],
    ids=[p for p, _ in FP8_ATTENTION_REFERENCES],
)
def test_fp8_attentions_flashattention3_scheme_builds_clean_with_two_fifths_of_the_qgmmas(
    path: str, task: str, cache: Path
) -> None:
    """-DFP8_ATTN_PLAIN=1: one S chain and one P V chain where the default has two and three, so its
    SASS holds two fifths of the default's QGMMAs; no K split, so no byte-mask work in the producer."""
    default = evaluate(path, task, cache).stages.static
    source = "#define FP8_ATTN_PLAIN 1\n" + (REFERENCES / path).read_text()
    executor = make_executor("static", cache)
    request = EvalRequest(task=task, target="hopper", source=source)  # type: ignore[arg-type]
    plain = built_clean_with(
        asyncio.run(executor.evaluate(request, None)), "QGMMA", {"QGMMA", "TMA", "MBARRIER", "SETMAXNREG"}
    )
    assert plain.opcodes.get("HGMMA", 0) == 0, plain.opcodes
    assert plain.opcodes["QGMMA"] * 5 == default.opcodes["QGMMA"] * 2, (plain.opcodes, default.opcodes)


@needs_nvcc
def test_simt_step_of_the_ladder_is_flagged_by_the_static_tier(cache: Path) -> None:
    result = evaluate("gemm/01_simt.cu", "gemm_n7168_k5120", cache)
    assert result.stages.build.status == Status.passed
    assert result.stages.static.status == Status.static_missing_family
    assert result.stages.static.opcodes.get("FFMA", 0) > 0


@pytest.mark.parametrize(
    "plain_path",
    ["attention/mha_fwd_d128.cu", "attention/mha_bwd_d128.cu", "fp8_attention/fp8_mha_fwd_d128.cu"],
)
def test_causal_file_is_the_plain_file_with_the_switch_on(plain_path: str) -> None:
    # Each task needs one self-contained .cu, so the causal kernel is a copy: keep the copies in step.
    plain = (REFERENCES / plain_path).read_text().splitlines()
    causal = (REFERENCES / plain_path.replace(".cu", "_causal.cu")).read_text().splitlines()
    assert len(plain) == len(causal)
    differing = [(a, b) for a, b in zip(plain, causal, strict=True) if a != b]
    assert len(differing) == 1
    assert differing[0][0].startswith("#define ATTN_CAUSAL false")
    assert differing[0][1].startswith("#define ATTN_CAUSAL true")
