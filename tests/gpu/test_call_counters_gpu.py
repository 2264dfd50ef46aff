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


def test_a_gemm_call_is_counted_whole_in_the_floors_buffer() -> None:
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    torch.matmul(a, b)
    torch.cuda.synchronize()
    counters = CallCounters(torch.cuda.current_device(), WINDOW_FLOOR_S)
    assert counters.collector is not None, counters.why
    assert counters.interval_ns == SAMPLING_INTERVAL_NS
    for _ in range(3):
        counters.start()
        torch.matmul(a, b)
        torch.cuda.synchronize()
        counters.stop_beside()
    counters.close()
    assert counters.outgrown == [] and counters.why == ""
    cycles = [window["tensor_cycles"] for window in counters.trimmed]
    assert min(cycles) > 0 and max(cycles) < 1.05 * min(cycles), cycles


def test_a_window_longer_than_the_buffer_holds_is_outgrown_not_short() -> None:
    # 10 ms expected: the smallest buffer (16 MiB, about 3,200 samples held at 94a280e); 0.6 s is 12,000.
    counters = CallCounters(torch.cuda.current_device(), 0.01)
    assert counters.collector is not None, counters.why
    counters.start()
    time.sleep(0.6)
    counters.stop_beside()
    counters.start()  # a call after it is read again from an empty buffer
    counters.stop_beside()
    counters.close()
    assert counters.outgrown == [1], (counters.outgrown, counters.why)
    assert counters.windows[0] == {} and counters.windows[1] != {}
    assert "outgrew the sampler's hardware buffer, sized for 0.01 s" in counters.why
