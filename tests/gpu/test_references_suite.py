"""On a Hopper GPU: the suite's reference kernels through every tier of the `local` executor, at their
task's headline workload, against their task's baseline.

Run on the GPU host from the checkout:
`python -m pytest -m gpu -n 0 -s tests/gpu/test_references_suite.py` (-s prints each verdict: the
speedups are the measurement). FlashInfer's wrappers are the decode baseline only after
`python -m workbench.evaluate.gpu.flashinfer_baseline --warm-batch`; without them, and on a torch whose
scaled_mm refuses block scales, the verdict's timing notes say which baseline was timed instead.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path

import pytest

from workbench.evaluate.gpu.ncu_metrics import listed_metrics
from workbench.evaluate.gpu.profile import (
    FAMILY_TENSOR_METRIC,
    MAX_ORDINARY_LOAD_SHARE,
    ORDINARY_LOAD_METRICS,
    ordinary_load_metrics,
)
from workbench.evaluate.local_executor import LocalExecutor
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import EvalResult, Status
from workbench.tasks import resolve_task

pytestmark = pytest.mark.gpu

REFERENCES = Path(__file__).resolve().parent.parent.parent / "references"


def _local(path: str, task: str, tmp_path: Path, defines: str = "") -> EvalResult:
    """`defines`: lines put before the file (a reference's build options)."""
    executor = LocalExecutor(tmp_path / "builds")
    source = defines + (REFERENCES / path).read_text()

    async def go() -> EvalResult:
        try:
            return await executor.evaluate(EvalRequest(task=task, target="hopper", source=source))
        finally:
            await executor.close()

    result = asyncio.run(go())
    print(result.model_dump_json(indent=1, exclude={"stages": {"static": {"opcodes", "kernels"}}})[:8000])
    # The JSON above is cut where a task's trials are long: the measurement, whole, on its own line.
    print(f"timing: {result.stages.timing.message}")
    return result


def test_the_fp8_tensor_metric_is_one_ncu_knows_on_hopper() -> None:
    ncu = shutil.which("ncu")
    if ncu is None:
        pytest.skip("ncu is not installed")
    listed = subprocess.run(
        [ncu, "--query-metrics", "--chip", "gh100"], check=True, capture_output=True, text=True, timeout=120
    )
    metric = FAMILY_TENSOR_METRIC[("hopper", "QGMMA")].removesuffix(".sum")
    assert metric in listed.stdout, listed.stdout[-2000:]


def test_ncu_lists_the_ordinary_load_bytes_a_memory_bound_task_is_judged_by() -> None:
    ncu = shutil.which("ncu")
    if ncu is None:
        pytest.skip("ncu is not installed")
    listed = listed_metrics(ncu, "hopper")
    assert ordinary_load_metrics("ASYNC_COPY", listed)[0] == f"{ORDINARY_LOAD_METRICS[0]}.sum", sorted(
        name for name in listed if "lsu_mem_global_op_ld" in name
    )


def test_fp8_gemm_reference_passes_every_tier_with_qgmma_on_the_fp8_pipe(tmp_path: Path) -> None:
    result = _local("fp8_gemm/fp8_gemm_1d2d_ws.cu", "fp8_gemm_nt_1d2d_n4096_k7168", tmp_path)
    assert result.status == Status.passed, result.message
    assert result.stages.static.required_family == "QGMMA"
    assert result.stages.dynamic.executed_families.get("QGMMA", 0) > 0
    assert result.stages.dynamic.tensor_share == pytest.approx(1.0, rel=0.01)
    timing = result.stages.timing
    assert timing.speedup is not None and not timing.faster_than_light
    # Against cuBLAS's block-scaled FP8 GEMM, not the torch reference it falls back to (the speedup
    # printed above is the measurement; the issue asks >= 0.8).
    assert timing.baselines[0].name == "cuBLAS block-scaled FP8 (torch scaled_mm)", timing.message


# Tensor FLOPs the FP8 attention reference does per task FLOP, by construction
# (references/fp8_attention/fp8_mha_fwd_d128.cu), by build: by default S = Q K^T as two QGMMA chains (K
# split into its small and its spike entries) and P V as three (P as three e4m3 terms), against one
# chain each in the task's count: (2 + 3) / 2; with FP8_ATTN_PLAIN (FlashAttention-3's scheme), one
# chain each. The causal kernel also multiplies the masked half of each 128 x 128 diagonal block.
FP8_ATTENTION_SCHEMES = {"": (2 + 3) / 2, "#define FP8_ATTN_PLAIN 1\n": 1.0}


def fp8_attention_expected_share(task: str, causal: bool, per_task_flop: float) -> float:
    """The tensor share the FP8 attention reference must show at its task's headline workload, for a
    build doing `per_task_flop` tensor FLOPs per task FLOP."""
    seq = int(resolve_task(task).workload().axes["L"])
    if not causal:
        return per_task_flop
    blocks = seq // 128  # query block r computes r + 1 whole key blocks of 128 x 128 pairs
    pairs_done = blocks * (blocks + 1) // 2 * 128 * 128
    return per_task_flop * pairs_done / (seq * (seq + 1) / 2)


@pytest.mark.parametrize("defines", list(FP8_ATTENTION_SCHEMES), ids=["split", "fa3_scheme"])
@pytest.mark.parametrize(
    ("path", "task", "causal"),
    [
        ("fp8_attention/fp8_mha_fwd_d128.cu", "fp8_mha_with_lse_d128", False),
        ("fp8_attention/fp8_mha_fwd_d128_causal.cu", "fp8_mha_with_lse_d128_causal", True),
    ],
    ids=["plain", "causal"],
)
def test_fp8_attention_reference_passes_every_tier_with_both_products_on_qgmma(
    path: str, task: str, causal: bool, defines: str, tmp_path: Path
) -> None:
    """Each build of the reference (the speedups printed side by side are the measurement)."""
    result = _local(path, task, tmp_path, defines)
    assert result.status == Status.passed, result.message
    assert result.stages.static.required_family == "QGMMA"
    assert result.stages.dynamic.executed_families.get("QGMMA", 0) > 0
    # The share is fixed by the kernel's structure (2.5 plain, ~2.58 causal at L = 4096 by default); 2 %
    # leaves room for how ncu counts, not for a missing or extra chain (each one moves it by 0.5).
    assert result.stages.dynamic.tensor_share == pytest.approx(
        fp8_attention_expected_share(task, causal, FP8_ATTENTION_SCHEMES[defines]), rel=0.02
    )
    timing = result.stages.timing
    assert timing.speedup is not None and not timing.faster_than_light


def test_paged_decode_reference_passes_every_tier_with_its_kv_through_bulk_copies(tmp_path: Path) -> None:
    result = _local("gqa/paged_decode_bulk.cu", "gqa_paged_decode_h24_kv8_d128_ps1", tmp_path)
    assert result.status == Status.passed, result.message
    assert result.stages.static.required_family == "ASYNC_COPY"
    assert result.stages.dynamic.executed_families.get("ASYNC_COPY", 0) > 0
    assert result.stages.dynamic.tensor_share is None
    # Its ordinary loads are the page indices and q: a few percent of the bytes by count.
    share = result.stages.dynamic.ordinary_load_share
    assert share is not None and share < 0.1, result.stages.dynamic.message
    timing = result.stages.timing
    assert timing.speedup is not None and not timing.faster_than_light


def test_a_decode_streaming_its_kv_through_ldg_beside_a_token_bulk_copy_is_a_decoy(tmp_path: Path) -> None:
    hostile = Path(__file__).resolve().parent / "hostile" / "decode_token_copy.cu"
    result = _local(str(hostile), "gqa_paged_decode_h24_kv8_d128_ps1", tmp_path)
    assert result.correct, result.message
    dynamic = result.stages.dynamic
    assert dynamic.executed_families.get("ASYNC_COPY", 0) > 0
    assert dynamic.status == Status.decoy, dynamic.message
    assert dynamic.ordinary_load_share is not None and dynamic.ordinary_load_share > 0.9


@pytest.mark.parametrize(
    ("path", "task"),
    [
        ("gdn/gdn_decode_bulk.cu", "gdn_decode_qk4_v8_d128_k_last"),
        ("gdn/gdn_decode_bulk.cu", "gdn_decode_qk8_v16_d128_k_last"),
        ("gdn/gdn_mtp_bulk.cu", "gdn_mtp_qk4_v8_d128_k_last"),
    ],
)
def test_gdn_references_pass_every_tier_with_the_state_through_a_bulk_copy(
    path: str, task: str, tmp_path: Path
) -> None:
    result = _local(path, task, tmp_path)
    assert result.status == Status.passed, result.message
    assert result.stages.dynamic.executed_families.get("ASYNC_COPY", 0) > 0
    share = result.stages.dynamic.ordinary_load_share  # q, k, gates, and v a row per warp
    assert share is not None and share < MAX_ORDINARY_LOAD_SHARE / 2, result.stages.dynamic.message
    timing = result.stages.timing
    assert timing.speedup is not None and not timing.faster_than_light


@pytest.mark.parametrize(
    ("path", "task"),
    [
        ("gqa/paged_prefill_causal.cu", "gqa_paged_prefill_causal_h24_kv8_d128_ps1"),
        ("gqa/ragged_prefill_causal.cu", "gqa_ragged_prefill_causal_h32_kv4_d128"),
    ],
)
def test_prefill_references_pass_every_tier_with_the_bf16_tensor_pipe(
    path: str, task: str, tmp_path: Path
) -> None:
    result = _local(path, task, tmp_path)
    assert result.status == Status.passed, result.message
    assert result.stages.static.required_family == "GMMA"
    assert result.stages.dynamic.tensor_share is not None and result.stages.dynamic.tensor_share >= 0.9
    timing = result.stages.timing
    assert timing.speedup is not None and not timing.faster_than_light
