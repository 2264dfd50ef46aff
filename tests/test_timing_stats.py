"""Timing arithmetic that needs no GPU: the summary statistics, speed of light, the message."""

from __future__ import annotations

import pytest
import torch

from workbench.evaluate.gpu_spec import gpu_spec, profile_workload
from workbench.evaluate.timing import (
    MAX_ITERATIONS,
    make_baselines,
    speed_of_light_ms,
    summarize,
    timed_iterations,
    timing_message,
)
from workbench.tasks import Catalogue, get_target


def test_summary_has_median_quartiles_and_extremes() -> None:
    stats = summarize("candidate", [5.0, 1.0, 3.0, 2.0, 4.0], ["k2", "k1", "k1"])
    assert stats["median_ms"] == 3.0 and stats["min_ms"] == 1.0 and stats["max_ms"] == 5.0
    assert stats["p25_ms"] == 2.0 and stats["p75_ms"] == 4.0
    assert stats["iterations"] == 5 and stats["kernels"] == ["k1", "k2"]


def test_speed_of_light_is_the_larger_of_compute_and_memory_time() -> None:
    ceilings = {"tensor_tflops": 800.0, "bandwidth_tbps": 4.0}
    assert speed_of_light_ms(8e11, 4e6, ceilings) == pytest.approx(1.0)  # compute-bound: 1 ms vs 0.001 ms
    assert speed_of_light_ms(8e5, 4e9, ceilings) == pytest.approx(1.0)  # memory-bound
    assert speed_of_light_ms(None, None, ceilings) is None


def test_the_message_flags_a_result_faster_than_light() -> None:
    stage = {
        "candidate": summarize("candidate", [0.5, 0.5, 0.5]),
        "baselines": [summarize("cuBLAS (torch.matmul)", [1.0, 1.0, 1.0])],
        "speedup": 2.0,
        "tflops": 1600.0,
        "speed_of_light_ms": 0.8,
        "faster_than_light": True,
        "method": "cupti",
    }
    text = timing_message(stage, {"tensor_tflops": 790.0, "bandwidth_tbps": 4.3})
    assert "speedup 2.000x" in text and "FLAGGED" in text
    assert "speed of light 0.8 ms (measured here: 790 TFLOP/s bf16, 4.30 TB/s)" in text
    stage["method"], stage["faster_than_light"] = "events", False
    assert "CUDA events" in timing_message(stage) and "FLAGGED" not in timing_message(stage)


def test_timed_iterations_fill_the_budget_between_the_minimum_and_the_cap() -> None:
    assert timed_iterations(50, 0.002, 0.3) == 150  # a 1 ms GEMM and its baseline: 2 ms a round
    assert timed_iterations(50, 0.05, 0.3) == 50  # slow rounds keep the minimum
    assert timed_iterations(50, 1e-6, 0.3) == MAX_ITERATIONS
    assert timed_iterations(500, 0.002, 0.3) == 500  # an explicit minimum above the cap wins


def test_a_second_baseline_is_shown_beside_the_primary() -> None:
    stage = {
        "candidate": summarize("candidate", [2.0, 2.0]),
        "baselines": [summarize("cuDNN SDPA", [1.8, 1.8]), summarize("FlashInfer prefill", [1.6, 1.6])],
        "speedup": 0.9,
    }
    text = timing_message(stage)
    assert "cuDNN SDPA 1.8 ms; speedup 0.900x" in text
    assert "FlashInfer prefill 1.6 ms (0.800x)" in text


def test_attention_forward_says_why_flashinfer_is_left_out_where_it_is_absent() -> None:
    catalogue = Catalogue.load()
    task = catalogue.get("mha_with_lse_d128")
    spec = gpu_spec(task, profile_workload(task), get_target("hopper"), catalogue)
    q, k, v = (torch.zeros(1, 2, 8, 128) for _ in range(3))
    inputs = [{"Q": q, "K": k, "V": v}.get(name, 0.0) for name in spec["definition"]["inputs"]]
    baselines, notes = make_baselines(spec, inputs)
    assert [b.name for b in baselines] == ["cuDNN SDPA"]
    assert notes == ["second baseline left out: FlashInfer is not installed on this host"]
