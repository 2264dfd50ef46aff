"""What the worker reads from the runner's raw records: attribution of every record to the window its
launch call started in, foreign kernels, stray work, another stream read too early, the marker kernels
the harness launches (gone: the trace was switched off), and the profiled call against the timed ones.

The records are what CUPTI delivers (a GPU is needed to make them); everything reading them is real.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from build_support import needs_nvcc

from workbench.evaluate.build.nvcc import compile_source
from workbench.evaluate.gpu.agreement import agreement, profiled_over_timed
from workbench.evaluate.gpu.kernel_names import module_kernels, own_kernels, torch_fill
from workbench.evaluate.gpu.trace_checks import Kernel, attribute, call_problem
from workbench.evaluate.result import Status
from workbench.tasks import get_target

FAULTS = Path(__file__).parent / "gpu" / "faults"
OWN = "_Z16simt_gemm_kernelPK13__nv_bfloat16S1_PS_iii"
CUBLAS = "nvjet_sm90_tst_176x128_64x5_1x2_h_bz_TNN"
MARK = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BinaryFunctorIiiiE"
LAUNCH = [[112, 1, 1], [256, 1, 1], 128, 0, 0]


def kernel(name: str, start: int, end: int, correlation: int, stream: int = 7, launch=LAUNCH) -> list:
    return [name, start, end, correlation, stream, *launch]


def raw(*kernels: list, windows=None, launches=None, copies=()) -> dict:
    """A trace of marker (0-10), call (20-30), readback (40-50); launches by correlation id."""
    return {
        "method": "cupti",
        "windows": windows or [["marker", 0, 10, None], ["call", 20, 30, None], ["readback", 40, 50, None]],
        "kernels": list(kernels),
        "copies": list(copies),
        "launches": launches or {"1": 5, "2": 22, "3": 25, "4": 45},
    }


def honest_call(*extra: list, **kw) -> dict:
    return raw(kernel(MARK, 100, 101, 1), kernel(OWN, 200, 300, 2), kernel(MARK, 400, 401, 4), *extra, **kw)


def test_an_honest_call_has_no_problem() -> None:
    assert call_problem(attribute(honest_call()), {OWN}) is None


def test_a_kernel_the_module_does_not_define_is_foreign() -> None:
    status, message = call_problem(attribute(honest_call(kernel(CUBLAS, 310, 390, 3))), {OWN})
    assert status == "foreign_kernel" and CUBLAS in message


def test_a_module_without_kernels_makes_every_launched_kernel_foreign() -> None:
    status, _ = call_problem(attribute(honest_call()), set())
    assert status == "foreign_kernel"


# torch's fill kernels as CUPTI named them on the H100 (a bf16 and an int32 fill), and torch compute the
# trace never saw (a multiply) beside them.
FILLS = (
    "_ZN2at6native29vectorized_elementwise_kernelILi8ENS0_11FillFunctorIN3c108BFloat16EEESt5arrayIPcLm1EEEEviT0_T1_",
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIiEESt5arrayIPcLm1EEEEviT0_T1_",
)
TORCH_MUL = (
    "_ZN2at6native29vectorized_elementwise_kernelILi8ENS0_13AUnaryFunctorIN3c108BFloat16ES4_S4_NS0_15binary_"
    "internal10MulFunctorIfEEEESt5arrayIPcLm2EEEEviT0_T1_"
)


def test_a_triton_candidates_torch_fills_are_its_own_and_nothing_else_of_torchs() -> None:
    """A Triton candidate's host code may zero a workspace with torch (`triton_ban.TORCH_CALLS`): the fill
    kernel is its own work, in the call and in the profile; torch compute stays foreign, and a CUDA
    candidate (which cannot reach torch) is held to its module's kernels alone."""
    zeroed = honest_call(kernel(FILLS[0], 150, 160, 3), kernel(FILLS[1], 310, 320, 3))
    triton = own_kernels([OWN], triton=True)
    assert call_problem(attribute(zeroed), triton) is None
    assert all(name in triton for name in FILLS) and OWN in triton and CUBLAS not in triton
    status, message = call_problem(attribute(honest_call(kernel(TORCH_MUL, 310, 320, 3))), triton)
    assert status == "foreign_kernel" and "MulFunctor" in message
    status, message = call_problem(attribute(zeroed), own_kernels([OWN], triton=False))
    assert status == "foreign_kernel" and "FillFunctor" in message
    assert own_kernels(None, triton=True) is None and not torch_fill(OWN)
    # ncu's launches and the timed calls' both keep the fill, so the two still agree
    profiled = [{"name": name, "launch": {}, "time_ns": 100.0} for name in (FILLS[0], OWN)]
    timed = [[Kernel(FILLS[0], 150, 250, 3, 7), Kernel(OWN, 260, 360, 2, 7)]]
    assert agreement(profiled, timed, triton) is None


def test_unknown_kernel_names_skip_the_foreign_check_only() -> None:
    assert call_problem(attribute(honest_call(kernel(CUBLAS, 310, 390, 3))), None) is None


def test_work_launched_outside_every_window_is_stray() -> None:
    trace = attribute(honest_call(kernel(OWN, 500, 600, 9), launches={"1": 5, "2": 22, "4": 45, "9": 35}))
    status, message = call_problem(trace, {OWN})
    assert status == "stray_kernel" and "outside its call" in message
    copy = attribute(honest_call(copies=[[1, 500, 600, 9, 7]], launches={"1": 5, "2": 22, "4": 45, "9": 60}))
    assert call_problem(copy, {OWN})[0] == "stray_kernel"


def test_a_marker_missing_from_the_trace_is_tampering() -> None:
    trace = attribute(raw(kernel(MARK, 100, 101, 1), kernel(OWN, 200, 300, 2)))
    status, message = call_problem(trace, {OWN})
    assert status == "tampered" and "marker" in message


def test_a_call_that_launched_no_kernel_made_its_output_elsewhere() -> None:
    trace = attribute(raw(kernel(MARK, 100, 101, 1), kernel(MARK, 400, 401, 4), copies=[[1, 200, 300, 2, 7]]))
    status, message = call_problem(trace, {OWN})
    assert status == "runtime_error" and "no GPU kernel" in message


def test_work_still_running_on_another_stream_when_the_caller_reads_is_caught() -> None:
    trace = attribute(
        raw(kernel(MARK, 100, 101, 1), kernel(OWN, 200, 5000, 2, stream=13), kernel(MARK, 400, 401, 4))
    )
    status, message = call_problem(trace, {OWN})
    assert status == "runtime_error" and "another stream" in message


def test_another_stream_ordered_before_the_readback_is_fine() -> None:
    trace = attribute(
        raw(kernel(MARK, 100, 101, 1), kernel(OWN, 200, 300, 2, stream=13), kernel(MARK, 400, 401, 4))
    )
    assert call_problem(trace, {OWN}) is None


def test_without_cupti_no_record_is_judged() -> None:
    assert call_problem(attribute({"method": "events", "windows": [["call", 0, 1, 0.5]]}), {OWN}) is None


def _timed(name: str = OWN, ns: int = 1_000_000, launch=LAUNCH) -> list[Kernel]:
    return [Kernel.from_raw(kernel(name, 0, ns, 1, launch=launch))]


def _profiled(name: str = OWN, ns: float = 1e6, grid: int = 112) -> list[dict]:
    launch = {"grid": grid, "block": 256, "registers": 128, "dynamic_smem": 0, "static_smem": 0}
    return [{"name": name, "opcodes": {}, "tensor_flops": None, "time_ns": ns, "launch": launch}]


def test_the_profiled_call_agrees_with_timed_calls_of_the_same_kernels() -> None:
    assert agreement(_profiled(), [_timed(), _timed(ns=1_100_000)], {OWN}) is None


def test_other_kernels_under_the_profiler_are_a_mismatch() -> None:
    other = "_Z17wgmma_gemm_kernel14CUtensorMap_stS_P13__nv_bfloat16iii"
    message, figures = agreement(_profiled(other), [_timed()], {OWN, other})
    assert "not the kernels that were timed" in message and other in figures["profiled_launches"]
    assert agreement(_profiled(grid=224), [_timed()], {OWN}) is not None  # same kernel, another grid


def test_a_profiled_path_far_faster_than_the_timed_one_is_a_mismatch() -> None:
    message, figures = agreement(_profiled(ns=1e5), [_timed(), _timed()], {OWN})
    assert "another path" in message and figures["profiled_ms"] < figures["timed_ms"]


def test_a_profiled_path_a_tenth_slower_is_a_mismatch_while_honest_jitter_is_not() -> None:
    timed = [_timed(ns=6_000_000), _timed(ns=5_400_000), _timed(ns=5_460_000)]
    message, _ = agreement(_profiled(ns=6.0e6), timed, {OWN}) or ("", {})
    assert "another path" in message  # 6.0 ms profiled against 5.46 ms timed: 9.9 % apart
    assert agreement(_profiled(ns=5.8e6), timed, {OWN}) is None  # 6 % apart
    short = [_timed(ns=20_000), _timed(ns=20_000)]
    assert agreement(_profiled(ns=2.6e4), short, {OWN}) is None  # 6 us on a 20 us kernel: launch jitter
    assert agreement(_profiled(ns=3.0e4), short, {OWN}) is not None


def test_every_verdict_keeps_the_profiled_over_timed_ratio_of_its_own_kernels() -> None:
    other = "_Z5otherv"
    timed = [_timed() + _timed(other, ns=5_000_000), _timed(ns=1_200_000)]
    assert profiled_over_timed(_profiled(ns=1.1e6), timed, {OWN}) == 1.0
    assert profiled_over_timed(_profiled(ns=5e5), [_timed()], {OWN}) == 0.5
    assert profiled_over_timed([{**_profiled()[0], "time_ns": None}], [_timed()], {OWN}) is None


def test_a_field_ncu_did_not_report_is_not_compared() -> None:
    profiled = _profiled()
    del profiled[0]["launch"]["registers"]
    assert agreement(profiled, [_timed(launch=[[112, 1, 1], [256, 1, 1], 64, 0, 0])], {OWN}) is None


@needs_nvcc
def test_module_kernels_tells_none_defined_from_unknown(tmp_path: Path) -> None:
    source = "#include <tvm/ffi/function.h>\nint run(int x) { return x; }\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);\n"
    stage = asyncio.run(compile_source(source, get_target("hopper"), 300, tmp_path))
    assert stage.status == Status.passed, stage.message
    assert module_kernels(stage.library_path) == []
    assert module_kernels(str(tmp_path / "missing.so")) is None
