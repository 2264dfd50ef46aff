"""Library ban: a source scan run before compiling.

A candidate must bring its own kernels. The scan rejects the vendor libraries (cuBLAS/cuBLASLt,
cuDNN, CUTLASS/CuTe, CUB/Thrust), any `#include` outside a small allow-list, and dynamic loading
(`dlopen`/`dlsym`, or a library file name in a string literal). Comments are ignored; string
literals are scanned on their own. Every finding names its line and rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The toolkit's own headers. libcu++ (`cuda/...`: barrier, pipeline, ptx, std; `nv/target`) is allowed:
# it wraps single PTX instructions and ships no kernels. CUB and Thrust are libraries of kernels: not allowed.
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
    }
)
_ALLOWED_PREFIXES = ("cooperative_groups/", "cuda/", "nv/", "tvm/ffi/", "dlpack/")

_CXX_HEADERS = frozenset(
    [
        "algorithm",
        "any",
        "array",
        "atomic",
        "bit",
        "bitset",
        "cassert",
        "cctype",
        "cerrno",
        "cfloat",
        "charconv",
        "chrono",
        "cinttypes",
        "climits",
        "cmath",
        "complex",
        "concepts",
        "condition_variable",
        "cstdarg",
        "cstddef",
        "cstdint",
        "cstdio",
        "cstdlib",
        "cstring",
        "ctime",
        "deque",
        "exception",
        "functional",
        "initializer_list",
        "iomanip",
        "ios",
        "iosfwd",
        "iostream",
        "istream",
        "iterator",
        "limits",
        "list",
        "map",
        "memory",
        "mutex",
        "new",
        "numbers",
        "numeric",
        "optional",
        "ostream",
        "queue",
        "random",
        "ratio",
        "set",
        "span",
        "sstream",
        "stack",
        "stdexcept",
        "string",
        "string_view",
        "system_error",
        "thread",
        "tuple",
        "type_traits",
        "typeinfo",
        "unordered_map",
        "unordered_set",
        "utility",
        "variant",
        "vector",
    ]
)
_C_HEADERS = frozenset(
    [
        "assert.h",
        "ctype.h",
        "errno.h",
        "float.h",
        "inttypes.h",
        "limits.h",
        "math.h",
        "stdarg.h",
        "stdbool.h",
        "stddef.h",
        "stdint.h",
        "stdio.h",
        "stdlib.h",
        "string.h",
        "time.h",
    ]
)

# (rule, pattern over a header name, why) for headers that get a named rule rather than the generic one.
_LIBRARY_HEADERS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("cublas", re.compile(r"^cublas", re.IGNORECASE), "cuBLAS/cuBLASLt is not allowed"),
    ("cudnn", re.compile(r"^cudnn", re.IGNORECASE), "cuDNN is not allowed"),
    ("cutlass", re.compile(r"^(cutlass|cute)(/|\.h)", re.IGNORECASE), "CUTLASS/CuTe is not allowed"),
    (
        "cub_thrust",
        re.compile(r"^(cub|thrust)(/|\.cuh)", re.IGNORECASE),
        "CUB/Thrust kernels are not allowed",
    ),
)

# (rule, pattern over code with comments and strings blanked, why)
_CODE_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("cublas", re.compile(r"\bcublas\w*", re.IGNORECASE), "cuBLAS/cuBLASLt is not allowed"),
    ("cudnn", re.compile(r"\bcudnn\w*", re.IGNORECASE), "cuDNN is not allowed"),
    ("cutlass", re.compile(r"\bcutlass\w*", re.IGNORECASE), "CUTLASS is not allowed"),
    ("cutlass", re.compile(r"\bcute\s*::|\bnamespace\s+cute\b"), "CuTe is not allowed"),
    ("cub_thrust", re.compile(r"\b(cub|thrust)\s*::"), "CUB/Thrust kernels are not allowed"),
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

# (rule, pattern over the contents of a string literal, why)
_STRING_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("library_name", re.compile(r"cublas|cudnn|cutlass", re.IGNORECASE), "a vendor library name in a string"),
    ("library_name", re.compile(r"\blib[\w+-]*\.so\b|\.so\.\d"), "a shared library name in a string"),
)

_INCLUDE = re.compile(r"^[ \t]*(?:#|%:)[ \t]*(include_next|include|import)\b[ \t]*(.*)$")


@dataclass(frozen=True)
class BanFinding:
    line: int
    rule: str
    text: str
    why: str

    def describe(self) -> str:
        return f"line {self.line}: [{self.rule}] {self.why}: {self.text}"


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
    return _Lexed("".join(out), strings)


def _header_finding(line: int, header: str, text: str) -> BanFinding | None:
    for rule, pattern, why in _LIBRARY_HEADERS:
        if pattern.search(header):
            return BanFinding(line, rule, text, why)
    if (
        header in _CUDA_HEADERS
        or header in _CXX_HEADERS
        or header in _C_HEADERS
        or header.startswith(_ALLOWED_PREFIXES)
    ):
        return None
    return BanFinding(line, "include_not_allowed", text, f"{header} is not on the include allow-list")


def scan(source: str) -> list[BanFinding]:
    """Every ban finding in `source`, in line order."""
    lexed = _lex(source)
    original_lines = source.splitlines()
    code_lines = lexed.code.splitlines()
    findings: list[BanFinding] = []

    def shown(number: int) -> str:
        return original_lines[number - 1].strip() if number <= len(original_lines) else ""

    for number, code in enumerate(code_lines, start=1):
        include = _INCLUDE.match(code)
        if include:
            directive = include.group(1)
            target = re.match(r"[<\"]", include.group(2))
            original = original_lines[number - 1] if number <= len(original_lines) else ""
            named = re.search(r"[<\"]([^>\"]+)[>\"]", original)
            if directive != "include":
                findings.append(
                    BanFinding(number, "include_not_allowed", shown(number), f"#{directive} is not allowed")
                )
            elif target is None or named is None:
                findings.append(
                    BanFinding(
                        number, "include_not_allowed", shown(number), "#include must name a header literally"
                    )
                )
            else:
                finding = _header_finding(number, named.group(1).strip(), shown(number))
                if finding:
                    findings.append(finding)
            continue
        for rule, pattern, why in _CODE_RULES:
            if pattern.search(code):
                findings.append(BanFinding(number, rule, shown(number), why))
                break
    for number, contents in lexed.strings:
        if _INCLUDE.match(code_lines[number - 1] if number <= len(code_lines) else ""):
            continue  # the header name of a quoted include was judged above
        for rule, pattern, why in _STRING_RULES:
            if pattern.search(contents):
                findings.append(BanFinding(number, rule, shown(number), why))
                break
    return sorted(findings, key=lambda f: f.line)
