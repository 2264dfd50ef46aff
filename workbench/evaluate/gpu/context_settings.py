"""What else one call may leave set for the next: the context's limits, cache preference and scheduling
flags, and the attributes of the stream the candidate is given (persisting L2 is `l2_reset.py`'s).

A candidate's host code may change any of them after its kernels finish (a smaller L2 fetch granularity,
the cache split tipped to shared memory, a streaming access-policy window over the buffers beside its own),
and the baseline timed next in the same process would run under them. Honest code changes some of them
for itself (a stack size for recursion, a malloc heap, a printf FIFO) and may set them once, expecting them
to hold. So each entrant runs under its own: before a baseline's (or the empty) call the runner puts the
settings the context started with back, keeping the candidate's; before the candidate's call it gives the
candidate's back. Read and set through the driver API (libcuda.so.1, loaded in any CUDA process) with
ctypes: standard library only. A setting this driver cannot read is one no call can be told apart by here.
"""

from __future__ import annotations

import ctypes

# cuda.h, enum CUlimit: the ones a context's host code may set (not persisting L2: l2_reset.py).
LIMITS = {
    "stack size": 0x00,
    "printf FIFO size": 0x01,
    "malloc heap size": 0x02,
    "device runtime sync depth": 0x03,
    "device runtime pending launches": 0x04,
    "L2 fetch granularity": 0x05,
}
# cuda.h, enum CUlaunchAttributeID: those valid for streams that change how a kernel on the stream runs.
STREAM_ATTRIBUTES = {
    "access policy window": 1,
    "synchronization policy": 3,
    "priority": 8,
    "memory sync domain map": 9,
    "memory sync domain": 10,
}
ATTRIBUTE_BYTES = 64  # CUlaunchAttributeValue: a union padded to 64 bytes
# cuda.h, CU_CTX_SCHED_MASK: of the context's flags, only how the host waits is a setting here (the rest,
# such as mapped host memory, are the context's from its creation and may not be set again).
SCHED_MASK = 0x07

Settings = dict[str, bytes]  # each setting's value as the driver gives it


class ContextSettings:
    """The settings of the calling thread's current context and of `stream` (a CUstream handle)."""

    def __init__(self, device: str, stream: int) -> None:
        self._driver: ctypes.CDLL | None = None if device == "cpu" else ctypes.CDLL("libcuda.so.1")
        self._stream = ctypes.c_void_p(stream)
        self._readable: list[str] = []
        self.initial: Settings = {}
        self.candidates: Settings | None = None  # the candidate's, while the initial ones are in place
        self.changed: set[str] = set()  # every setting the candidate changed, over the runner's life
        if self._driver is None:
            return
        # Only what this driver answers (cuCtxSetFlags came with CUDA 12.1; a legacy stream may have no
        # attributes): a setting it cannot read cannot be checked, nor be changed through it.
        for name in [*LIMITS, "cache preference", "scheduling flags", *STREAM_ATTRIBUTES]:
            if self._read_one(name) is not None:
                self._readable.append(name)
        self.initial = self.read()

    def read(self) -> Settings:
        return {name: value for name in self._readable if (value := self._read_one(name)) is not None}

    def for_candidate(self) -> None:
        """Before the candidate's call: the settings it left at its last call, where a baseline's came between."""
        if self.candidates is not None:
            self._apply(self.candidates, self.read())
            self.candidates = None

    def for_baseline(self) -> None:
        """Before a baseline's (or the empty) call: the context's initial settings, the candidate's kept."""
        if self._driver is None or self.candidates is not None:
            return
        now = self.read()
        differing = {name for name, value in now.items() if value != self.initial.get(name)}
        if differing:
            self.changed |= differing
            self.candidates = now
            self._apply(self.initial, now)

    def _read_one(self, name: str) -> bytes | None:
        driver = self._driver
        assert driver is not None
        if name in LIMITS:
            size = ctypes.c_size_t()
            code = driver.cuCtxGetLimit(ctypes.byref(size), ctypes.c_int(LIMITS[name]))
            return bytes(size) if code == 0 else None
        if name in STREAM_ATTRIBUTES:
            value = ctypes.create_string_buffer(ATTRIBUTE_BYTES)
            code = driver.cuStreamGetAttribute(self._stream, ctypes.c_int(STREAM_ATTRIBUTES[name]), value)
            return value.raw if code == 0 else None
        word = ctypes.c_uint()
        if name == "cache preference":
            return bytes(word) if driver.cuCtxGetCacheConfig(ctypes.byref(word)) == 0 else None
        if not hasattr(driver, "cuCtxSetFlags"):  # before CUDA 12.1: the flags cannot be set, nor set back
            return None
        if driver.cuCtxGetFlags(ctypes.byref(word)) != 0:
            return None
        return bytes(ctypes.c_uint(word.value & SCHED_MASK))

    def _apply(self, settings: Settings, now: Settings) -> None:
        """Each setting whose value `now` differs from `settings` set to it; a driver that refuses one is
        said."""
        driver = self._driver
        assert driver is not None
        for name, value in now.items():
            wanted = settings.get(name)
            if wanted is None or wanted == value:
                continue
            if name in LIMITS:
                size = ctypes.c_size_t.from_buffer_copy(wanted)
                code = driver.cuCtxSetLimit(ctypes.c_int(LIMITS[name]), size)
            elif name in STREAM_ATTRIBUTES:
                buffer = ctypes.create_string_buffer(wanted, ATTRIBUTE_BYTES)
                code = driver.cuStreamSetAttribute(
                    self._stream, ctypes.c_int(STREAM_ATTRIBUTES[name]), buffer
                )
            elif name == "cache preference":
                code = driver.cuCtxSetCacheConfig(ctypes.c_uint.from_buffer_copy(wanted))
            else:
                flags = ctypes.c_uint()
                code = driver.cuCtxGetFlags(ctypes.byref(flags))
                scheduling = ctypes.c_uint.from_buffer_copy(wanted).value
                code = code or driver.cuCtxSetFlags(ctypes.c_uint((flags.value & ~SCHED_MASK) | scheduling))
            if code:
                raise RuntimeError(
                    f"setting the context's {name} back between calls failed (CUresult {code})"
                )
