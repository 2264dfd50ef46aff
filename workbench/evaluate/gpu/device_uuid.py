"""The UUID of the GPU a device name means, asked of the driver without making a CUDA context. Standard
library only, like the worker.

A worker holds a GPU's lock (gpu_lock.py) from a candidate's begin, but a fresh worker learned the GPU
only from its first runner's hello: that runner, the first ncu and memcheck runs had made their contexts
and the runner its warm-up kernels by then, beside another worker's timed calls on the same GPU. Asked
here first, the lock is held before any of them starts. `cuInit` reads the devices (honouring
`CUDA_VISIBLE_DEVICES`, as the children will) and makes no context; the UUID is formatted as torch
formats `get_device_properties().uuid`, which the runner's hello reports.
"""

from __future__ import annotations

import ctypes
import uuid


def device_ordinal(device: str) -> int | None:
    """The CUDA ordinal `device` ("cuda", "cuda:N") names, or None for another device."""
    name, colon, index = device.partition(":")
    if name != "cuda":
        return None
    if not colon:
        return 0
    return int(index) if index.isdigit() else None


def format_uuid(raw: bytes) -> str:
    """16 bytes as `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (the standard form, as torch prints it)."""
    return f"GPU-{uuid.UUID(bytes=raw)}"


def gpu_uuid(device: str) -> tuple[str, str]:
    """(the UUID of `device`'s GPU, "") or ("", why there is none)."""
    ordinal = device_ordinal(device)
    if ordinal is None:
        return "", f"{device} is not a CUDA device"
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return "", f"the CUDA driver could not be loaded ({exc})"
    handle = ctypes.c_int()
    raw = (ctypes.c_ubyte * 16)()
    # The _v2 query names a MIG instance by its own UUID, as the runtime's device properties do.
    query = getattr(cuda, "cuDeviceGetUuid_v2", None) or cuda.cuDeviceGetUuid
    for step, code in (
        ("cuInit", lambda: cuda.cuInit(0)),
        ("cuDeviceGet", lambda: cuda.cuDeviceGet(ctypes.byref(handle), ordinal)),
        ("cuDeviceGetUuid", lambda: query(raw, handle)),
    ):
        status = code()
        if status != 0:
            return "", f"{step} failed with CUDA error {status}"
    return format_uuid(bytes(raw)), ""
