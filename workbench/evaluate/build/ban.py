"""Library ban: a source scan run before compiling.

A candidate must bring its own kernels. The scan rejects the vendor libraries (cuBLAS/cuBLASLt,
cuDNN, CUTLASS/CuTe, Thrust, CUB's device-wide algorithms; CUB's block and warp primitives are fine), any `#include` outside a small allow-list, and dynamic loading
(`dlopen`/`dlsym`, or a library file name in a string literal). Comments are ignored; string
literals are scanned on their own. Every finding names its line and rule, and whether it is `banned`
(a library kernel, dynamic loading: what a cheater does) or `unsupported` (a header off the list, a
profiler call: honest constructs the workbench does not run), with what to write instead.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from workbench.evaluate.build.tvm_ffi_symbols import Refusal
from workbench.evaluate.result import BuildStage, Status

# The toolkit's own headers. libcu++ (`cuda/...`: barrier, pipeline, ptx, std; `nv/target`) is allowed:
# it wraps single PTX instructions and ships no kernels. Thrust is a library of kernels: not allowed; CUB's
# headers are (_ALLOWED_PREFIXES below).
_CUDA_HEADERS = frozenset(
    {
        "cuda.h",
        "cuda_runtime.h",
        "cuda_runtime_api.h",
        "cudaTypedefs.h",
        "driver_types.h",
        "driver_functions.h",
        "vector_types.h",
        "vector_functions.h",
        "device_launch_parameters.h",
        "device_functions.h",
        "builtin_types.h",
        "host_defines.h",
        "cuda_device_runtime_api.h",
        "cuda_bf16.h",
        "cuda_bf16.hpp",
        "cuda_fp16.h",
        "cuda_fp16.hpp",
        "cuda_fp8.h",
        "cuda_fp8.hpp",
        "cuda_fp6.h",
        "cuda_fp4.h",
        "cuda_fp6.hpp",
        "cuda_fp4.hpp",
        "cuda_occupancy.h",
        "cuComplex.h",
        "sm_60_atomic_functions.h",
        "sm_61_intrinsics.h",
        "sm_32_intrinsics.h",
        "sm_35_intrinsics.h",
        "sm_30_intrinsics.h",
        "sm_20_intrinsics.h",
        "device_atomic_functions.h",
        "device_double_functions.h",
        "cuda_surface_types.h",
        "cuda_pipeline.h",
        "cuda_pipeline_primitives.h",
        "cuda_awbarrier.h",
        "cuda_awbarrier_primitives.h",
        "mma.h",
        "sm_90_rt.h",
        "sm_80_rt.h",
        "math_constants.h",
        "cooperative_groups.h",
        "cuda_profiler_api.h",
        "library_types.h",
        "surface_types.h",
        "texture_types.h",
        "cuda_texture_types.h",
        "texture_fetch_functions.h",
        "surface_functions.h",
        "crt/host_defines.h",
        # cuRAND's device API is header-only (no library kernels); a host call into libcurand is the link
        # policy's to refuse.
        "curand_kernel.h",
        # What cuda_runtime.h itself brings in, named directly by older or terser code: device intrinsics,
        # atomics, math, the runtime's types and its internal wrappers (nvcc warns on some; none is a
        # refusal). Not crt/host_runtime.h (fatbinary registration), CUPTI, nvperf or NVVM.
        "channel_descriptor.h",
        "common_functions.h",
        "math_functions.h",
        "host_config.h",
        "device_types.h",
        "cuda_stdint.h",
        "cuda_awbarrier_helpers.h",
        "cuda_pipeline_helpers.h",
        "device_atomic_functions.hpp",
        "sm_20_atomic_functions.h",
        "sm_20_atomic_functions.hpp",
        "sm_20_intrinsics.hpp",
        "sm_30_intrinsics.hpp",
        "sm_32_atomic_functions.h",
        "sm_32_atomic_functions.hpp",
        "sm_32_intrinsics.hpp",
        "sm_35_atomic_functions.h",
        "sm_60_atomic_functions.hpp",
        "sm_61_intrinsics.hpp",
        "vector_functions.hpp",
        "texture_indirect_functions.h",
        "surface_indirect_functions.h",
        "crt/common_functions.h",
        "crt/device_double_functions.h",
        "crt/device_double_functions.hpp",
        "crt/device_fp128_functions.h",
        "crt/device_functions.h",
        "crt/device_functions.hpp",
        "crt/func_macro.h",
        "crt/host_config.h",
        "crt/math_functions.h",
        "crt/math_functions.hpp",
        "crt/mma.h",
        "crt/mma.hpp",
        "crt/sm_70_rt.h",
        "crt/sm_70_rt.hpp",
        "crt/sm_80_rt.h",
        "crt/sm_80_rt.hpp",
        "crt/sm_90_rt.h",
        "crt/sm_90_rt.hpp",
        "crt/sm_100_rt.h",
        "crt/sm_100_rt.hpp",
        "crt/storage_class.h",
    }
)
# CUB's headers: its block-, warp- and thread-level primitives compile into the candidate's own kernels;
# its device-wide algorithms (library kernels) are refused by name here and by kernel in the build.
# NVTX's (`nvtx3/`): header-only ranges, built with no way to load a tool (`nvcc.nvcc_command`).
_ALLOWED_PREFIXES = ("cooperative_groups/", "cuda/", "nv/", "tvm/ffi/", "dlpack/", "cub/", "nvtx3/")

# The C and C++ standard libraries' headers, all of them (and libstdc++'s everything-header): what host
# code then calls is the link policy's to judge (files, signals, jumps, threads are refused there, at the
# line that calls them), so a header left in but unused refuses nothing.
_CXX_HEADERS = frozenset(
    [
        "algorithm",
        "any",
        "array",
        "atomic",
        "barrier",
        "bit",
        "bits/stdc++.h",
        "bitset",
        "cassert",
        "ccomplex",
        "cctype",
        "cerrno",
        "cfenv",
        "cfloat",
        "charconv",
        "chrono",
        "cinttypes",
        "ciso646",
        "climits",
        "clocale",
        "cmath",
        "codecvt",
        "compare",
        "complex",
        "concepts",
        "condition_variable",
        "coroutine",
        "csetjmp",
        "csignal",
        "cstdalign",
        "cstdarg",
        "cstdbool",
        "cstddef",
        "cstdint",
        "cstdio",
        "cstdlib",
        "cstring",
        "ctgmath",
        "ctime",
        "cuchar",
        "cwchar",
        "cwctype",
        "deque",
        "exception",
        "execution",
        "expected",
        "filesystem",
        "flat_map",
        "flat_set",
        "format",
        "forward_list",
        "fstream",
        "functional",
        "future",
        "generator",
        "initializer_list",
        "iomanip",
        "ios",
        "iosfwd",
        "iostream",
        "istream",
        "iterator",
        "latch",
        "limits",
        "list",
        "locale",
        "map",
        "mdspan",
        "memory",
        "memory_resource",
        "mutex",
        "new",
        "numbers",
        "numeric",
        "optional",
        "ostream",
        "print",
        "queue",
        "random",
        "ranges",
        "ratio",
        "regex",
        "scoped_allocator",
        "semaphore",
        "set",
        "shared_mutex",
        "source_location",
        "span",
        "spanstream",
        "sstream",
        "stack",
        "stacktrace",
        "stdexcept",
        "stdfloat",
        "stop_token",
        "streambuf",
        "string",
        "string_view",
        "syncstream",
        "system_error",
        "thread",
        "tuple",
        "type_traits",
        "typeindex",
        "typeinfo",
        "unordered_map",
        "unordered_set",
        "utility",
        "valarray",
        "variant",
        "vector",
        "version",
    ]
)
_C_HEADERS = frozenset(
    [
        "assert.h",
        "complex.h",
        "ctype.h",
        "errno.h",
        "fenv.h",
        "float.h",
        "inttypes.h",
        "iso646.h",
        "limits.h",
        "locale.h",
        "math.h",
        "setjmp.h",
        "signal.h",
        "stdalign.h",
        "stdarg.h",
        "stdbool.h",
        "stddef.h",
        "stdint.h",
        "stdio.h",
        "stdlib.h",
        "stdnoreturn.h",
        "string.h",
        "tgmath.h",
        "time.h",
        "uchar.h",
        "wchar.h",
        "wctype.h",
    ]
)
# The POSIX headers that declare what the link policy lets host code call (`gettimeofday`, `usleep`,
# `sched_yield`, pthread's mutexes and once; the rest they declare is refused there, at the calling line).
_POSIX_HEADERS = frozenset(["unistd.h", "sys/time.h", "sys/types.h", "pthread.h", "sched.h"])

# (rule, pattern over a header name, why) for headers that get a named rule rather than the generic one.
_LIBRARY_HEADERS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("cublas", re.compile(r"^cublas", re.IGNORECASE), "cuBLAS/cuBLASLt is not allowed"),
    ("cudnn", re.compile(r"^cudnn", re.IGNORECASE), "cuDNN is not allowed"),
    ("cutlass", re.compile(r"^(cutlass|cute)(/|\.h)", re.IGNORECASE), "CUTLASS/CuTe is not allowed"),
    ("cub_thrust", re.compile(r"^thrust(/|\.cuh)", re.IGNORECASE), "Thrust's algorithms are not allowed"),
)

# The libraries' own names: their API's camelCase functions and types (cublasCreate_v2, cublasLtMatmul,
# cudnnHandle_t) and upper-case macros and enums (CUBLAS_OP_T, CUDNN_STATUS_SUCCESS, CUTLASS_DEVICE), and
# CUTLASS's namespace. A name of the user's own that only mentions one (cutlass_style_swizzle, cublas_like)
# is not theirs; a call into the library still has to be imported, which the link policy refuses.
_CUBLAS_API = r"\bcublas(?:Lt)?[A-Z]\w*|\bCUBLAS(?:LT)?_[A-Z0-9]\w*"
_CUDNN_API = r"\bcudnn[A-Z]\w*|\bCUDNN_[A-Z0-9]\w*"

# The assembler's own way to read a file while the library is built (`.incbin` its bytes, `.include` its
# lines; the file's quoted name follows): past the include allow-list, into the library or the compiler's
# messages, which the agent reads.
_ASSEMBLER_FILE = re.compile(r'\.\s*inc(?:bin|lude)\s*"')
_ASSEMBLER_FILE_WHY = "an assembler directive that reads a file while the library is built"
# `#pragma GCC dependency "FILE"` opens FILE to compare its date: like `__has_include` on a path, its error
# tells a file beyond the confined build's reach ("permission denied") from none ("no such file").
_GCC_DEPENDENCY = r"\bGCC\s+dependency\s*[\"<]"  # its operand a file name, as an include's
_GCC_DEPENDENCY_WHY = "#pragma GCC dependency reads another file's date while the library is built"
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]+|[0-7]{1,3}|.)", re.DOTALL)

# (rule, pattern over code with comments and strings blanked, why)
_CODE_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("cublas", re.compile(_CUBLAS_API), "cuBLAS/cuBLASLt is not allowed"),
    ("cudnn", re.compile(_CUDNN_API), "cuDNN is not allowed"),
    (
        "cutlass",
        re.compile(r"\bcutlass\s*::|\bnamespace\s+cutlass\b|\bCUTLASS_[A-Z0-9]\w*"),
        "CUTLASS is not allowed",
    ),
    ("cutlass", re.compile(r"\bcute\s*::|\bnamespace\s+cute\b"), "CuTe is not allowed"),
    ("cub_thrust", re.compile(r"\bthrust\s*::"), "Thrust's algorithms are not allowed"),
    ("assembler_file", re.compile(r"\.\s*incbin\b"), _ASSEMBLER_FILE_WHY),  # a macro's #x makes it a string
    ("include_not_allowed", re.compile(_GCC_DEPENDENCY), _GCC_DEPENDENCY_WHY),
    (
        "cub_thrust",
        re.compile(r"\bcub\s*::\s*(?:Device|Dispatch)\w*"),
        "CUB's device-wide algorithms launch the library's kernels",
    ),
    (
        "dynamic_loading",
        re.compile(r"\b(dlopen|dlmopen|dlsym|dlvsym)\s*\("),
        "dynamic loading is not allowed",
    ),
    (
        "profiler_control",
        re.compile(r"\b(cudaProfilerStart|cudaProfilerStop|cuProfilerStart|cuProfilerStop)\b"),
        "starting or stopping the profiler is the evaluator's (it brackets the profiled call)",
    ),
)
# Rules whose findings are `unsupported` rather than `banned`, with what to write instead.
_UNSUPPORTED: dict[str, str] = {
    "include_not_allowed": "include only the CUDA toolkit's own headers (runtime, driver, cuda_bf16/fp16/fp8, "
    "cooperative_groups, libcu++), tvm/ffi/* and the C/C++ standard library; bring the rest into your file",
    "profiler_control": "remove the call: the evaluator starts and stops the profiler around the profiled call",
    "assembler_file": "write the data into your source: the build reads no file but your kernel and its headers",
    # A Triton candidate's import of a module that is no door (triton_ban): honest, not run here.
    "import_unsupported": "import only torch, triton (its language, host API and tensor descriptors), math, "
    "typing, itertools, functools, dataclasses' @dataclass, warnings.warn and logging.getLogger; write host "
    "values as constants or compute them with these",
}
_INSTEAD: dict[str, str] = {
    "cublas": "write the GEMM yourself (wgmma on Hopper, tcgen05 on Blackwell)",
    "cudnn": "write the attention kernel yourself",
    "cutlass": "write the kernel in plain CUDA with inline PTX",
    "cub_thrust": "write the reduction or sort in your own kernel (CUB's BlockReduce, WarpReduce and the "
    "other block- and warp-level primitives may go in it)",
    "dynamic_loading": "call your own kernels and the CUDA runtime/driver directly",
    "library_name": "call your own kernels and the CUDA runtime/driver directly",
}

# (rule, pattern over the contents of a string literal, why)
_STRING_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    # A symbol to look up by name (dlsym's argument) or a library's file name; prose ("slower than
    # cuBLAS") is neither.
    (
        "library_name",
        re.compile(f"{_CUBLAS_API}|{_CUDNN_API}|" + r"\blib(?:cublas|cudnn)"),
        "a vendor library's symbol or file name in a string",
    ),
    ("library_name", re.compile(r"\blib[\w+-]*\.so\b|\.so\.\d"), "a shared library name in a string"),
    ("assembler_file", _ASSEMBLER_FILE, _ASSEMBLER_FILE_WHY),
    ("include_not_allowed", re.compile(r"^\s*" + _GCC_DEPENDENCY), _GCC_DEPENDENCY_WHY),  # _Pragma's string
)

# `__has_include` opens the file it names: a path (absolute, or climbing out with `..`) asks whether a file
# beyond the build's reach exists, which the confined build answers (its "permission denied" is not "no such
# file"). A header's name only asks the include folders, all within reach; a macro's operand may be a path.
_HAS_INCLUDE = re.compile(r"\b__has_include(?:_next)?\b")
_HAS_INCLUDE_OPERAND = re.compile(r'[ \t\f\v]*\([ \t\f\v]*(?:"([^"\n]*)"|<([^>\n]*)>)')
_PROBED_FOR = re.compile(
    r"(?:\bdefined[ \t\f\v]*\(?|^[ \t\f\v]*(?:#|%:)[ \t\f\v]*(?:el)?ifn?def\b)[ \t\f\v]*$"
)
_DEFINE = re.compile(r"^[ \t\f\v]*(?:#|%:)[ \t\f\v]*define[ \t\f\v]+(\w+)(?:\(([^)]*)\))?(.*)$")
# A macro body that passes its parameter on to the operator, or names the operator alone.
_PASSED_ON = re.compile(
    r"\(?[ \t\f\v]*__has_include(?:_next)?[ \t\f\v]*(?:\([ \t\f\v]*(\w+)[ \t\f\v]*\))?[ \t\f\v]*\)?"
)

# The blanks the preprocessor allows around a directive's `#` include form feed and vertical tab.
_INCLUDE = re.compile(r"^[ \t\f\v]*(?:#|%:)[ \t\f\v]*(include_next|include|import|embed)\b[ \t\f\v]*(.*)$")
_CONDITIONAL = re.compile(
    r"^[ \t\f\v]*(?:#|%:)[ \t\f\v]*(ifdef|ifndef|if|elifdef|elifndef|elif|else|endif)\b(.*)$"
)


@dataclass(frozen=True)
class BanFinding:
    line: int
    rule: str
    text: str
    why: str

    @property
    def refusal(self) -> Refusal:
        return Refusal.unsupported if self.rule in _UNSUPPORTED else Refusal.banned

    def describe(self) -> str:
        instead = _UNSUPPORTED.get(self.rule) or _INSTEAD.get(self.rule)
        return f"line {self.line}: [{self.rule}] {self.why}: {self.text}" + (
            f" (instead: {instead})" if instead else ""
        )


def refusal_of(findings: list[BanFinding]) -> Refusal:
    """`banned` when any finding is what a cheater does; `unsupported` when all are merely not run here."""
    return Refusal.banned if any(f.refusal == Refusal.banned for f in findings) else Refusal.unsupported


def refused_build(findings: list[BanFinding], started: float, shown: int) -> BuildStage:
    """The build stage of a source its scan refused (`findings`, at least one): `banned` or
    `unsupported` by `refusal_of`, the first finding as its message and up to `shown` of them as errors."""
    more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
    return BuildStage(
        status=Status(refusal_of(findings)),
        message=findings[0].describe() + more,
        errors=[f.describe() for f in findings[:shown]],
        duration_s=time.perf_counter() - started,
    )


@dataclass(frozen=True)
class _Lexed:
    code: str  # comments and string contents replaced by spaces; newlines kept
    strings: list[tuple[int, str]]  # (line, contents) of every string and character literal


def _identifier_before(source: str, i: int) -> str:
    start = i
    while start > 0 and (source[start - 1].isalnum() or source[start - 1] in "_'"):
        start -= 1
    return source[start:i]


def _raw_string_prefix(source: str, i: int) -> bool:
    """`R"` opens a raw string when nothing, or only an encoding prefix, stands before it."""
    return _identifier_before(source, i) in ("", "u8", "u", "U", "L")


def _digit_separator(source: str, i: int) -> bool:
    """A quote inside a number (C++14 `1'000'000`) is not a character literal."""
    return _identifier_before(source, i)[:1].isdigit()


def _lex(source: str) -> _Lexed:
    """Blank out comments and literal contents, keeping every newline so line numbers stay put."""
    out: list[str] = []
    strings: list[tuple[int, str]] = []
    i, n, line = 0, len(source), 1
    joined: set[int] = set()  # lines whose newline is inside a block comment (one space to the preprocessor)
    raw_lines = False  # a raw string spans lines

    def blank(text: str) -> str:
        return "".join(ch if ch == "\n" else " " for ch in text)

    while i < n:
        ch = source[i]
        nxt = source[i + 1] if i + 1 < n else ""
        if ch == "/" and nxt == "/":
            end = i
            while end < n and source[end] != "\n":
                # A backslash-newline continues a line comment.
                end += 2 if source[end] == "\\" and end + 1 < n and source[end + 1] == "\n" else 1
            out.append(blank(source[i:end]))
        elif ch == "/" and nxt == "*":
            close = source.find("*/", i + 2)
            end = n if close < 0 else close + 2
            out.append(blank(source[i:end]))
            joined.update(range(line, line + source.count("\n", i, end)))
        elif ch == "R" and nxt == '"' and _raw_string_prefix(source, i):
            match = re.match(r'R"([^()\\ \t\n]{0,16})\(', source[i:])
            if match is None:
                out.append(ch)
                i += 1
                continue
            terminator = ")" + match.group(1) + '"'
            body_start = i + match.end()
            close = source.find(terminator, body_start)
            end = n if close < 0 else close + len(terminator)
            strings.append((line, source[body_start : close if close >= 0 else n]))
            raw_lines = raw_lines or "\n" in source[i:end]
            out.append(source[i:body_start] + blank(source[body_start:end]))
        elif ch == '"' or (ch == "'" and not _digit_separator(source, i)):
            end = i + 1
            while end < n and source[end] != ch and source[end] != "\n":
                end += 2 if source[end] == "\\" else 1
            end = min(end + 1, n)
            strings.append((line, source[i + 1 : end - 1]))
            out.append(ch + blank(source[i + 1 : end - 1]) + source[end - 1 : end])
        else:
            out.append(ch)
            end = i + 1
        line += source.count("\n", i, end)
        i = end
    code = "".join(out)
    dead = set() if raw_lines else _dead_lines(code, joined)
    if dead:
        code = "\n".join("" if number in dead else text for number, text in enumerate(code.split("\n"), 1))
        strings = [(number, contents) for number, contents in strings if number not in dead]
    return _Lexed(code, strings)


def _dead_lines(code: str, joined: set[int]) -> set[int]:
    """The lines of `#if 0` groups (up to their own `#else`, `#elif` or `#endif`): never compiled, so a
    disabled cuBLAS reference there is not the candidate's code. Read as the preprocessor reads them:
    comments gone (a newline inside a block comment, in `joined`, joins its lines), backslash-newlines
    spliced, `%:` as `#`. Where that reading could differ from the compiler's (a `??` left in the code, a
    lone carriage return, a backslash before trailing blanks; a raw string over lines, in `_lex`), nothing
    is taken for dead."""
    if "??" in code or re.search(r"\r(?!\n)|\\[ \t\f\v]+\r?$", code, re.MULTILINE):
        return set()
    physical = code.split("\n")
    dead: set[int] = set()
    depth = 0  # inside a dead group: 1 plus the conditionals opened within it
    index = 0
    while index < len(physical):
        first, logical = index, physical[index].rstrip("\r")
        while index + 1 < len(physical) and (logical.endswith("\\") or index + 1 in joined):
            index += 1
            # A splice joins as is; a comment's newline sits between the spaces its text was blanked to.
            logical = logical.removesuffix("\\") + physical[index].rstrip("\r")
        index += 1
        lines = range(first + 1, index + 1)
        match = _CONDITIONAL.match(logical)
        word, condition = (match.group(1), match.group(2).strip()) if match else ("", "")
        if depth == 0:
            depth = 1 if word == "if" and condition == "0" else 0
            continue
        if word in ("if", "ifdef", "ifndef"):
            depth += 1
        elif word == "endif" or (depth == 1 and word.startswith("el")):
            depth -= 1
        if depth:
            dead.update(lines)
    return dead


def _header_finding(line: int, header: str, text: str) -> BanFinding | None:
    for rule, pattern, why in _LIBRARY_HEADERS:
        if pattern.search(header):
            return BanFinding(line, rule, text, why)
    if (
        header in _CUDA_HEADERS
        or header in _CXX_HEADERS
        or header in _C_HEADERS
        or header in _POSIX_HEADERS
        or header.startswith(_ALLOWED_PREFIXES)
    ):
        return None
    return BanFinding(line, "include_not_allowed", text, f"{header} is not on the include allow-list")


@dataclass(frozen=True)
class Include:
    line: int
    directive: str  # include, include_next, import
    header: str | None  # None when the directive names no header literally


def includes(source: str, lexed: _Lexed | None = None) -> list[Include]:
    """Every include-like directive outside comments, with its line."""
    # Lines as the compiler counts them: at "\n" only (str.splitlines also breaks at form feeds and the like).
    code = (lexed or _lex(source)).code.split("\n")
    original = source.split("\n")
    found: list[Include] = []
    for number, line in enumerate(code, start=1):
        match = _INCLUDE.match(line)
        if not match:
            continue
        named = re.search(r"[<\"]([^>\"]+)[>\"]", original[number - 1] if number <= len(original) else "")
        literal = re.match(r"[<\"]", match.group(2)) is not None and named is not None
        found.append(Include(number, match.group(1), named.group(1).strip() if literal and named else None))
    return found


def scan(source: str) -> list[BanFinding]:
    """Every ban finding in `source`, in line order."""
    lexed = _lex(source)
    original_lines = source.split("\n")
    code_lines = lexed.code.split("\n")
    findings: list[BanFinding] = []

    def shown(number: int) -> str:
        return original_lines[number - 1].strip() if number <= len(original_lines) else ""

    directives = includes(source, lexed)
    for item in directives:
        if item.directive != "include":
            findings.append(
                BanFinding(
                    item.line, "include_not_allowed", shown(item.line), f"#{item.directive} is not allowed"
                )
            )
        elif item.header is None:
            findings.append(
                BanFinding(
                    item.line,
                    "include_not_allowed",
                    shown(item.line),
                    "#include must name a header literally",
                )
            )
        else:
            finding = _header_finding(item.line, item.header, shown(item.line))
            if finding:
                findings.append(finding)
    include_lines = {item.line for item in directives}
    for number, code in enumerate(code_lines, start=1):
        if number in include_lines:
            continue
        for rule, pattern, why in _CODE_RULES:
            if pattern.search(code):
                findings.append(BanFinding(number, rule, shown(number), why))
                break
    findings += _has_include_findings(code_lines, original_lines, shown)
    literals = [
        (number, _unescaped(contents)) for number, contents in lexed.strings if number not in include_lines
    ]
    for number, contents in literals:  # a quoted include's header name was judged above
        for rule, pattern, why in _STRING_RULES:
            if pattern.search(contents):
                findings.append(BanFinding(number, rule, shown(number), why))
                break
    # Literals side by side are one to the assembler: ".inc" "bin".
    joined = "".join(contents for _, contents in literals)
    if not any(f.rule == "assembler_file" for f in findings) and (found := _ASSEMBLER_FILE.search(joined)):
        ends = 0
        for number, contents in literals:
            ends += len(contents)
            if ends > found.start():
                findings.append(BanFinding(number, "assembler_file", shown(number), _ASSEMBLER_FILE_WHY))
                break
    return sorted(findings, key=lambda f: f.line)


def _has_include_findings(
    code_lines: list[str], source_lines: list[str], shown: Callable[[int], str]
) -> list[BanFinding]:
    """Each `__has_include` whose operand is a path or no literal name (`_HAS_INCLUDE`); asking whether the
    operator exists (`#ifdef __has_include`, `defined(__has_include)`) is fine. A macro of the source's own
    that only passes its parameter on (`#define HAS_INCLUDE(x) __has_include(x)`, or one naming the
    operator alone) is judged where it is used, as the operator is."""
    probes, defining = _has_include_wrappers(code_lines)
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, probes)) + r")\b")
    found: list[BanFinding] = []
    for number, code in enumerate(code_lines, start=1):
        define = _DEFINE.match(code)
        for match in pattern.finditer(code):
            if number in defining or (define and match.start() == define.start(1)):
                continue  # a wrapper's own definition (its uses are judged), or a name being defined
            if probes[match[0]] and not code[match.end() :].lstrip(" \t\f\v").startswith("("):
                continue  # a function-like macro's name not called is no use of it
            why = _probe_refused(code, source_lines[number - 1], match, _parameters_of(define))
            if why:
                found.append(BanFinding(number, "include_not_allowed", shown(number), why))
                break
    return found


def _has_include_wrappers(code_lines: list[str]) -> tuple[dict[str, bool], dict[int, str]]:
    """The operator's names (each with whether it is a function-like macro): its own and each macro that
    only passes its parameter on to it or names it alone; and the line defining each such macro."""
    probes: dict[str, bool] = {"__has_include": False, "__has_include_next": False}
    defining: dict[int, str] = {}
    for number, code in enumerate(code_lines, start=1):
        define = _DEFINE.match(code)
        if not define:
            continue
        name, body = define[1], define[3].strip()
        passed = _PASSED_ON.fullmatch(body)
        if passed and (passed[1] is None or passed[1] in _parameters_of(define)):
            probes[name] = define[2] is not None
            defining[number] = name
    return probes, defining


def _parameters_of(define: re.Match[str] | None) -> set[str]:
    """A function-like macro's parameters where a line defines one (an operand naming one is no literal)."""
    return {p.strip() for p in (define[2] or "").split(",")} - {""} if define else set()


def _probe_refused(code: str, source: str, match: re.Match[str], parameters: set[str]) -> str:
    """Why the probe at `match` is refused ('' where it is not)."""
    # Literal contents are blanked in `code`, kept at the same columns in the source line.
    operand = _HAS_INCLUDE_OPERAND.match(source, match.end())
    if operand is None:
        if _PROBED_FOR.search(code[: match.start()]):
            return ""
        return "__has_include must name a header literally"
    header = (operand[1] if operand[1] is not None else operand[2]).strip()
    if operand[2] is not None and parameters & set(re.findall(r"\w+", header)):
        return "__has_include must name a header literally"  # a <...> put together from a macro's parameter
    if header.startswith("/") or ".." in PurePosixPath(header).parts:
        return f"__has_include may ask for a header by name, not for a path ({header})"
    return ""


def _unescaped(contents: str) -> str:
    """A literal's contents with its escapes read (`\\x62` is `b`), as the assembler will see them."""

    def one(match: re.Match[str]) -> str:
        code = match[1]
        if code[0] == "x":
            return chr(int(code[1:], 16) % 0x110000)
        if code[0] in "01234567":
            return chr(int(code, 8))
        return {"n": "\n", "t": "\t"}.get(code, code)

    return _ESCAPE.sub(one, contents)
