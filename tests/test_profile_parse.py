"""The dynamic tier's parser and verdicts on Nsight Compute output recorded on the H200.

tests/data/ncu/*_raw_details.csv are `ncu --import R --page raw --csv --print-units base
--print-metric-instances details` of one call at gemm_n7168_k5120 M=256 (ncu 2025.3.1, H200, driver
580.159.04): our wgmma GEMM (tests/gpu/kernels/wgmma_gemm.cu) and the token-wgmma fault
(tests/gpu/faults/token_wgmma.cu).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ncu_support import FILL

from workbench.evaluate.build.sass import FAMILIES
from workbench.evaluate.gpu.agreement import agreement
from workbench.evaluate.gpu.profile import (
    dynamic_stage,
    ncu_command,
    other_work,
    parse_instances,
    parse_raw_csv,
    without_warm_launch,
)
from workbench.evaluate.gpu.trace_checks import Kernel
from workbench.evaluate.result import DynamicStage

DATA = Path(__file__).parent / "data" / "ncu"
RESULTS = Path(__file__).parent.parent / "benchmarks" / "results"
FAMILY_LISTS = {family: sorted(ops) for family, ops in FAMILIES.items()}
M, N, K = 256, 7168, 5120


def launches(name: str) -> list[dict]:
    return parse_raw_csv((DATA / f"{name}_m256_raw_details.csv").read_text())


def test_per_opcode_instances_parse_with_thousands_separators() -> None:
    cell = "104,791,272 (UMOV: 13,803,496; HGMMA.64x256x16.F32.BF16: 4,587,520; BRA: 7)"
    assert parse_instances(cell) == {"UMOV": 13803496.0, "HGMMA.64x256x16.F32.BF16": 4587520.0, "BRA": 7.0}
    assert parse_instances("0") == {}


def test_real_wgmma_gemm_reports_exactly_the_task_flops_on_the_tensor_pipe() -> None:
    (launch,) = launches("wgmma_gemm")
    assert launch["name"].startswith("wgmma_gemm_kernel(")
    assert launch["tensor_flops"] == 2 * M * N * K
    assert launch["opcodes"]["HGMMA"] == 4_587_520
    assert launch["opcodes"]["UTMALDG"] > 0 and launch["opcodes"]["SYNCS"] > 0
    stage = dynamic_stage([launch], FAMILY_LISTS, "GMMA", 2.0 * M * N * K, "hopper")
    assert stage["status"] == "passed"
    assert stage["required_executed"] and stage["tensor_share"] == 1.0
    assert {"GMMA", "TMA", "MBARRIER", "SETMAXNREG"} <= set(stage["executed_families"])


def test_token_wgmma_executes_but_carries_almost_none_of_the_flops() -> None:
    (launch,) = launches("token_wgmma")
    stage = dynamic_stage([launch], FAMILY_LISTS, "GMMA", 2.0 * M * N * K, "hopper")
    assert stage["required_executed"]
    assert stage["status"] == "low_tensor_share"
    assert stage["tensor_share"] < 0.001
    assert "the math happens elsewhere" in stage["message"]


def test_the_token_wgmmas_simt_work_is_counted_at_exactly_the_tasks_flops() -> None:
    # FFMA thread executions x 2: the SIMT GEMM behind the token wgmma did 2*M*N*K, no more, no less;
    # its address arithmetic (IMAD) is not work.
    (launch,) = launches("token_wgmma")
    assert launch["opcodes"]["IMAD"] > 0 and "IMAD" not in other_work(launch["opcodes"], set())
    assert other_work(launch["opcodes"], set())["FFMA"] == 2 * M * N * K
    stage = dynamic_stage([launch], FAMILY_LISTS, "GMMA", 2.0 * M * N * K, "hopper")
    assert stage["other_work_share"] == pytest.approx(1.0) and stage["status"] == "low_tensor_share"
    # The honest GEMM's few MUFUs: far below the decoy bound.
    (honest,) = launches("wgmma_gemm")
    share = dynamic_stage([honest], FAMILY_LISTS, "GMMA", 2.0 * M * N * K, "hopper")["other_work_share"]
    assert share < 0.001


def test_integer_arithmetic_is_not_counted_as_the_tasks_work() -> None:
    """nvcc issues IMAD for moves, shifts and adds as well as addresses: an honest wgmma GEMM that stages
    its operands element by element ran IMADs at 9.7-11.8 % of the task's FLOPs (constant_memory.cu and four
    more of the honest corpus, refused as decoys on an H100 at 9b34a3d). Beside the real wgmma profile,
    IMADs and IMULs at 40 % of the task's FLOPs leave the verdict passed."""
    (wgmma,) = launches("wgmma_gemm")
    staging = {
        "name": "staging",
        "opcodes": {"IMAD": 0.3 * 2.0 * M * N * K, "IMUL": 0.1 * 2.0 * M * N * K, "LEA": 0.2 * M * N * K},
        "tensor_flops": 0.0,
        "time_ns": 1.0,
    }
    stage = dynamic_stage([wgmma, staging], FAMILY_LISTS, "GMMA", 2.0 * M * N * K, "hopper")
    assert stage["status"] == "passed", stage["message"]
    assert stage["other_work_share"] < 0.001


@pytest.mark.parametrize(
    ("path", "opcodes", "shown"),
    [
        # __fmul_rn then __fadd_rn: a multiply and an add per multiply-add, each 1 FLOP.
        ("split multiply-add", {"FMUL": M * N * K, "FADD": M * N * K}, "FMUL 50%"),
        ("log domain", {"MUFU": M * N * K, "FADD": 2 * M * N * K}, "FADD 100%"),
        ("half2 split", {"HMUL2": M * N * K / 2, "HADD2": M * N * K / 2}, "HMUL2 50%"),
        ("double", {"DMUL": M * N * K, "DADD": M * N * K}, "DMUL 50%"),
        ("dot products", {"IDP": M * N * K / 4}, "IDP 50%"),
        # wgmma of another operand type: int8 or FP8 (four products of split operands) at m64n256k32,
        # 8192 FLOPs per thread, counted at the smallest shape's 256: a lower bound of 12.5 %.
        ("int8 wgmma", {"IGMMA": 4 * 2.0 * M * N * K / 8192}, "IGMMA 12%"),
        ("FP8 wgmma", {"QGMMA": 4 * 2.0 * M * N * K / 8192}, "QGMMA 12%"),
    ],
)
def test_a_decoy_answering_from_any_form_of_multiply_add_is_its_own_failure(
    path: str, opcodes: dict[str, float], shown: str
) -> None:
    """The wgmma GEMM's real profile beside a second launch doing every multiply-add of the task again in
    another form: each is `decoy`, whatever the form."""
    (wgmma,) = launches("wgmma_gemm")
    answer = {"name": "answer", "opcodes": opcodes, "tensor_flops": 0.0, "time_ns": 1.0}
    stage = dynamic_stage([wgmma, answer], FAMILY_LISTS, "GMMA", 2.0 * M * N * K, "hopper")
    assert stage["tensor_share"] == 1.0 and stage["other_work_share"] > 0.1
    assert stage["status"] == "decoy", path
    assert shown in stage["message"] and "must do the work, once" in stage["message"]


def test_recorded_honest_attention_profiles_stay_below_the_decoy_bound() -> None:
    """The attention and GEMM references' per-opcode profiles recorded on the H200 (every counted form
    included): softmax's multiplies, adds and exponentials and the index arithmetic stay near 1 %."""
    recorded = json.loads((RESULTS / "2026-11-29_references_eval_h200.json").read_text())
    for task, result in recorded.items():
        dynamic = result["stages"]["dynamic"]
        launch = {
            "name": task,
            "opcodes": dynamic["executed_opcodes"],
            "tensor_flops": dynamic["tensor_flops"],
            "time_ns": 1.0,
        }
        stage = dynamic_stage([launch], FAMILY_LISTS, "GMMA", dynamic["task_flops"], "hopper")
        assert stage["status"] == "passed", (task, stage["message"])
        assert 0.0 < stage["other_work_share"] < 0.02, (task, stage["other_work_share"])


def test_a_decoy_whose_answer_comes_from_mma_sync_is_its_own_failure() -> None:
    # The wgmma GEMM's real profile, beside a second launch of the same call: an mma.sync m16n8k16 GEMM
    # (128 FLOPs per thread execution) that computes the answer again, counted at 32 per thread.
    (wgmma,) = launches("wgmma_gemm")
    mma_sync = {
        "name": "mma_path",
        "opcodes": {"HMMA": 2.0 * M * N * K / 128},
        "tensor_flops": 0.0,
        "time_ns": 1.0,
    }
    stage = dynamic_stage([wgmma, mma_sync], FAMILY_LISTS, "GMMA", 2.0 * M * N * K, "hopper")
    assert stage["tensor_share"] == 1.0 and stage["other_work_share"] == pytest.approx(0.25, abs=0.001)
    assert stage["status"] == "decoy"
    assert "HMMA 25%" in stage["message"] and "must do the work, once" in stage["message"]
    DynamicStage.model_validate(stage)


def test_matrix_multiplies_count_at_the_shapes_the_candidates_sass_holds() -> None:
    """Counted at the smallest shape there is, the mma.sync decoy above shows 25 %; at the m16n8k16 its
    SASS holds, the whole task again. An int8 wgmma answering at m64n256k32 in four products shows 400 %."""
    (wgmma,) = launches("wgmma_gemm")
    flops = 2.0 * M * N * K
    mma_sync = {"name": "mma_path", "opcodes": {"HMMA": flops / 128}, "tensor_flops": 0.0, "time_ns": 1.0}
    shapes = {"HGMMA": 4096.0, "HMMA": 128.0}
    stage = dynamic_stage([wgmma, mma_sync], FAMILY_LISTS, "GMMA", flops, "hopper", None, None, shapes)
    assert stage["status"] == "decoy" and stage["other_work_share"] == pytest.approx(1.0, abs=0.001)
    int8 = {"name": "int8_path", "opcodes": {"IGMMA": 4 * flops / 8192}, "tensor_flops": 0.0, "time_ns": 1.0}
    stage = dynamic_stage([wgmma, int8], FAMILY_LISTS, "GMMA", flops, "hopper", None, None, {"IGMMA": 8192.0})
    assert stage["status"] == "decoy" and "IGMMA 400%" in stage["message"]
    # A shape never lowers an opcode below its least: a SASS that claims less changes nothing.
    low = dynamic_stage([wgmma, mma_sync], FAMILY_LISTS, "GMMA", flops, "hopper", None, None, {"HMMA": 1.0})
    assert low["other_work_share"] == pytest.approx(0.25, abs=0.001)


def test_a_wgmma_no_thread_executes_is_not_executed() -> None:
    (launch,) = launches("token_wgmma")
    launch["opcodes"].pop("HGMMA")
    launch["tensor_flops"] = 0.0
    stage = dynamic_stage([launch], FAMILY_LISTS, "GMMA", 2.0 * M * N * K, "hopper")
    assert stage["status"] == "dynamic_not_executed" and not stage["required_executed"]


def test_no_profiled_launch_is_not_executed() -> None:
    stage = dynamic_stage([], FAMILY_LISTS, "GMMA", 1.0, "hopper")
    assert stage["status"] == "dynamic_not_executed"


def test_blackwell_has_opcode_proof_without_a_flop_metric() -> None:
    launch = {"name": "k", "opcodes": {"UTCHMMA": 128.0}, "tensor_flops": None, "time_ns": 1.0}
    stage = dynamic_stage([launch], FAMILY_LISTS, "TCGEN05_MMA", 1e9, "blackwell")
    assert stage["status"] == "passed" and stage["tensor_share"] is None
    assert "no tensor-FLOP metric" in stage["message"]


def test_the_ncu_command_profiles_only_the_profiler_range_into_a_log_file() -> None:
    command = ncu_command("ncu", "/tmp/run/ncu.log", "hopper", ["python", "x.py"])
    assert command[command.index("--clock-control") + 1] == "none"
    assert command[command.index("--profile-from-start") + 1] == "off"
    assert command[command.index("--print-kernel-base") + 1] == "mangled"
    assert command[command.index("--log-file") + 1] == "/tmp/run/ncu.log"
    assert command[command.index("--page") + 1] == "raw" and "--csv" in command
    assert "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum" in command[command.index("--metrics") + 1]
    assert command[-2:] == ["python", "x.py"]
    blackwell = ncu_command("ncu", "/tmp/run/ncu.log", "blackwell", ["python", "x.py"])
    assert "hgmma" not in blackwell[blackwell.index("--metrics") + 1]


def test_kernels_the_candidate_does_not_define_never_count() -> None:
    (launch,) = launches("wgmma_gemm")
    foreign = {**launch, "name": "nvjet_sm90_tst_256x128_64x4_2x1_v_bz_coopA_TNT"}
    own = {launch["name"]}
    stage = dynamic_stage([launch, foreign], FAMILY_LISTS, "GMMA", 2.0 * M * N * K, "hopper", own)
    assert (
        stage["status"] == "passed" and stage["tensor_share"] == 1.0
    )  # not 2.0: cuBLAS's work is not counted
    assert stage["ignored_kernels"] == [foreign["name"]]
    assert "not its own left out" in stage["message"]
    alone = dynamic_stage([foreign], FAMILY_LISTS, "GMMA", 2.0 * M * N * K, "hopper", own)
    assert alone["status"] == "dynamic_not_executed" and alone["tensor_flops"] is None
    assert "it does not define: nvjet_sm90" in alone["message"]


def test_the_warm_ranges_launch_leaves_the_profiled_call_only_where_it_leads() -> None:
    (launch,) = launches("wgmma_gemm")
    warm = {**launch, "name": FILL, "opcodes": {}, "tensor_flops": None}
    assert without_warm_launch([warm, launch]) == [launch]
    assert without_warm_launch([warm]) == []  # the candidate's call profiled nothing: no launch left
    # Only the first launch can be the warm range's: a fill later in the call, or a first launch of
    # another name, stays (one the candidate defines counts; one it does not is left out as foreign).
    assert without_warm_launch([launch, warm]) == [launch, warm]
    assert without_warm_launch([launch]) == [launch] and without_warm_launch([]) == []


def test_launch_statistics_are_read_from_cells_that_print_their_instances() -> None:
    # ncu prints `384 (0: 384)` for launch__ metrics under --print-metric-instances details.
    (tma,) = launches("wgmma_gemm")
    assert tma["launch"] == {
        "grid": 56, "block": 384, "registers": 168, "dynamic_smem": 197696, "static_smem": 0, "shared_config": 200704
    }  # fmt: skip
    (simt,) = launches("token_wgmma")
    assert simt["launch"] == {
        "grid": 448, "block": 256, "registers": 64, "dynamic_smem": 0, "static_smem": 8704, "shared_config": 102400
    }  # fmt: skip


def test_a_timed_call_launched_with_another_configuration_disagrees_with_the_real_profile() -> None:
    (launch,) = launches("wgmma_gemm")
    own = {launch["name"]}

    def timed(grid: int, dynamic_smem: int) -> list[Kernel]:
        row = [launch["name"], 0, 55_000, 1, 7, [grid, 1, 1], [384, 1, 1], 168, 0, dynamic_smem]
        return [Kernel.from_raw(row)]

    assert agreement([launch], [timed(56, 197696)], own) is None
    for grid, smem in ((112, 197696), (56, 98304)):
        disagreement = agreement([launch], [timed(grid, smem)], own)
        assert disagreement is not None and "not the kernels that were timed" in disagreement[0]


def test_theoretical_occupancy_of_each_launch_is_what_ncu_computed() -> None:
    # ncu's own figures in the same reports: sm__maximum_warps_avg_per_active_cycle 12 (TMA GEMM,
    # launch__occupancy_limit_registers 1 = shared_mem 1) and 32 (SIMT GEMM, registers 4, shared 10
    # under the 100 KiB carveout the driver chose).
    stage = dynamic_stage(launches("wgmma_gemm"), FAMILY_LISTS, "GMMA", 2.0 * M * N * K, "hopper")
    (tma,) = stage["launches"]
    assert tma["count"] == 1 and tma["dynamic_smem"] == 197696 and tma["shared_config"] == 200704
    assert (tma["blocks_per_sm"], tma["warps_per_sm"], tma["max_warps"]) == (1, 12, 64)
    assert tma["limiter"] == "shared memory"
    (simt,) = dynamic_stage(launches("token_wgmma"), FAMILY_LISTS, "GMMA", 1.0, "hopper")["launches"]
    assert (simt["blocks_per_sm"], simt["warps_per_sm"], simt["limiter"]) == (4, 32, "registers")


def test_launches_of_one_configuration_are_counted_once() -> None:
    (launch,) = launches("wgmma_gemm")
    other = {**launch, "launch": {**launch["launch"], "grid": 112}}
    stage = dynamic_stage([launch, launch, other], FAMILY_LISTS, "GMMA", 6.0 * M * N * K, "hopper")
    assert sorted((entry["grid"], entry["count"]) for entry in stage["launches"]) == [(56, 2), (112, 1)]
    assert DynamicStage.model_validate({"status": "passed", "launches": stage["launches"]}).launches[0].kernel
