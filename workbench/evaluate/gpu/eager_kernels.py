"""Load the candidate's kernels onto the GPU when its library loads, not at their first launch.

Under CUDA's lazy loading (the default), a kernel's code reaches the GPU at its first launch. When that
launch sits behind a kernel that never ends, the load waits with a driver lock held, and CUPTI's flush
waits behind it: the timeout could not say which kernel was running (seen on the H200 with a kernel
queued behind a spinning one; with CUDA_MODULE_LOADING=EAGER the flush returned in under 1 ms). So the
runner asks the runtime for each own kernel's attributes, which loads it, right after the library loads.

The runtime knows a kernel by its host function's address. Those symbols are local to the library, so
their offsets come from its ELF symbol table (standard library only: a runner-side reader of one table).
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Iterable
from pathlib import Path

SHT_SYMTAB = 2
STT_FUNC = 2
RTLD_DI_LINKMAP = 2  # dlfcn.h: the object's link_map, whose first field is its load base
ATTRIBUTES_BYTES = 1024  # more than cudaFuncAttributes needs in any CUDA release


def function_offsets(library: Path, names: Iterable[str]) -> dict[str, int]:
    """The address in `library` (before relocation) of each named function found in its symbol table;
    nothing from a file this reader cannot follow (the kernels then load at their first launch)."""
    try:
        return _symbols(library.read_bytes(), set(names))
    except (OSError, struct.error, IndexError, ValueError):
        return {}


def _symbols(data: bytes, wanted: set[str]) -> dict[str, int]:
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return {}  # only 64-bit little-endian ELF, the only kind nvcc builds here
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    found: dict[str, int] = {}
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind != SHT_SYMTAB or not entsize:
            continue
        strings = sections[link][4]
        for start in range(offset, offset + size, entsize):
            name_at, info, _other, shndx, value, _size = struct.unpack_from("<IBBHQQ", data, start)
            if info & 0xF != STT_FUNC or shndx == 0 or not value:
                continue
            end = data.index(b"\0", strings + name_at)
            name = data[strings + name_at : end].decode(errors="replace")
            if name in wanted:
                found[name] = value
    return found


def load_base(library: Path) -> int | None:
    """Where the already loaded `library` sits in this process; None if it is not loaded."""
    try:
        handle = ctypes.CDLL(str(library), mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    link_map = ctypes.c_void_p()
    if libc.dlinfo(ctypes.c_void_p(handle._handle), RTLD_DI_LINKMAP, ctypes.byref(link_map)) != 0:
        return None
    return ctypes.c_size_t.from_address(link_map.value or 0).value if link_map.value else None


def load_now(runtime: ctypes.CDLL, base: int, offsets: dict[str, int]) -> list[str]:
    """Ask `runtime` (the process's libcudart) for each kernel's attributes, which loads it; the names
    it loaded. A name the runtime does not know is left to load at its launch, and its error cleared so
    the candidate's own `cudaGetLastError` does not see it."""
    attributes = ctypes.create_string_buffer(ATTRIBUTES_BYTES)
    loaded = [
        name
        for name, offset in sorted(offsets.items())
        if runtime.cudaFuncGetAttributes(attributes, ctypes.c_void_p(base + offset)) == 0
    ]
    runtime.cudaGetLastError()
    return loaded
