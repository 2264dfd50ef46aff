"""Timing, judged in the worker from raw records: statistics, the datasheet speed of light as a failing
status, foreign and stray work, the marker kernels, and the worker's own clock against the trace."""

from __future__ import annotations

import pytest

from workbench.evaluate.gpu import part_clock, timing
from workbench.evaluate.gpu.baselines import make_baselines
from workbench.evaluate.gpu.timing import (
    PEAKS,
    device_peaks,
    speed_of_light_ms,
    summarize,
    timed_iterations,
    timing_message,
    timing_stage,
)
from workbench.evaluate.gpu.trace_checks import attribute
from workbench.evaluate.gpu_spec import gpu_spec
from workbench.tasks import Catalogue, get_target
from workbench.tasks.devices import DEVICES

OWN, BLAS, MARK = "own_kernel", "nvjet_sm90_tst", "marker_kernel"
SPEC = {"flops": 2.0 * 8192 * 7168 * 5120, "min_bytes": 2.0 * (8192 * 5120 + 7168 * 5120 + 8192 * 7168)}


def trace(
    candidate_ms: list[float], baseline_ms: list[float], extra: list | None = None, marker: bool = True
) -> dict:
    """A timed loop's raw records: rounds of marker, candidate call, baseline call."""
    windows, kernels, launches = [], [], {}
    clock, correlation = 0, 0

    def launch(label: str, name: str, ms: float) -> None:
        nonlocal clock, correlation
        correlation += 1
        windows.append([label, clock, clock + 10, None])
        launches[str(correlation)] = clock + 1
        kernels.append(
            [name, clock + 5, clock + 5 + int(ms * 1e6), correlation, 7, [1, 1, 1], [1, 1, 1], 0, 0, 0]
        )
        clock += int(ms * 1e6) + 1000

    for c, b in zip(candidate_ms, baseline_ms, strict=True):
        if marker:
            launch("marker", MARK, 0.001)
        launch("call:candidate", OWN, c)
        launch("call:0", BLAS, b)
    kernels += extra or []
    return {"method": "cupti", "windows": windows, "kernels": kernels, "launches": launches, "copies": []}


def stage_for(candidate_ms, baseline_ms, walls=None, **kw) -> dict:
    walls = walls or {"candidate": [c + 0.05 for c in candidate_ms], "0": [b + 0.05 for b in baseline_ms]}
    return timing_stage(
        attribute(trace(candidate_ms, baseline_ms, **kw)), walls, {"0": "cuBLAS"}, SPEC, {OWN}, "NVIDIA H200"
    )


def test_summary_has_median_quartiles_and_extremes() -> None:
    stats = summarize("candidate", [5.0, 1.0, 3.0, 2.0, 4.0], ["k2", "k1", "k1"])
    assert stats["median_ms"] == 3.0 and stats["min_ms"] == 1.0 and stats["max_ms"] == 5.0
    assert stats["p25_ms"] == 2.0 and stats["p75_ms"] == 4.0
    assert stats["iterations"] == 5 and stats["kernels"] == ["k1", "k2"]


def test_an_honest_loop_gives_medians_speedup_and_the_datasheet_bound() -> None:
    stage = stage_for([1.0, 1.1, 0.9], [0.8, 0.8, 0.8])
    assert stage["status"] == "passed", stage["message"]
    assert stage["candidate"]["median_ms"] == pytest.approx(1.0, rel=1e-3)
    assert stage["speedup"] == pytest.approx(0.8, rel=1e-3)
    assert stage["speed_of_light_ms"] == pytest.approx(SPEC["flops"] / 989.4e12 * 1e3)
    assert "H200 datasheet" in stage["message"] and "speedup 0.800x" in stage["message"]


def test_a_verdict_says_how_much_of_the_speed_of_light_it_reached_and_which_peak_binds() -> None:
    gemm = stage_for([1.0, 1.1, 0.9], [0.8, 0.8, 0.8])
    light = SPEC["flops"] / 989.4e12 * 1e3  # 0.608 ms: the GEMM is bound by the tensor rate
    assert gemm["light_bound"] == "compute" and gemm["light_share"] == pytest.approx(light / 1.0, rel=1e-3)
    assert gemm["tbps"] == pytest.approx(SPEC["min_bytes"] / 1e-3 / 1e12, rel=1e-3)
    assert "reached 61%" in gemm["message"] and "compute-bound" in gemm["message"]
    assert timing.rates_text(gemm["tflops"], gemm["tbps"], "compute") == [f"{gemm['tflops']:.1f} TFLOP/s"]

    # A paged decode moves 269 MB for 1.2 GFLOP: the bandwidth binds, and its rate is read in TB/s.
    catalogue = Catalogue.load()
    task = catalogue.get("gqa_paged_decode_h24_kv8_d128_ps1")
    spec = gpu_spec(task, task.workload(), get_target("hopper"), catalogue)
    decode = timing_stage(
        attribute(trace([0.07, 0.07, 0.07], [0.08, 0.08, 0.08])),
        {"candidate": [0.12] * 3, "0": [0.13] * 3},
        {"0": "FlashInfer"},
        spec,
        {OWN},
        "NVIDIA H200",
    )
    assert decode["status"] == "passed", decode["message"]
    assert decode["light_bound"] == "memory"
    assert decode["tbps"] == pytest.approx(spec["min_bytes"] / 0.07e-3 / 1e12, rel=1e-2)
    assert decode["light_share"] == pytest.approx(decode["tbps"] / 4.8, rel=1e-2)
    assert f"{decode['tbps']:.2f} TB/s" in decode["message"] and "memory-bound" in decode["message"]
    assert timing.rates_text(decode["tflops"], decode["tbps"], "memory")[0].endswith("TB/s")


def test_faster_than_the_datasheet_allows_is_a_failing_status() -> None:
    stage = stage_for([0.3, 0.3, 0.3], [0.8, 0.8, 0.8])
    assert stage["status"] == "faster_than_light" and stage["faster_than_light"]
    assert "no honest kernel is" in stage["message"]


def test_the_speed_of_light_is_the_larger_of_compute_and_memory_time() -> None:
    assert speed_of_light_ms(8e11, 4e6, 800.0, 4.0) == pytest.approx(1.0)
    assert speed_of_light_ms(8e5, 4e9, 800.0, 4.0) == pytest.approx(1.0)
    assert speed_of_light_ms(None, None, 800.0, 4.0) is None
    assert device_peaks("NVIDIA H200")[0] == "H200" and device_peaks("a GPU of another kind") is None


def test_the_worker_side_peaks_are_the_catalogue_datasheet_figures() -> None:
    for model, peaks in PEAKS.items():
        device = DEVICES[model]
        assert (device.bf16_dense_tflops, device.fp8_dense_tflops, device.hbm_tbps) == peaks


def test_an_fp8_task_is_bounded_by_the_fp8_peak_the_catalogue_uses() -> None:
    task = Catalogue.load().get("fp8_gemm_nt_1d2d_n4096_k7168")
    workload = task.workload()  # m = 4096: compute-bound at either rate
    spec = gpu_spec(task, workload, task.target("hopper"))
    assert spec["compute_dtype"] == "float8_e4m3"
    fp8_light = spec["flops"] / 1978.9e12 * 1e3
    # Between the FP8 bound and the bf16 one (twice as long): honest work for FP8 operands.
    median = 1.5 * fp8_light
    raw = trace([median] * 3, [2 * median] * 3)
    walls = {"candidate": [median + 0.05] * 3, "0": [2 * median + 0.05] * 3}
    stage = timing_stage(attribute(raw), walls, {"0": "cuBLAS"}, spec, {OWN}, "NVIDIA H200")
    assert stage["status"] == "passed", stage["message"]
    assert stage["speed_of_light_ms"] == pytest.approx(fp8_light)
    assert stage["speed_of_light_ms"] == pytest.approx(task.speed_of_light_ms(workload)["H200"])
    assert "1978.9 TFLOP/s dense FP8" in stage["speed_of_light_source"]
    # The same time against the bf16 rate is faster than light: the dtype is what moved the bound.
    spec["compute_dtype"] = "bfloat16"
    bf16 = timing_stage(attribute(raw), walls, {"0": "cuBLAS"}, spec, {OWN}, "NVIDIA H200")
    assert bf16["status"] == "faster_than_light"


def test_a_foreign_kernel_in_a_timed_call_fails_it() -> None:
    raw = trace([1.0], [1.0])
    raw["kernels"][1][0] = BLAS
    stage = timing_stage(attribute(raw), {}, {"0": "cuBLAS"}, SPEC, {OWN}, "NVIDIA H200")
    assert stage["status"] == "foreign_kernel"


def test_work_outside_every_call_and_a_lost_marker_fail_the_loop() -> None:
    stray = [["bg", 1, 2, 999, 7, [1, 1, 1], [1, 1, 1], 0, 0, 0]]
    assert stage_for([1.0], [1.0], extra=stray)["status"] == "stray_kernel"
    raw = trace([1.0, 1.0], [1.0, 1.0])
    raw["kernels"] = [k for k in raw["kernels"] if k[0] != MARK or k[3] != 1]
    stage = timing_stage(attribute(raw), {}, {"0": "cuBLAS"}, SPEC, {OWN}, "NVIDIA H200")
    assert stage["status"] == "tampered" and "marker" in stage["message"]


def test_more_gpu_time_than_the_call_took_by_the_clock_is_tampering() -> None:
    stage = stage_for([1.0, 1.0], [1.0, 1.0], walls={"candidate": [0.5, 0.5], "0": [1.1, 1.1]})
    assert stage["status"] == "tampered" and "worker's clock" in stage["message"]


def test_time_the_gpu_trace_does_not_show_is_a_wall_clock_mismatch() -> None:
    stage = stage_for([0.5, 0.5], [1.0, 1.0], walls={"candidate": [1.4, 1.4], "0": [1.05, 1.05]})
    assert stage["status"] == "wall_clock_mismatch"
    assert stage["host_overhead_ms"] == pytest.approx(0.9) and stage[
        "baseline_host_overhead_ms"
    ] == pytest.approx(0.05)
    # A little more host time than the baseline's is an honest kernel's launch work.
    assert (
        stage_for([1.0, 1.0], [1.0, 1.0], walls={"candidate": [1.2, 1.2], "0": [1.05, 1.05]})["status"]
        == "passed"
    )


def test_a_short_kernel_may_hide_no_more_than_the_clocks_noise_on_the_host() -> None:
    """A 20 us kernel is allowed the floor (the two host paths' measured noise), a ms-scale one a quarter
    of its span."""
    decode = {**SPEC, "flops": None, "min_bytes": None}  # a tiny task: no speed of light in the way

    def tiny(candidate_wall: float) -> dict:
        walls = {"candidate": [candidate_wall] * 2, "0": [0.25] * 2}
        return timing_stage(
            attribute(trace([0.02] * 2, [0.02] * 2)), walls, {"0": "x"}, decode, {OWN}, "NVIDIA H200"
        )

    assert tiny(0.45)["status"] == "wall_clock_mismatch"
    assert tiny(0.35)["status"] == "passed", tiny(0.35)["message"]  # 0.1 ms: what honest paths differ by
    long = stage_for([2.0] * 2, [2.0] * 2, walls={"candidate": [2.6] * 2, "0": [2.1] * 2})
    assert long["status"] == "passed", long["message"]


def test_host_time_beyond_the_empty_call_and_its_allowance_is_counted_in() -> None:
    """Each call is paired with the empty call beside it: the excess over the floor (or the share of a long
    span) is added to the candidate's times, and the speedup is taken from them."""
    decode = {**SPEC, "flops": None, "min_bytes": None}

    def tiny(candidate_walls: list[float], empty: list[float]) -> dict:
        walls = {"candidate": candidate_walls, "0": [0.25] * 3, "empty": empty}
        return timing_stage(
            attribute(trace([0.02] * 3, [0.02] * 3)), walls, {"0": "x"}, decode, {OWN}, "NVIDIA H200"
        )

    honest = tiny([0.23, 0.24, 0.22], [0.21, 0.22, 0.2])  # launch latency: 0.0 ms beyond the empty call
    assert honest["status"] == "passed" and honest["host_charged_ms"] == 0
    assert honest["candidate"]["median_ms"] == pytest.approx(0.02)
    assert honest["host_excess_ms"] == pytest.approx(0.0, abs=1e-9)
    assert honest["empty_call_ms"] == pytest.approx(0.21)
    # 0.1 ms of host work on each call: the old rule lets it pass, the time it shows counts it.
    hidden = tiny([0.33, 0.34, 0.32], [0.21, 0.22, 0.2])
    assert hidden["status"] == "passed"
    assert hidden["host_excess_ms"] == pytest.approx(0.1)
    charged = 0.1 - timing.EMPTY_CALL_FLOOR_MS
    assert hidden["host_charged_ms"] == pytest.approx(charged)
    assert hidden["candidate"]["median_ms"] == pytest.approx(0.02 + charged)
    assert hidden["speedup"] == pytest.approx(0.02 / (0.02 + charged))
    assert "counted in" in hidden["message"]
    # Paired per round: a slow round of the harness's own path is not the candidate's. (Unpaired, the
    # medians here, 0.33 and 0.21, would count 0.05 ms.)
    drifting = tiny([0.23, 0.33, 0.33], [0.21, 0.31, 0.21])
    assert drifting["host_excess_ms"] == pytest.approx(0.0, abs=1e-9)
    assert drifting["host_charged_ms"] == 0

    # A long kernel is allowed its share of the span, not only the floor; past it, the rest is counted.
    def long(candidate_wall: float) -> dict:
        walls = {"candidate": [candidate_wall] * 2, "0": [2.5] * 2, "empty": [0.02] * 2}
        raw = trace([2.0] * 2, [2.0] * 2)
        return timing_stage(attribute(raw), walls, {"0": "x"}, SPEC, {OWN}, "NVIDIA H200")

    assert long(2.4)["host_excess_ms"] == pytest.approx(0.38) and long(2.4)["host_charged_ms"] == 0
    assert long(2.62)["host_charged_ms"] == pytest.approx(0.6 - timing.EMPTY_CALL_SHARE * 2.0)


def test_without_an_empty_call_nothing_is_counted_in() -> None:
    """A library whose runner found no empty function (TVM-FFI without `testing.nop`): only the baseline's
    clock bounds it, and within the slack nothing is counted in."""
    stage = stage_for([1.0, 1.0], [1.0, 1.0], walls={"candidate": [1.2, 1.2], "0": [1.05, 1.05]})
    assert "host_charged_ms" not in stage and stage["candidate"]["median_ms"] == pytest.approx(1.0)


def test_timed_iterations_fill_the_budget_between_the_minimum_and_the_cap() -> None:
    assert timed_iterations(50, 0.002, 0.3, 400) == 150
    assert timed_iterations(50, 0.05, 0.3, 400) == 50
    assert timed_iterations(50, 1e-6, 0.3, 400) == 400
    assert timed_iterations(500, 0.002, 0.3, 400) == 500


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
    spec = gpu_spec(task, task.smallest_workload(), get_target("hopper"), catalogue)
    spec["axes"] = {**spec["axes"], "B": 1, "H": 2, "S": 8}
    baselines, notes = make_baselines(spec, "cpu")
    assert [b.name for b in baselines] == ["cuDNN SDPA"]
    assert notes == ["second baseline left out: FlashInfer is not installed on this host"]


def test_a_part_clock_adds_up_a_part_marked_twice_and_syncs_before_every_mark(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ticks = iter([0.0, 1.0, 3.5, 6.0])  # the start, then three marks
    monkeypatch.setattr(part_clock.time, "perf_counter", lambda: next(ticks))
    synced: list[int] = []
    clock = part_clock.PartClock(lambda: synced.append(1))
    clock.mark("copy")
    clock.mark("compare")
    clock.mark("copy")
    assert clock.parts == {"copy": 3.5, "compare": 2.5} and len(synced) == 3
    assert clock.rounded(0) == {"copy": 4.0, "compare": 2.0}


def test_a_triton_candidates_host_time_past_the_slack_is_counted_in_not_failed() -> None:
    """A Triton candidate's host code cannot reach the trace: its launch work beyond the baseline's path
    and the slack (an autograd Function, per-call driver queries on a slow host) is added to its times,
    where a CUDA candidate's, whose host code could have altered the records, fails."""
    walls = {"candidate": [1.25, 1.25], "0": [1.0 + 0.7] * 2}  # 0.95 ms over its kernels, the baseline 0.7
    triton = {**SPEC, "flops": None, "min_bytes": None, "triton_entry": "kernel.py"}
    stage = timing_stage(
        attribute(trace([0.3, 0.3], [1.0, 1.0])), walls, {"0": "x"}, triton, {OWN}, "NVIDIA H200"
    )
    assert stage["status"] == "passed", stage["message"]
    assert stage["host_excess_ms"] == pytest.approx(0.25)
    assert stage["host_charged_ms"] == pytest.approx(0.25 - timing.HOST_SLACK_MS)
    assert stage["candidate"]["median_ms"] == pytest.approx(0.3 + 0.1)
    assert "the baseline's host path" in stage["message"]
    cuda = timing_stage(
        attribute(trace([0.3, 0.3], [1.0, 1.0])), walls, {"0": "x"}, SPEC, {OWN}, "NVIDIA H200"
    )
    assert cuda["status"] == "wall_clock_mismatch"
    # Within the slack nothing moves: the speedups of Triton kernels that passed before stay as they were.
    within = {"candidate": [1.1, 1.1], "0": [1.7, 1.7]}
    kept = timing_stage(
        attribute(trace([0.3, 0.3], [1.0, 1.0])), within, {"0": "x"}, triton, {OWN}, "NVIDIA H200"
    )
    assert kept["host_charged_ms"] == 0 and kept["candidate"]["median_ms"] == pytest.approx(0.3)
