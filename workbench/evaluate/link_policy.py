"""What a candidate's library may import and what machine code it may hold, checked on the built file.

The source scan can be bypassed (a `dlsym` declared by hand, names pasted by the preprocessor); the
library's dynamic symbol table and machine code cannot. A library may import:
- from the C library only an allowlist (memory, strings, formatted output, math, exit): no dynamic
  symbol lookup (`dlopen`, `dlsym`, `dl_iterate_phdr`, `_r_debug`, `getauxval`), no `syscall`, `ptrace`,
  `process_vm_*`, `fork`/`exec*`/`posix_spawn`/`system`, no `mprotect`/`mmap`, no file opening (so no
  `/proc/self/maps` or `/proc/self/mem`), no `getenv`/`environ` (no looking for a profiler), no threads;
- the C++ runtime except file streams, threads and the filesystem library;
- the CUDA runtime and driver, except their internal export tables and the profiler controls;
- TVM-FFI's tensor, error and stream calls, not its global function registry (a door into Python).
Its machine code may not hold a system call instruction (`syscall`, `sysenter`, `int 0x80`): the only
way to the kernel is through the functions above.

Findings are symbol names (mangled); the build stage demangles them for the message.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

GLIBC_ALLOWED = frozenset(
    [
        "malloc",
        "calloc",
        "realloc",
        "free",
        "aligned_alloc",
        "posix_memalign",
        "memalign",
        "memcpy",
        "memmove",
        "memset",
        "memcmp",
        "memchr",
        "strlen",
        "strnlen",
        "strcmp",
        "strncmp",
        "strcpy",
        "strncpy",
        "strcat",
        "strncat",
        "strchr",
        "strrchr",
        "strstr",
        "strspn",
        "strcspn",
        "strtol",
        "strtoul",
        "strtoll",
        "strtoull",
        "strtod",
        "strtof",
        "atoi",
        "atol",
        "atoll",
        "atof",
        "printf",
        "fprintf",
        "sprintf",
        "snprintf",
        "vprintf",
        "vfprintf",
        "vsprintf",
        "vsnprintf",
        "puts",
        "fputs",
        "putchar",
        "fputc",
        "putc",
        "fwrite",
        "fflush",
        "stdout",
        "stderr",
        "__printf_chk",
        "__fprintf_chk",
        "__sprintf_chk",
        "__snprintf_chk",
        "__vsnprintf_chk",
        "__vfprintf_chk",
        "__vsprintf_chk",
        "__memcpy_chk",
        "__memmove_chk",
        "__memset_chk",
        "__strcpy_chk",
        "__strcat_chk",
        "__strncpy_chk",
        "__stack_chk_fail",
        "__assert_fail",
        "abort",
        "exit",
        "_exit",
        "atexit",
        "__cxa_atexit",
        "__cxa_finalize",
        "__cxa_thread_atexit_impl",
        "__errno_location",
        "strerror",
        "qsort",
        "bsearch",
        "abs",
        "labs",
        "llabs",
        "div",
        "ldiv",
        "rand",
        "srand",
        "clock",
        "clock_gettime",
        "time",
        "gettimeofday",
        "__tls_get_addr",
        "__libc_single_threaded",
        "pthread_mutex_lock",
        "pthread_mutex_unlock",
        "pthread_mutex_init",
        "pthread_mutex_destroy",
        "pthread_once",
        "pthread_key_create",
        "pthread_key_delete",
        "pthread_getspecific",
        "pthread_setspecific",
    ]
)
_MATH = re.compile(
    r"^(a?(sin|cos|tan)h?|atan2|sqrt|cbrt|exp2?|exp10|expm1|log(2|10|1p|b)?|pow|fabs|floor|ceil|trunc|round|"
    r"l?lround|l?lrint|rint|nearbyint|fmod|remainder|fmin|fmax|fdim|fma|hypot|erfc?|tgamma|lgamma|frexp|ldexp|"
    r"modf|copysign|nan|sincos|__isnan|__isinf|__finite|__isnanf|__isinff)[fl]?$"
)
_CXX_DENIED = re.compile(r"filebuf|fstream|basic_file|6thread|this_thread|10filesystem|12__basic_file")
_CUDA_DENIED = re.compile(r"^(cuda|cu)GetExportTable|^(cuda|cu)Profiler(Start|Stop|Initialize)")
TVMFFI_ALLOWED = frozenset(
    [
        "TVMFFIAnyViewToOwnedAny",
        "TVMFFIBacktrace",
        "TVMFFIBigIntFromByteArray",
        "TVMFFIBigIntGetContentByteArray",
        "TVMFFIBytesFromByteArray",
        "TVMFFIStringFromByteArray",
        "TVMFFIDataTypeFromString",
        "TVMFFIDataTypeToString",
        "TVMFFIEnvCheckSignals",
        "TVMFFIEnvGetStream",
        "TVMFFIEnvTensorAlloc",
        "TVMFFIErrorCreate",
        "TVMFFIErrorCreateWithCauseAndExtraContext",
        "TVMFFIErrorMoveFromRaised",
        "TVMFFIErrorSetRaised",
        "TVMFFIErrorSetRaisedFromCStr",
        "TVMFFIErrorSetRaisedFromCStrParts",
        "TVMFFIGetTypeInfo",
        "TVMFFIGetVersion",
        "TVMFFIHandleDeinitOnce",
        "TVMFFIHandleInitOnce",
        "TVMFFIObjectDecRef",
        "TVMFFIObjectIncRef",
        "TVMFFITypeKeyToIndex",
        "TVMFFITensorCreateUnsafeView",
        "TVMFFITensorFromDLPack",
        "TVMFFITensorFromDLPackVersioned",
        "TVMFFITensorToDLPack",
        "TVMFFITensorToDLPackVersioned",
    ]
)
_TVM_CXX_DENIED = re.compile(r"Function|Global|Registry|reflection|Module|EnvMod")
_LINKER_NOISE = frozenset({"__gmon_start__", "_ITM_registerTMCloneTable", "_ITM_deregisterTMCloneTable"})
_SYSCALL = re.compile(r"\t(syscall|sysenter|int\s+\$0x80)\s*$", re.MULTILINE)


class BinutilsMissing(RuntimeError):
    """nm or objdump is not on PATH: the built library cannot be checked, so it is not judged."""


def import_allowed(symbol: str) -> bool:
    """Whether an undefined dynamic symbol (`name@VERSION` as `nm -D` prints it) may be imported."""
    name, _, version = symbol.partition("@")
    version = version.lstrip("@")
    if name in _LINKER_NOISE:
        return True
    if version.startswith("GLIBC_"):
        return name in GLIBC_ALLOWED or bool(_MATH.match(name))
    if version.startswith(("GLIBCXX_", "CXXABI_", "GCC_")):
        return not _CXX_DENIED.search(name)
    if version.startswith("libcudart.so") or re.match(r"^(cu[A-Z]\w*|cuda[A-Z_]\w*|__cuda\w*)$", name):
        return not _CUDA_DENIED.search(name)
    if name.startswith("TVMFFI"):
        return name in TVMFFI_ALLOWED
    if name.startswith("_ZN3tvm3ffi"):
        return not _TVM_CXX_DENIED.search(name)
    return False  # anything else resolves against whatever the process loaded: Python, torch, cuBLAS


@dataclass(frozen=True)
class LinkReport:
    exports_run: bool
    foreign_imports: list[str]
    system_calls: int  # system call instructions in the library's own code


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise BinutilsMissing(f"{name} (binutils) is not installed: the built library cannot be checked")
    return path


def check_library(library: Path, export_symbol: str) -> LinkReport:
    """The library's dynamic symbols and machine code against the policy above."""
    symbols = subprocess.run(
        [_tool("nm"), "-D", str(library)], check=False, capture_output=True, text=True, timeout=60
    )
    if symbols.returncode != 0:
        raise BinutilsMissing(f"nm could not read the library: {symbols.stderr.strip()[:200]}")
    defined: set[str] = set()
    foreign: list[str] = []
    for line in symbols.stdout.splitlines():
        parts = line.split()  # `U name` / `w name` (undefined, weak), `address type name` (defined)
        if len(parts) == 2 and parts[0] in ("U", "w", "v") and not import_allowed(parts[1]):
            foreign.append(parts[1])
        elif len(parts) == 3:
            defined.add(parts[2])
    code = subprocess.run(
        [_tool("objdump"), "-d", "--no-show-raw-insn", str(library)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if code.returncode != 0:
        raise BinutilsMissing(f"objdump could not read the library: {code.stderr.strip()[:200]}")
    return LinkReport(export_symbol in defined, sorted(foreign), len(_SYSCALL.findall(code.stdout)))
