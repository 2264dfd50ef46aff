"""On a Hopper GPU with cupti-python: the judge's PM sampling (`CallCounters`), started once and drained
after each counted call, each call's counts the samples its realtime bracket overlaps. A headline-sized
GEMM's calls are counted alike at the floor's buffer; a buffer that fills between two drains loses the
call by number, and the monitors are free again after the close.

Run on the GPU host from the checkout: `python -m pytest -m gpu -n 0 -v tests/gpu/test_call_counters_gpu.py`.
"""

from __future__ import annotations

import time

import pytest

from workbench.evaluate.gpu.call_counters import SAMPLING_INTERVAL_NS, WINDOW_FLOOR_S, CallCounters

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
pytest.importorskip("cupti")


def _gemm_calls(counters: CallCounters, calls: int, idle_s: float = 0.0) -> None:
    """`calls` GEMM calls, each bracketed and handed to the sampler, after `idle_s` of idle GPU."""
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    torch.matmul(a, b)
    torch.cuda.synchronize()
    try:
        counters.start()
        for _ in range(calls):
            time.sleep(max(idle_s, 0.0002))
            began = time.time_ns()
            torch.matmul(a, b)
            torch.cuda.synchronize()
            ended = time.time_ns()
            counters.call(began, ended)
            time.sleep(0.0001)
    finally:
        counters.close()  # the monitors are free again for ncu and the next test


def test_gemm_calls_are_counted_alike_in_the_floors_buffer() -> None:
    counters = CallCounters(torch.cuda.current_device(), WINDOW_FLOOR_S)
    assert counters.collector is not None, counters.why
    assert counters.interval_ns == SAMPLING_INTERVAL_NS
    _gemm_calls(counters, 5)
    assert counters.outgrown == [] and counters.why == ""
    cycles = [window["tensor_cycles"] for window in counters.windows]
    assert len(cycles) == 5 and min(cycles) > 0 and max(cycles) < 1.05 * min(cycles), cycles


def test_a_buffer_that_fills_between_drains_loses_the_call_and_frees_the_monitors() -> None:
    # 10 ms expected: the smallest buffer (16 MiB, about 3,200 samples held at 94a280e); 0.6 s is 12,000.
    counters = CallCounters(torch.cuda.current_device(), 0.01)
    assert counters.collector is not None, counters.why
    _gemm_calls(counters, 2, idle_s=0.6)
    assert counters.outgrown == [1], (counters.outgrown, counters.why)
    assert counters.windows == [{}, {}]  # no call is sampled after the buffer filled
    assert "filled between two drains (it holds 0.01 s)" in counters.why
    # Closed, the device samples again: a new session counts a GEMM call (and ncu profiles after it,
    # in the tests that follow in this process).
    after = CallCounters(torch.cuda.current_device(), WINDOW_FLOOR_S)
    assert after.collector is not None, after.why
    _gemm_calls(after, 1)
    assert after.windows[0].get("tensor_cycles", 0) > 0, after.why
