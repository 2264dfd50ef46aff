"""A task's own required family (QGMMA, UTCQMMA, ASYNC_COPY) in the static and dynamic tiers.

The narrower families sit in the same table as the target's; they count only when a task requires
them, so the earlier tasks' verdicts and the ncu command they run are what they were.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from workbench.evaluate.build.sass import FAMILIES, NARROW_FAMILIES, family_counts, family_of, static_stage
from workbench.evaluate.gpu.profile import (
    MAX_OTHER_SHARE,
    PER_OPCODE_METRIC,
    TENSOR_FLOPS_METRIC,
    dynamic_stage,
    ncu_command,
    parse_raw_csv,
)
from workbench.evaluate.result import BuildStage, Status
from workbench.tasks import Catalogue

FAMILY_LISTS = {family: sorted(ops) for family, ops in FAMILIES.items()}
FP8_METRIC = "sm__ops_path_tensor_src_fp8.sum"
# A Hopper FP8 GEMM's SASS, as cuobjdump prints it (opcodes of a wgmma e4m3 kernel with TMA loads).
FP8_SASS = """
        Function : fp8_gemm_kernel
        /*0100*/                   UTMALDG.2D [UR8], [UR14] ;
        /*0110*/                   SYNCS.ARRIVE.TRANS64.RED.A1T0 RZ, [UR4+0x10], RZ ;
        /*0120*/                   QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR4], R24, gsb0 ;
        /*0130*/                   QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR8], R24, gsb0 ;
        /*0140*/                   EXIT ;
"""


def static_of(sass: str, tmp_path: Path, task: str, target: str = "hopper"):
    cubin = tmp_path / "kernel.cubin"
    cubin.write_bytes(b"")
    (tmp_path / "kernel.sass").write_text(sass)  # read instead of disassembling: the cache's file
    build = BuildStage(status=Status.passed, cubin_path=str(cubin))
    return asyncio.run(static_stage(build, Catalogue.load().get(task).target(target)))


def test_narrow_families_never_take_an_opcode_from_the_targets_families() -> None:
    assert NARROW_FAMILIES == {"QGMMA", "UTCQMMA", "ASYNC_COPY"}
    assert family_of("QGMMA") == "GMMA" and family_of("UTCQMMA") == "TCGEN05_MMA"
    assert family_of("UTMALDG") == "TMA" and family_of("UBLKCP") == "BULK"
    opcodes = {"QGMMA": 4, "UTMALDG": 2, "UBLKCP": 1}
    assert family_counts(opcodes) == {"BULK": 1, "GMMA": 4, "TMA": 2}
    assert family_counts(opcodes, "QGMMA") == {"BULK": 1, "GMMA": 4, "QGMMA": 4, "TMA": 2}
    assert family_counts(opcodes, "ASYNC_COPY")["ASYNC_COPY"] == 3
    assert "UTCQMMA" not in family_counts(opcodes, "UTCQMMA")  # a required family absent is not listed


def test_fp8_gemm_passes_static_with_qgmma_and_bf16_gemm_is_unchanged(tmp_path: Path) -> None:
    fp8 = static_of(FP8_SASS, tmp_path, "fp8_gemm_nt_1d2d_n4096_k7168")
    assert fp8.status == Status.passed and fp8.required_family == "QGMMA"
    assert fp8.families == {"GMMA": 2, "MBARRIER": 1, "QGMMA": 2, "TMA": 1}
    legacy = static_of(FP8_SASS, tmp_path, "gemm_n7168_k5120")
    assert legacy.required_family == "GMMA" and legacy.families == {"GMMA": 2, "MBARRIER": 1, "TMA": 1}


def test_an_fp8_task_upcast_to_bf16_hgmma_fails_static_naming_what_it_has(tmp_path: Path) -> None:
    stage = static_of(FP8_SASS.replace("QGMMA.64x128x32.F32.E4M3.E4M3", "HGMMA.64x128x16.F32.BF16"), tmp_path,
                      "fp8_gemm_nt_1d2d_n4096_k7168")  # fmt: skip
    assert stage.status == Status.static_missing_family
    assert stage.message.startswith(
        "no QGMMA instruction (QGMMA, from wgmma.mma_async with e4m3/e5m2 operands)"
    )
    assert "HGMMA x2 (wgmma.mma_async)" in stage.message


def test_decode_needs_a_bulk_or_tensor_copy(tmp_path: Path) -> None:
    plain = "        Function : k\n        /*0100*/                   LDG.E.128 R4, desc[UR4][R2.64] ;\n"
    assert (
        static_of(plain, tmp_path, "gqa_paged_decode_h24_kv8_d128_ps1").status == Status.static_missing_family
    )
    bulk = plain.replace("LDG.E.128 R4, desc[UR4][R2.64]", "UBLKCP.S.G [UR8], [UR10], UR12")
    for target in ("hopper", "blackwell"):
        stage = static_of(bulk, tmp_path, "gdn_decode_qk4_v8_d128_k_last", target)
        assert stage.status == Status.passed and stage.families["ASYNC_COPY"] == 1


def launch(opcodes: dict[str, float], flops: float | None, metric: str | None) -> dict:
    return {"name": "k", "opcodes": opcodes, "tensor_flops": flops, "tensor_metric": metric, "time_ns": 1.0}


def test_dynamic_tier_counts_qgmma_and_its_share_on_the_fp8_pipe() -> None:
    task_flops = 2.0 * 4096 * 4096 * 7168
    stage = dynamic_stage(
        [launch({"QGMMA": 512.0}, task_flops, FP8_METRIC)], FAMILY_LISTS, "QGMMA", task_flops, "hopper"
    )
    assert stage["status"] == "passed" and stage["tensor_share"] == 1.0
    assert stage["executed_families"] == {"GMMA": 512, "QGMMA": 512}
    token = dynamic_stage(
        [launch({"QGMMA": 4.0}, 1e6, FP8_METRIC)], FAMILY_LISTS, "QGMMA", task_flops, "hopper"
    )
    assert token["status"] == "low_tensor_share"
    # A bf16 count is no share of FP8 work: the metric that ran must be the family's.
    wrong = dynamic_stage([launch({"QGMMA": 512.0}, task_flops, TENSOR_FLOPS_METRIC["hopper"])], FAMILY_LISTS,
                          "QGMMA", task_flops, "hopper")  # fmt: skip
    assert wrong["tensor_share"] is None and FP8_METRIC in wrong["message"]
    upcast = dynamic_stage(
        [launch({"HGMMA": 512.0}, task_flops, None)], FAMILY_LISTS, "QGMMA", task_flops, "hopper"
    )
    assert upcast["status"] == "dynamic_not_executed" and "QGMMA" in upcast["message"]


def test_attention_softmax_is_allowed_per_score_so_a_small_head_dimension_is_not_a_decoy() -> None:
    """FP8 attention at head dimension 64: a softmax spending 30 FLOPs per score (the reference spends 20)
    is 11.7 % of the task's FLOPs, over the flat bound but within the per-score allowance; a path that
    computes P V again in FFMAs is still a decoy."""
    task = Catalogue.load().get("fp8_mha_with_lse_d64")
    workload = task.workload()
    flops, scores = task.flops(workload), task.scores(workload)
    tensor = {"QGMMA": flops / 8192}
    # Per score: 4 FFMA (8 FLOPs), 8 FADD, 8 FMUL, 2 HADD2 (4), 2 MUFU.
    softmax = {"FFMA": 4 * scores, "FADD": 8 * scores, "FMUL": 8 * scores, "HADD2": 2 * scores, "MUFU": 2 * scores}
    honest = [launch({**tensor, **softmax}, flops, FP8_METRIC)]
    stage = dynamic_stage(honest, FAMILY_LISTS, "QGMMA", flops, "hopper", scores=scores)
    assert stage["status"] == "passed" and stage["other_work_share"] > MAX_OTHER_SHARE
    flat = dynamic_stage(honest, FAMILY_LISTS, "QGMMA", flops, "hopper")
    assert flat["status"] == "decoy"
    # P V again: 2 * 64 FLOPs per score, one FFMA (2 FLOPs) per thread each.
    again = {**softmax, "FFMA": softmax["FFMA"] + 64 * scores}
    decoy = dynamic_stage(
        [launch({**tensor, **again}, flops, FP8_METRIC)], FAMILY_LISTS, "QGMMA", flops, "hopper", scores=scores
    )
    assert decoy["status"] == "decoy"
    assert "at most 35% allowed, 10% and 64 FLOPs per query-key score for the softmax" in decoy["message"]


def test_a_memory_bound_family_is_proven_by_execution_and_asked_no_flop_share() -> None:
    stage = dynamic_stage([launch({"UBLKCP": 64.0, "FFMA": 1e6}, 0.0, TENSOR_FLOPS_METRIC["hopper"])], FAMILY_LISTS,
                          "ASYNC_COPY", 8e8, "hopper")  # fmt: skip
    assert stage["status"] == "passed" and stage["tensor_share"] is None
    assert stage["executed_families"]["ASYNC_COPY"] == 64 and "memory-bound" in stage["message"]


def test_ncu_metric_follows_the_required_family_and_is_unchanged_for_the_rest() -> None:
    base = ncu_command("ncu", "/tmp/run/ncu.log", "hopper", ["python", "x.py"])
    assert ncu_command("ncu", "/tmp/run/ncu.log", "hopper", ["python", "x.py"], required="GMMA") == base
    fp8 = ncu_command("ncu", "/tmp/run/ncu.log", "hopper", ["python", "x.py"], required="QGMMA")
    assert fp8[fp8.index("--metrics") + 1].split(",")[-1] == FP8_METRIC
    copy = ncu_command("ncu", "/tmp/run/ncu.log", "hopper", ["python", "x.py"], required="ASYNC_COPY")
    assert copy[copy.index("--metrics") + 1].split(",") == [PER_OPCODE_METRIC, "gpu__time_duration.sum"]


def test_the_fp8_metric_is_read_from_ncus_page() -> None:
    page = (
        f'"ID","Kernel Name","{PER_OPCODE_METRIC}","{FP8_METRIC}"\n'
        '"","","inst","inst"\n'
        '"0","fp8_gemm_kernel","4,096 (QGMMA: 1,024; UTMALDG: 32)","240,518,168,576"\n'
    )
    (parsed,) = parse_raw_csv(page)
    assert parsed["tensor_flops"] == 240_518_168_576 and parsed["tensor_metric"] == FP8_METRIC
    assert parsed["opcodes"]["QGMMA"] == 1024
