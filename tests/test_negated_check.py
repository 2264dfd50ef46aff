"""What decides that a candidate's answer is checked against its negated build (`gpu/negated_check.py`),
and what the executors hand the worker for it (`gpu_spec.with_build`)."""

from __future__ import annotations

from pathlib import Path

from workbench.evaluate.build.sass import FAMILIES
from workbench.evaluate.gpu.negated_check import CHECK_FROM, instructions_per_flop, without_twin
from workbench.evaluate.gpu.profile import dynamic_stage, parse_raw_csv
from workbench.evaluate.gpu_spec import with_build
from workbench.evaluate.render import dynamic_lines
from workbench.evaluate.result import BuildStage, DynamicStage, StaticStage, Status

FAMILY_LISTS = {family: sorted(ops) for family, ops in FAMILIES.items()}
M, N, K = 256, 7168, 5120  # the recorded profile's workload (tests/data/ncu, test_profile_parse.py)


def test_a_tma_fed_wgmma_gemm_is_below_the_check_and_an_integer_answer_above_it() -> None:
    """The wgmma GEMM's profile recorded on the H200 takes 0.005 instructions per FLOP beside its wgmma;
    the same with one IMAD per multiply-add of the task beside it (a fixed-point answer), 0.5 more."""
    flops = 2.0 * M * N * K
    (wgmma,) = parse_raw_csv(
        (Path(__file__).parent / "data" / "ncu" / "wgmma_gemm_m256_raw_details.csv").read_text()
    )
    stage = dynamic_stage([wgmma], FAMILY_LISTS, "GMMA", flops, "hopper")
    honest = instructions_per_flop(stage, FAMILY_LISTS["GMMA"])
    assert honest is not None and 0.0 < honest < CHECK_FROM
    integer = {"name": "fixed", "opcodes": {"IMAD": flops / 2}, "tensor_flops": 0.0, "time_ns": 1.0}
    decoy = dynamic_stage([wgmma, integer], FAMILY_LISTS, "GMMA", flops, "hopper")
    assert decoy["status"] == "passed"  # no counter credits the integer work to the task
    assert instructions_per_flop(decoy, FAMILY_LISTS["GMMA"]) == honest + 0.5
    assert instructions_per_flop({"task_flops": None}, FAMILY_LISTS["GMMA"]) is None


def test_the_worker_gets_the_negated_library_or_why_there_is_none() -> None:
    build = BuildStage(status=Status.passed, negated_library_path="/cache/k/negated/kernel.so")
    static = StaticStage(status=Status.passed, mma_flops_per_thread={"HMMA": 128.0})
    spec = with_build({"task": "t"}, build, static)
    assert spec == {
        "task": "t",
        "negated_library": "/cache/k/negated/kernel.so",
        "negated_note": "",
        "negated_hidden": False,
        "mma_flops_per_thread": {"HMMA": 128.0},
    }
    none = BuildStage(status=Status.passed, negated_note="its PTX holds no floating-point wgmma to negate")
    assert with_build({}, none, StaticStage())["negated_note"].startswith("its PTX holds no")


def test_the_verdict_says_what_the_negated_build_showed() -> None:
    shown = DynamicStage(status=Status.passed, instructions_per_flop=0.34, negated_passed=False)
    assert "0.34 instructions per FLOP beside the required family" in "\n".join(dynamic_lines(shown))
    assert "its answer was wrong: it depends on them" in "\n".join(dynamic_lines(shown))
    decoy = DynamicStage(status=Status.decoy, instructions_per_flop=0.6, negated_passed=True)
    assert "still right: it does not depend on them" in "\n".join(dynamic_lines(decoy))
    assert not any("negated" in line for line in dynamic_lines(DynamicStage(status=Status.passed)))


def test_products_hidden_from_the_negation_are_a_decoy_and_a_tool_that_failed_is_said() -> None:
    hidden = {"negated_note": "2 of its 8 HGMMA/QGMMA still run un-negated", "negated_hidden": True}
    decided = without_twin(hidden, 0.4, "passed")
    assert decided["status"] == Status.decoy
    assert decided["message"] == (
        "its answer's dependence on its wgmma cannot be checked (0.40 instructions per FLOP beside them): "
        "2 of its 8 HGMMA/QGMMA still run un-negated"
    )
    tool = {"negated_note": "ptxas did not finish the negated PTX within 300 s", "negated_hidden": False}
    assert without_twin(tool, 0.4, "passed") == {
        "message": "passed; 0.40 instructions per FLOP, and its answer's dependence on its wgmma not checked: "
        "ptxas did not finish the negated PTX within 300 s"
    }
