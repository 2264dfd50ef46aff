"""On a Hopper GPU with cupti-python: the judge's PM sampling (`CallCounters`) with a hardware buffer sized
from the window it is told to expect. A headline-sized GEMM's call is read whole at the floor's window; an
idle window far longer than its buffer holds is marked as outgrown, not read short.

Run on the GPU host from the checkout: `python -m pytest -m gpu -n 0 -v tests/gpu/test_call_counters_gpu.py`.
"""

from __future__ import annotations

import time

import pytest

from workbench.evaluate.gpu.call_counters import SAMPLING_INTERVAL_NS, WINDOW_FLOOR_S, CallCounters

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
pytest.importorskip("cupti")


def _gemm_calls(counters: CallCounters, calls: int) -> None:
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    torch.matmul(a, b)
    torch.cuda.synchronize()
    try:
        for _ in range(calls):
            counters.start()
            torch.matmul(a, b)
            torch.cuda.synchronize()
            counters.stop_beside()
    finally:
        counters.close()  # the monitors are free again for ncu and the next test


def test_a_window_longer_than_the_buffer_holds_is_outgrown_and_frees_the_monitors() -> None:
    # 10 ms expected: the smallest buffer (16 MiB, about 3,200 samples held at 94a280e); 0.6 s is 12,000.
    counters = CallCounters(torch.cuda.current_device(), 0.01)
    assert counters.collector is not None, counters.why
    try:
        counters.start()
        time.sleep(0.6)
        counters.stop_beside()
        counters.start()  # CUPTI starts no other window after it (9e6367f): not started, kept empty
        counters.stop_beside()
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
    assert after.trimmed[0].get("tensor_cycles", 0) > 0, after.why


def test_a_gemm_call_is_counted_whole_in_the_floors_buffer() -> None:
    counters = CallCounters(torch.cuda.current_device(), WINDOW_FLOOR_S)
    assert counters.collector is not None, counters.why
    assert counters.interval_ns == SAMPLING_INTERVAL_NS
    _gemm_calls(counters, 3)
    assert counters.outgrown == [] and counters.why == ""
    cycles = [window["tensor_cycles"] for window in counters.trimmed]
    assert min(cycles) > 0 and max(cycles) < 1.05 * min(cycles), cycles
