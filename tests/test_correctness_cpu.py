"""Tier 3's comparison on CPU tensors: the element rule, NaN/Inf, shape/dtype, changed inputs (the judge
runs the same code on CUDA; whole correctness runs are in test_judging_pipeline.py)."""

from __future__ import annotations

import math

import pytest
import torch

from workbench.evaluate.gpu.correctness import changed_inputs, compare_output, output_tolerance, unravel
from workbench.evaluate.gpu_spec import gpu_spec
from workbench.tasks import Catalogue, get_target


def cpu_gemm_spec() -> dict:
    task = Catalogue.load().get("gemm_n128_k2048")
    spec = gpu_spec(task, task.smallest_workload(), get_target("hopper"))
    spec["device"] = "cpu"
    return spec


def test_an_element_fails_only_when_both_abs_and_rel_errors_exceed_tolerance() -> None:
    expected = torch.tensor([1000.0, 0.001, 1.0, 5.0])
    actual = torch.tensor([1005.0, 0.002, 1.0, 5.5])  # big abs/small rel; small abs/big rel; exact; both big
    status, check = compare_output("C", actual, expected, 1e-2, 1e-2)
    assert status == "incorrect_numerical"
    assert check["matched_ratio"] == 0.75
    assert check["worst_index"] == [3]
    assert check["worst_value"] == 5.5 and check["worst_expected"] == 5.0
    assert check["max_abs_error"] == 5.0
    assert abs(check["max_rel_error"] - 0.1) < 1e-6  # only where abs > atol: 0.001 vs 0.002 is not judged
    assert "1 of 4 elements" in check["reason"]


def test_nan_is_reported_as_unwritten_and_counts_as_the_worst() -> None:
    expected = torch.ones(2, 3, dtype=torch.bfloat16)
    actual = expected.clone()
    actual[1, 2] = float("nan")
    status, check = compare_output("C", actual, expected, 1e-2, 1e-2)
    assert status == "incorrect_numerical"
    assert check["worst_index"] == [1, 2] and check["worst_value"] is None
    assert "NaN" in check["reason"] and "unwritten" in check["reason"]


def test_inf_where_the_reference_is_finite_fails() -> None:
    status, check = compare_output(
        "C", torch.tensor([float("inf"), 1.0]), torch.tensor([2.0, 1.0]), 1e-2, 1e-2
    )
    assert status == "incorrect_numerical" and "Inf" in check["reason"]


def test_shape_and_dtype_mismatches_have_their_own_status() -> None:
    assert compare_output("C", torch.zeros(2, 3), torch.zeros(3, 2), 1e-2, 1e-2)[0] == "incorrect_shape"
    status, check = compare_output("C", torch.zeros(2), torch.zeros(2, dtype=torch.float64), 1e-2, 1e-2)
    assert status == "incorrect_dtype" and "float32" in check["reason"]


def test_a_passing_output_reports_its_errors() -> None:
    expected = torch.randn(64, 64)
    status, check = compare_output("C", expected + 1e-4, expected, 1e-2, 1e-2)
    assert status == "passed" and check["passed"] and check["matched_ratio"] == 1.0
    assert 0 < check["max_abs_error"] < 2e-4


def test_changed_inputs_compares_bytes() -> None:
    a, b = torch.tensor([0.0, 1.0]), torch.tensor([2.0])
    assert changed_inputs(["A", "B"], [a.clone(), b.clone()], [a, b]) == []
    a[0] = -0.0  # equal as a number, different as bytes
    assert changed_inputs(["A", "B"], [torch.tensor([0.0, 1.0]), b.clone()], [a, b]) == ["A"]


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4, 5), (1, 1, 9)])
def test_unravel_matches_torch_for_every_position(shape: tuple[int, ...]) -> None:
    total = math.prod(shape)
    for flat in range(total):
        expected = [int(i) for i in torch.unravel_index(torch.tensor(flat), shape)]
        assert unravel(flat, shape) == expected


def test_an_output_with_its_own_tolerance_keeps_it_and_the_others_take_the_tasks() -> None:
    catalogue = Catalogue.load()
    task = catalogue.get("fp8_mha_with_lse_d128")
    spec = gpu_spec(task, task.smallest_workload(), get_target("hopper"), catalogue)
    assert output_tolerance(spec, "O") == (0.1, 0.125)
    assert output_tolerance(spec, "LSE") == (spec["atol"], spec["rtol"]) == (0.01, 0.01)


def test_an_outputs_error_is_also_given_as_a_share_of_the_answer() -> None:
    """What the negated build's check compares: a sign-flipped answer's error is twice the answer, a
    right one's none (every element finite)."""
    answer = torch.randn(64, 32, generator=torch.Generator().manual_seed(3))
    assert compare_output("C", answer.clone(), answer, 1e-2, 1e-2)[1]["rms_error_share"] == 0.0
    flipped = compare_output("C", -answer, answer, 1e-2, 1e-2)[1]
    assert flipped["passed"] is False and flipped["rms_error_share"] == pytest.approx(2.0)
    nudged = compare_output("C", answer + 1e-3 * answer, answer, 1e-2, 1e-2)[1]
    assert nudged["passed"] and nudged["rms_error_share"] == pytest.approx(1e-3)
