"""On a Hopper GPU with cupti-python: the judge's PM sampling (`CallCounters`) with a hardware buffer sized
from the window it is told to expect, started before each call's prepare and the call's counts cut out by
its realtime bracket. A headline-sized GEMM's call is read whole at the floor's window; the prepare's GPU
work is left out of the call's counts; an idle window far longer than its buffer holds is marked as
outgrown, not read short.

Run on the GPU host from the checkout: `python -m pytest -m gpu -n 0 -v tests/gpu/test_call_counters_gpu.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from workbench.evaluate.gpu.call_counters import SAMPLING_INTERVAL_NS, WINDOW_FLOOR_S, CallCounters

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
pytest.importorskip("cupti")


def _gemm_calls(counters: CallCounters, calls: int, prepare: Callable[[], object] = lambda: None) -> None:
    """`calls` GEMM calls, each counted as the timing stage counts it: the sampler started, the call's
    prepare (`prepare`, GPU work outside its bracket), 200 us of idle, the bracketed call, the stop."""
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    torch.matmul(a, b)
    torch.cuda.synchronize()
    try:
        for _ in range(calls):
            counters.start()
            prepare()
            torch.cuda.synchronize()
            time.sleep(0.0002)
            began = time.time_ns()
            torch.matmul(a, b)
            torch.cuda.synchronize()
            counters.stop_beside(began, time.time_ns())
    finally:
        counters.close()  # the monitors are free again for ncu and the next test


def test_a_window_longer_than_the_buffer_holds_is_outgrown_and_frees_the_monitors() -> None:
    # 10 ms expected: the smallest buffer (16 MiB, about 3,200 samples held at 94a280e); 0.6 s is 12,000.
    counters = CallCounters(torch.cuda.current_device(), 0.01)
    assert counters.collector is not None, counters.why
    try:
        counters.start()
        time.sleep(0.6)
        counters.stop_beside(time.time_ns() - 100_000, time.time_ns())
        counters.start()  # CUPTI starts no other window after it (9e6367f): not started, kept empty
        counters.stop_beside(time.time_ns(), time.time_ns())
    finally:
        counters.close()
    assert counters.outgrown == [1], (counters.outgrown, counters.why)
    assert counters.windows == [{}, {}]
    assert "outgrew the sampler's hardware buffer, sized for 0.01 s" in counters.why
    # Closed, the device samples again: a new session counts a GEMM call (and ncu profiles after it,
    # in the tests that follow in this process).
    after = CallCounters(torch.cuda.current_device(), WINDOW_FLOOR_S)
    assert after.collector is not None, after.why
    _gemm_calls(after, 1)
    assert after.windows[0].get("tensor_cycles", 0) > 0, after.why


def test_a_gemm_call_is_counted_whole_in_the_floors_buffer() -> None:
    counters = CallCounters(torch.cuda.current_device(), WINDOW_FLOOR_S)
    assert counters.collector is not None, counters.why
    assert counters.interval_ns == SAMPLING_INTERVAL_NS
    _gemm_calls(counters, 3)
    assert counters.outgrown == [] and counters.why == ""
    cycles = [window["tensor_cycles"] for window in counters.windows]
    assert min(cycles) > 0 and max(cycles) < 1.05 * min(cycles), cycles
    # Whole, not alike only: a 4096^3 wgmma GEMM keeps the tensor pipe 2 * 4096^3 / 1024 cycles busy
    # (134,217,728 for cuBLAS's and Triton's on the H200, b594700), and the GPU idles around the call.
    whole = 2 * 4096**3 / 1024
    assert all(abs(c - whole) < 0.01 * whole for c in cycles), (cycles, whole)


def test_the_prepares_work_is_not_in_the_calls_counts() -> None:
    # A GEMM of its own in the prepare (as the inputs' drawing and the L2 flush are, before the idle):
    # the call's bracket leaves it out, so the call counts as it does with nothing before it.
    x = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    bare = CallCounters(torch.cuda.current_device(), WINDOW_FLOOR_S)
    _gemm_calls(bare, 3)
    prepared = CallCounters(torch.cuda.current_device(), WINDOW_FLOOR_S)
    _gemm_calls(prepared, 3, prepare=lambda: torch.matmul(x, x))
    assert bare.why == prepared.why == ""
    call = min(window["tensor_cycles"] for window in bare.windows)
    for window in prepared.windows:  # the prepare's GEMM alone is 1/8 of the call's cycles
        assert abs(window["tensor_cycles"] - call) < 0.02 * call, (window, call)
