"""Tensors the judge reads out of the candidate's process, without the candidate holding the copy.

The candidate's process (the runner) exports the buffers it hands the candidate; the judge maps them,
copies what it needs into memory of its own at a moment the runner is stopped, and judges the copy.
The judge never exports anything: no memory of the judge is ever mapped into the candidate's process.

- CUDA: the driver's IPC handles (cuIpcGetMemHandle on the allocation holding the tensor, plus the
  offset into it); the judge opens them with cuIpcOpenMemHandle and checks the allocation's real size in
  its own context before touching a byte, so a forged handle or offset cannot make it read out of range.
- CPU (tests, and a host without a GPU): the runner's tensors live in files under /dev/shm; the judge
  reads them with its own descriptor, opened read-only.

An export is plain JSON (hex strings and integers): nothing from the runner is ever unpickled.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import secrets
from dataclasses import dataclass, field

import torch

SHM_DIR = "/dev/shm"
SHM_PREFIX = "ptxwb-"
IPC_HANDLE_BYTES = 64
CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1


class _IpcHandle(ctypes.Structure):
    """CUipcMemHandle: 64 opaque bytes, passed by value to cuIpcOpenMemHandle."""

    _fields_ = [("reserved", ctypes.c_char * IPC_HANDLE_BYTES)]


class ExchangeError(RuntimeError):
    """An export that cannot be read: forged, out of range, or its process is gone."""


@dataclass
class _Driver:
    """The few CUDA driver entry points the exchange needs, through ctypes."""

    lib: ctypes.CDLL

    @classmethod
    def load(cls) -> _Driver:
        return cls(ctypes.CDLL("libcuda.so.1"))

    def check(self, result: int, what: str) -> None:
        if result != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(result, ctypes.byref(name))
            raise ExchangeError(f"{what}: {(name.value or b'CUDA error').decode()} ({result})")

    def address_range(self, pointer: int) -> tuple[int, int]:
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        self.check(
            self.lib.cuMemGetAddressRange_v2(
                ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(pointer)
            ),
            "cuMemGetAddressRange",
        )
        return base.value, size.value

    def export(self, base: int) -> bytes:
        handle = _IpcHandle()
        self.check(
            self.lib.cuIpcGetMemHandle(ctypes.byref(handle), ctypes.c_uint64(base)), "cuIpcGetMemHandle"
        )
        return ctypes.string_at(ctypes.addressof(handle), IPC_HANDLE_BYTES)

    def open(self, handle: bytes) -> int:
        if len(handle) != IPC_HANDLE_BYTES:
            raise ExchangeError(f"an IPC handle has {IPC_HANDLE_BYTES} bytes, not {len(handle)}")
        pointer = ctypes.c_uint64()
        raw = _IpcHandle.from_buffer_copy(handle)
        self.check(
            self.lib.cuIpcOpenMemHandle_v2(
                ctypes.byref(pointer), raw, ctypes.c_uint(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
            ),
            "cuIpcOpenMemHandle",
        )
        return pointer.value

    def close(self, pointer: int) -> None:
        self.lib.cuIpcCloseMemHandle(ctypes.c_uint64(pointer))

    def warm_stream_ordered_pool(self, nbytes: int = 64 << 20) -> None:
        """One allocation from the device's default stream-ordered pool (what cudaMallocAsync draws on):
        the driver sets the pool up on first use, opening what it needs, before a sandbox forbids it."""
        pointer = ctypes.c_uint64()
        self.check(
            self.lib.cuMemAllocAsync(ctypes.byref(pointer), ctypes.c_size_t(nbytes), None), "cuMemAllocAsync"
        )
        self.check(self.lib.cuMemFreeAsync(pointer, None), "cuMemFreeAsync")
        self.check(self.lib.cuStreamSynchronize(None), "cuStreamSynchronize")


class _RemoteBytes:
    """`nbytes` of device memory at `pointer`, seen by torch through the CUDA array interface."""

    def __init__(self, pointer: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (pointer, False),  # torch takes no read-only flag; the copy is read once, at once
            "version": 3,
            "strides": None,
        }


def nbytes_of(shape: list[int], dtype: torch.dtype) -> int:
    count = 1
    for size in shape:
        count *= int(size)
    return count * torch.empty((), dtype=dtype).element_size()


@dataclass
class Exporter:
    """The runner's side: buffers made here and exported before any candidate code exists."""

    device: str
    _driver: _Driver | None = None
    _files: list[str] = field(default_factory=list)

    def empty(self, shape: list[int], dtype: torch.dtype) -> tuple[torch.Tensor, dict]:
        """A new contiguous tensor and its export."""
        if self.device == "cpu":
            return self._empty_cpu(shape, dtype)
        tensor = torch.empty(shape, dtype=dtype, device=self.device)
        if self._driver is None:
            self._driver = _Driver.load()
        base, _ = self._driver.address_range(tensor.data_ptr())
        handle = self._driver.export(base)
        return tensor, {"kind": "cuda", "handle": handle.hex(), "offset": tensor.data_ptr() - base}

    def _empty_cpu(self, shape: list[int], dtype: torch.dtype) -> tuple[torch.Tensor, dict]:
        size = max(1, nbytes_of(shape, dtype))
        name = f"{SHM_PREFIX}{os.getpid()}-{secrets.token_hex(8)}"
        path = os.path.join(SHM_DIR, name)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, size)
            mapping = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self._files.append(path)
        flat = torch.frombuffer(mapping, dtype=torch.uint8, count=size)
        tensor = flat[: nbytes_of(shape, dtype)].view(dtype).view(shape)
        return tensor, {"kind": "cpu", "name": name, "offset": 0}

    def warm(self) -> None:
        """What the candidate's process must have set up before its doors close."""
        if self.device != "cpu":
            if self._driver is None:
                self._driver = _Driver.load()
            self._driver.warm_stream_ordered_pool()

    def close(self) -> None:
        for path in self._files:
            try:
                os.unlink(path)
            except OSError:
                pass
        self._files.clear()


@dataclass
class Importer:
    """The judge's side: copies of exported tensors, read through mappings it closes at `release`."""

    device: str
    _driver: _Driver | None = None
    _opened: dict[str, tuple[int, int]] = field(default_factory=dict)  # handle -> (pointer, allocation size)

    def copy(self, export: dict, shape: list[int], dtype: torch.dtype) -> torch.Tensor:
        """A private copy of the exported tensor of `shape` and `dtype` (both from the task, not the export)."""
        nbytes = nbytes_of(shape, dtype)
        offset = export.get("offset")
        if not isinstance(offset, int) or offset < 0:
            raise ExchangeError("an export's offset is not a non-negative integer")
        if export.get("kind") == "cuda" and self.device != "cpu":
            raw = self._cuda_bytes(export, offset, nbytes).clone()
        elif export.get("kind") == "cpu" and self.device == "cpu":
            raw = self._cpu_bytes(export, offset, nbytes)
        else:
            raise ExchangeError(f"an export of kind {export.get('kind')!r} on a {self.device} judge")
        return raw.view(dtype).view(shape)

    def _cuda_bytes(self, export: dict, offset: int, nbytes: int) -> torch.Tensor:
        handle = export.get("handle")
        if not isinstance(handle, str):
            raise ExchangeError("a CUDA export has no handle")
        if self._driver is None:
            self._driver = _Driver.load()
        if handle not in self._opened:
            try:
                pointer = self._driver.open(bytes.fromhex(handle))
            except ValueError:
                raise ExchangeError("a CUDA export's handle is not hex") from None
            base, size = self._driver.address_range(pointer)
            self._opened[handle] = (base, size)
        base, size = self._opened[handle]
        if offset + nbytes > size:
            raise ExchangeError(f"an export reaches {offset + nbytes} bytes into an allocation of {size}")
        return torch.as_tensor(_RemoteBytes(base + offset, nbytes), device=self.device)

    def _cpu_bytes(self, export: dict, offset: int, nbytes: int) -> torch.Tensor:
        name = export.get("name")
        if not isinstance(name, str) or not name.startswith(SHM_PREFIX) or "/" in name or ".." in name:
            raise ExchangeError("a CPU export names no workbench shared-memory file")
        fd = os.open(os.path.join(SHM_DIR, name), os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            if offset + nbytes > size:
                raise ExchangeError(f"an export reaches {offset + nbytes} bytes into a file of {size}")
            data = os.pread(fd, nbytes, offset)
        finally:
            os.close(fd)
        if len(data) != nbytes:
            raise ExchangeError(f"an export gave {len(data)} of {nbytes} bytes")
        return (
            torch.frombuffer(bytearray(data), dtype=torch.uint8)
            if nbytes
            else torch.empty(0, dtype=torch.uint8)
        )

    def release(self) -> None:
        """Close every mapping (the candidate is done)."""
        if self._driver is not None:
            if self.device != "cpu":
                torch.cuda.synchronize()
            for base, _ in self._opened.values():
                self._driver.close(base)
        self._opened.clear()
