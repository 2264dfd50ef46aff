"""The context settings a call may leave for the next, set back for the baselines and given back to the
candidate, read through the real driver in this process's context (what the runner does between calls)."""

from __future__ import annotations

import ctypes

import pytest

from workbench.evaluate.gpu.context_settings import (
    ATTRIBUTE_BYTES,
    LIMITS,
    SCHED_MASK,
    STREAM_ATTRIBUTES,
    ContextSettings,
)

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

CU_FUNC_CACHE_PREFER_SHARED = 0x01
CU_ACCESS_PROPERTY_STREAMING = 1


def _window(base: int, num_bytes: int) -> ctypes.Array[ctypes.c_char]:
    """A CUaccessPolicyWindow in the stream attribute's union: base, bytes, hit ratio, hit and miss property."""
    value = ctypes.create_string_buffer(ATTRIBUTE_BYTES)
    ctypes.c_void_p.from_buffer(value, 0).value = base
    ctypes.c_size_t.from_buffer(value, 8).value = num_bytes
    ctypes.c_float.from_buffer(value, 16).value = 1.0
    ctypes.c_int.from_buffer(value, 20).value = CU_ACCESS_PROPERTY_STREAMING
    ctypes.c_int.from_buffer(value, 24).value = CU_ACCESS_PROPERTY_STREAMING
    return value


def test_a_candidates_settings_are_set_back_for_a_baseline_and_given_back_for_its_next_call() -> None:
    torch.cuda.init()
    operand = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    stream = torch.cuda.current_stream().cuda_stream
    settings = ContextSettings("cuda", stream)
    initial = settings.read()
    assert {"L2 fetch granularity", "stack size", "cache preference"} <= set(initial)
    changing = {"L2 fetch granularity", "stack size", "cache preference"}

    driver = ctypes.CDLL("libcuda.so.1")  # the candidate's host code, as it would change them
    assert driver.cuCtxSetLimit(ctypes.c_int(LIMITS["L2 fetch granularity"]), ctypes.c_size_t(32)) == 0
    assert driver.cuCtxSetLimit(ctypes.c_int(LIMITS["stack size"]), ctypes.c_size_t(8192)) == 0
    assert driver.cuCtxSetCacheConfig(ctypes.c_uint(CU_FUNC_CACHE_PREFER_SHARED)) == 0
    if "scheduling flags" in initial:  # how the host waits: blocking sync, or spin where that was set
        flags = ctypes.c_uint()
        assert driver.cuCtxGetFlags(ctypes.byref(flags)) == 0
        waiting = 0x01 if flags.value & SCHED_MASK == 0x04 else 0x04
        assert driver.cuCtxSetFlags(ctypes.c_uint((flags.value & ~SCHED_MASK) | waiting)) == 0
        changing.add("scheduling flags")
    window = _window(operand.data_ptr(), operand.numel())
    code = driver.cuStreamSetAttribute(
        ctypes.c_void_p(stream), ctypes.c_int(STREAM_ATTRIBUTES["access policy window"]), window
    )
    # A stream whose attributes the driver does not read (torch's legacy stream may be one) is one they
    # cannot be set on either: nothing left there for the next call.
    print("stream attributes read:", sorted(set(initial) & set(STREAM_ATTRIBUTES)), "window set:", code)
    assert (code == 0) == ("access policy window" in initial)
    if code == 0:
        changing.add("access policy window")
    candidates = settings.read()
    differing = {name for name in candidates if candidates[name] != initial[name]}
    assert changing <= differing

    settings.for_baseline()
    assert settings.read() == initial
    assert differing == settings.changed
    settings.for_baseline()  # a second baseline: nothing more to set back
    assert settings.read() == initial

    settings.for_candidate()
    assert settings.read() == candidates
    settings.for_candidate()  # its next call after its own: left as it is
    assert settings.read() == candidates

    settings.for_baseline()  # and back once more, leaving this process's context as it found it
    assert settings.read() == initial
