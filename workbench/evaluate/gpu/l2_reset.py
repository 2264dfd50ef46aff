"""What one call may leave in L2 for the next: the persisting-L2 set-aside and the lines marked persisting.

A kernel may raise its context's persisting-L2 limit and mark its operands persisting (an access policy
window on the stream it is given): those lines then survive the L2 flush before the next call, its own
or a baseline's, which runs slower beside them. Before every call the runner sets the limit back to 0
and demotes every persisting line to normal, so the flush that follows evicts them too. Through the
driver API (libcuda.so.1, already loaded in any CUDA process) with ctypes: standard library only.
"""

from __future__ import annotations

import ctypes

CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06  # cuda.h, enum CUlimit
CUDA_ERROR_NOT_SUPPORTED = 801  # a GPU without a persisting set-aside (before Ampere): nothing to reset


class PersistingL2:
    def __init__(self, device: str) -> None:
        self._driver: ctypes.CDLL | None = None
        if device != "cpu":
            self._driver = ctypes.CDLL("libcuda.so.1")

    def reset(self) -> int:
        """Limit 0 and no persisting line left, in the calling thread's current context: the first
        non-zero CUresult, or 0."""
        if self._driver is None:
            return 0
        limit = self._driver.cuCtxSetLimit(
            ctypes.c_int(CU_LIMIT_PERSISTING_L2_CACHE_SIZE), ctypes.c_size_t(0)
        )
        demoted = self._driver.cuCtxResetPersistingL2Cache()
        return next((int(code) for code in (limit, demoted) if code not in (0, CUDA_ERROR_NOT_SUPPORTED)), 0)
