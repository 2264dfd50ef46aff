"""What a candidate's library may import and what machine code it may hold, checked on the built file.

The source scan can be bypassed (a `dlsym` declared by hand, names pasted by the preprocessor); the
library's dynamic symbol table and machine code cannot. A library may import:
- from the C library only an allowlist (memory, strings, characters, formatted output, math, time, locks,
  exit): no dynamic symbol lookup, system calls, other processes or executable memory (`banned`: what a
  cheater does), and no files, environment or threads (`unsupported`: honest elsewhere, not run here);
- the C++ runtime except file streams, threads and the filesystem library;
- the CUDA runtime and driver, except their internal export tables and the profiler controls;
- from TVM-FFI what `tvm_ffi_symbols` allows: the tensor, error, string and object calls its headers
  make, not its global function registry or anything else that reaches Python.
Its machine code may not hold a system call instruction (`syscall`, `sysenter`, `int 0x80`): the only
way to the kernel is through the functions above.

Each refusal carries its reason and what to write instead; the build stage finds the call site.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from workbench.evaluate.build.tvm_ffi_symbols import Refusal, rule_for

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
        "perror",
        "strtok",
        "strtok_r",
        "strdup",
        "strndup",
        "sscanf",
        "vsscanf",
        "malloc_usable_size",
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
        # Character classes (<cctype>: glibc's tables, or the functions where not inlined).
        "__ctype_b_loc",
        "__ctype_tolower_loc",
        "__ctype_toupper_loc",
        "tolower",
        "toupper",
        "isalnum",
        "isalpha",
        "isblank",
        "iscntrl",
        "isdigit",
        "isgraph",
        "islower",
        "isprint",
        "ispunct",
        "isspace",
        "isupper",
        "isxdigit",
        # Locks and waits on the calling thread (std::shared_mutex, std::timed_mutex, this_thread's id,
        # yield and sleep): the same class as the mutex above, and no more than a spin on clock_gettime can do.
        "pthread_mutex_trylock",
        "pthread_mutex_timedlock",
        "pthread_mutex_clocklock",
        "pthread_rwlock_init",
        "pthread_rwlock_destroy",
        "pthread_rwlock_rdlock",
        "pthread_rwlock_wrlock",
        "pthread_rwlock_tryrdlock",
        "pthread_rwlock_trywrlock",
        "pthread_rwlock_unlock",
        "pthread_self",
        "pthread_equal",
        "sched_yield",
        "nanosleep",
        "clock_nanosleep",
        "usleep",
        # Calendar time for a log line, and reading the host's floating-point environment (<cfenv>); not
        # setting it, which would change the arithmetic of the harness code sharing the process.
        "timespec_get",
        "difftime",
        "mktime",
        "gmtime",
        "gmtime_r",
        "localtime",
        "localtime_r",
        "strftime",
        "fegetround",
        "fetestexcept",
        "fegetenv",
        "fegetexceptflag",
    ]
)
_MATH = re.compile(
    r"^(a?(sin|cos|tan)h?|atan2|sqrt|cbrt|exp2?|exp10|expm1|log(2|10|1p|b)?|pow|fabs|floor|ceil|trunc|round|"
    r"l?lround|l?lrint|rint|nearbyint|fmod|remainder|fmin|fmax|fdim|fma|hypot|erfc?|tgamma|lgamma|frexp|ldexp|"
    r"modf|copysign|nan|sincos|__isnan|__isinf|__finite|__isnanf|__isinff)[fl]?$"
)
_CXX_FILES = re.compile(r"filebuf|fstream|basic_file|10filesystem|12__basic_file")
_CXX_THREADS = re.compile(r"6thread|this_thread")
# Of std::thread's own symbols, the one that starts nothing: the host's CPU count (a pool size in a log).
_CXX_THREAD_QUERIES = frozenset({"_ZNSt6thread20hardware_concurrencyEv"})
_CUDA_EXPORT_TABLE = re.compile(r"^(cuda|cu)GetExportTable")
_CUDA_PROFILER = re.compile(r"^(cuda|cu)Profiler(Start|Stop|Initialize)")
_LINKER_NOISE = frozenset({"__gmon_start__", "_ITM_registerTMCloneTable", "_ITM_deregisterTMCloneTable"})
_SYSCALL = re.compile(r"\t(syscall|sysenter|int\s+\$0x80)\s*$", re.MULTILINE)
_CUDA_NAME = re.compile(r"^(cu[A-Z]\w*|cuda[A-Z_]\w*|__cuda\w*)$")

_STDERR = "print to stderr (fprintf(stderr, …), std::cerr) or raise with TVM_FFI_THROW"
# Denied C library functions by class: (names, refusal, why, instead).
_GLIBC_DENIED: tuple[tuple[frozenset[str], Refusal, str, str], ...] = (
    (
        frozenset(
            {
                "dlopen",
                "dlmopen",
                "dlsym",
                "dlvsym",
                "dladdr",
                "dladdr1",
                "dlinfo",
                "dl_iterate_phdr",
                "_r_debug",
                "getauxval",
                "_dl_find_object",
            }
        ),
        Refusal.banned,
        "looks up code at run time: a way to reach a library without naming it",
        "call the CUDA runtime/driver directly (cudaGetDriverEntryPoint for driver entry points)",
    ),
    (
        frozenset(
            {
                "syscall",
                "ptrace",
                "process_vm_readv",
                "process_vm_writev",
                "fork",
                "vfork",
                "clone",
                "clone3",
                "execve",
                "execv",
                "execvp",
                "execvpe",
                "execl",
                "execlp",
                "execle",
                "fexecve",
                "posix_spawn",
                "posix_spawnp",
                "system",
                "popen",
                "kill",
                "tgkill",
                "prctl",
            }
        ),
        Refusal.banned,
        "reaches the kernel or another process directly",
        "remove it: a kernel's host code only launches its kernels",
    ),
    (
        frozenset({"mprotect", "pkey_mprotect", "memfd_create", "mremap", "remap_file_pages"}),
        Refusal.banned,
        "changes what memory may execute: the way unchecked code is brought in",
        "remove it",
    ),
    (
        frozenset(
            {
                "getenv",
                "secure_getenv",
                "setenv",
                "unsetenv",
                "putenv",
                "clearenv",
                "environ",
                "__environ",
                "_environ",
            }
        ),
        Refusal.unsupported,
        "reads or changes the environment, which differs between the profiled and the timed runs",
        "use a compile-time constant (constexpr or a #define) for a debug switch",
    ),
    (
        frozenset({"pthread_create", "pthread_join", "pthread_detach", "thrd_create"}),
        Refusal.unsupported,
        "starts threads: the candidate's process runs on the one thread the sandbox watches",
        "launch more blocks, or more streams from the calling thread",
    ),
)


# Kernels a library's templates define (their own namespace in the mangled name): CUB's device-wide
# algorithms and Thrust's (which run on CUB's), CUTLASS/CuTe's. Instantiated in the candidate's file they
# are kernels of its module, so every later tier would count them as its own; a kernel of the user's own
# that only takes a library type as a template argument (`_Z6reduceIN3cub3SumEEvv`) is not one.
_LIBRARY_KERNEL = re.compile(r"^_ZN(?:3cub|6thrust|7cutlass|4cute)\d")
# CUB's umbrella header defines an empty kernel it only queries (the PTX version it was built for): no work.
_EMPTY_KERNEL = re.compile(r"^_ZN3cub\w*?6detail11EmptyKernelIvEEvv$")


def library_kernels(kernels: list[str]) -> list[str]:
    """The mangled kernel names (ptxas's entry functions) that are a library's own kernels."""
    return [name for name in kernels if _LIBRARY_KERNEL.match(name) and not _EMPTY_KERNEL.match(name)]


class BinutilsMissing(RuntimeError):
    """nm or objdump is not on PATH: the built library cannot be checked, so it is not judged."""


@dataclass(frozen=True)
class Denial:
    """Why a symbol the library imports is refused, and what to write instead."""

    symbol: str
    refusal: Refusal
    why: str
    instead: str


def _glibc_denial(name: str) -> tuple[Refusal, str, str] | None:
    # Newer glibc binds strtol and sscanf to their C99/C23 twins (__isoc23_strtol), and -ffast-math host
    # code binds math to its finite-only twins (__expf_finite): the same functions by other names.
    name = re.sub(r"^__isoc(99|23)_", "", name)
    name = re.sub(r"^__(\w+)_finite$", r"\1", name)
    if name in GLIBC_ALLOWED or _MATH.match(name):
        return None
    for names, refusal, why, instead in _GLIBC_DENIED:
        if name in names:
            return refusal, why, instead
    if re.match(
        r"^(f?open|openat|creat|fdopen|freopen|__open|stat|lstat|fstat|access|opendir|readlink|"
        r"unlink|remove|rename|mkdir|rmdir|chmod|truncate|read|write|pread|pwrite)",
        name,
    ):
        return Refusal.unsupported, "reads or writes files: a kernel's process opens none", _STDERR
    if re.match(r"^(mmap|munmap|madvise|mlock|brk|sbrk)", name):
        return (
            Refusal.unsupported,
            "maps memory by hand",
            "use malloc, cudaMalloc(Async) or TVMFFIEnvTensorAlloc",
        )
    return (
        Refusal.unsupported,
        (
            "is outside the C library functions a kernel's host code may call here (memory, strings, formatted "
            "output, characters, math, time, locks, exit)"
        ),
        "keep host code to launching kernels and reporting errors",
    )


def _rule(name: str, version: str) -> tuple[Refusal, str, str] | None:
    if name in _LINKER_NOISE:
        return None
    if version.startswith("GLIBC_"):
        return _glibc_denial(name)
    if version.startswith(("GLIBCXX_", "CXXABI_", "GCC_")):
        if _CXX_FILES.search(name):
            return Refusal.unsupported, "opens files (file streams, std::filesystem)", _STDERR
        if _CXX_THREADS.search(name) and name not in _CXX_THREAD_QUERIES:
            return Refusal.unsupported, "starts threads (std::thread)", "launch more blocks or streams"
        return None
    if version.startswith("libcudart.so") or _CUDA_NAME.match(name):
        if _CUDA_EXPORT_TABLE.search(name):
            return Refusal.banned, "reads the CUDA runtime's internal export tables", "use the documented API"
        if _CUDA_PROFILER.search(name):
            return (
                Refusal.unsupported,
                "starts or stops the profiler, which the evaluator brackets around the profiled call itself",
                "remove it",
            )
        return None
    tvm = rule_for(name)
    if tvm is not None:
        return None if tvm.allowed else (tvm.refusal or Refusal.unsupported, tvm.why, tvm.instead)
    return (
        Refusal.banned,
        (
            "resolves against a library the process happens to load (Python, torch, cuBLAS…): a kernel brings "
            "its own code"
        ),
        "link nothing but the CUDA runtime/driver and TVM-FFI",
    )


def denial(symbol: str) -> Denial | None:
    """Why an undefined dynamic symbol (`name@VERSION` as `nm -D` prints it) may not be imported, or None."""
    name, _, version = symbol.partition("@")
    found = _rule(name, version.lstrip("@"))
    return Denial(symbol, *found) if found else None


def import_allowed(symbol: str) -> bool:
    return denial(symbol) is None


@dataclass(frozen=True)
class LinkReport:
    exports_run: bool
    denials: list[Denial]
    system_calls: int  # system call instructions in the library's own code
    disassembly: str  # objdump's listing, where a denied symbol's call sites are found


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
    denied: list[Denial] = []
    for line in symbols.stdout.splitlines():
        parts = line.split()  # `U name` / `w name` (undefined, weak), `address type name` (defined)
        found = denial(parts[1]) if len(parts) == 2 and parts[0] in ("U", "w", "v") else None
        if found:
            denied.append(found)
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
    denied.sort(key=lambda d: (d.refusal != Refusal.banned, d.symbol))  # a ban first: it decides the status
    return LinkReport(export_symbol in defined, denied, len(_SYSCALL.findall(code.stdout)), code.stdout)
