"""FlashInfer-Bench Solution JSON in place of a `.cu`: its sources become one self-contained file.

A Solution (flashinfer_bench.data.Solution) holds `sources` [{path, content}], `spec.language`,
`spec.entry_point` ("file::symbol") and `spec.binding` (tvm-ffi when unset for C++/CUDA). The entry
file comes first, other translation units follow; a quoted `#include` of another source is inlined
once, so the ban scan and nvcc see one file. When the entry symbol is not `run`, an alias
`__tvm_ffi_run` forwarding to it is appended, so the evaluator calls it like any candidate.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workbench.errors import UserError
from workbench.jsonfile import read_json, read_text

_TRANSLATION_UNITS = (".cu", ".cpp", ".cc", ".cxx", ".c")
_HEADERS = (".h", ".cuh", ".hpp", ".hh", ".inl", ".inc")
_QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"[^\n]*$', re.MULTILINE)
_SYMBOL = re.compile(r"[A-Za-z_]\w*")


class SourceFile(BaseModel):
    model_config = ConfigDict(extra="ignore")
    path: str = Field(min_length=1)
    content: str


class BuildSpec(BaseModel):
    model_config = ConfigDict(extra="ignore")
    language: str
    entry_point: str
    target_hardware: list[str] = Field(default_factory=list)
    dependencies: list[str] = Field(default_factory=list)
    destination_passing_style: bool = True
    binding: Literal["tvm-ffi", "torch"] | None = None


class Solution(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str
    definition: str
    author: str = ""
    spec: BuildSpec
    sources: list[SourceFile] = Field(min_length=1)
    description: str | None = None


def _check(solution: Solution, where: str) -> tuple[str, str]:
    spec = solution.spec
    if spec.language not in ("cuda", "cpp"):
        raise UserError(f"{where}: spec.language is {spec.language!r}; only cuda/cpp solutions build here")
    if (spec.binding or "tvm-ffi") != "tvm-ffi":
        raise UserError(
            f"{where}: spec.binding is {spec.binding!r}; only tvm-ffi solutions follow the kernel ABI"
        )
    if not spec.destination_passing_style:
        raise UserError(f"{where}: spec.destination_passing_style is false; outputs must be passed in")
    if spec.dependencies:
        raise UserError(f"{where}: spec.dependencies {spec.dependencies} are not allowed (own kernels only)")
    if spec.entry_point.count("::") != 1:
        raise UserError(f"{where}: spec.entry_point must be 'file::symbol', got {spec.entry_point!r}")
    entry_file, symbol = spec.entry_point.split("::")
    if not _SYMBOL.fullmatch(symbol):
        raise UserError(f"{where}: entry symbol {symbol!r} is not a C identifier")
    paths = [s.path for s in solution.sources]
    if len(set(paths)) != len(paths):
        raise UserError(f"{where}: duplicate source paths")
    if entry_file not in paths:
        raise UserError(f"{where}: entry file {entry_file!r} is not among the sources")
    if not entry_file.endswith(_TRANSLATION_UNITS):
        raise UserError(f"{where}: entry file {entry_file!r} is not a CUDA/C++ source")
    for path in paths:
        pure = PurePosixPath(path)
        if pure.is_absolute() or ".." in pure.parts:
            raise UserError(f"{where}: source path {path!r} must be relative, without '..'")
        if not path.endswith(_TRANSLATION_UNITS + _HEADERS):
            raise UserError(f"{where}: source {path!r} is neither a CUDA/C++ file nor a header")
    return entry_file, symbol


def _inline(path: str, files: dict[str, str], done: set[str]) -> str:
    """`path`'s text with its quoted includes of other sources replaced by their (inlined) text, once each."""
    done.add(path)
    folder = PurePosixPath(path).parent

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        resolved = next((c for c in (str(folder / name), name) if c in files), None)
        if resolved is None:
            return match.group(0)  # not one of ours: the ban scan judges it
        if resolved in done:
            return f"// {match.group(0).strip()} (already inlined)"
        next_line = files[path].count("\n", 0, match.end()) + 2
        return f'#line 1 "{resolved}"\n{_inline(resolved, files, done)}\n#line {next_line} "{path}"'

    return _QUOTED_INCLUDE.sub(replace, files[path])


def solution_source(solution: Solution, where: str = "solution") -> str:
    """The solution's sources as one self-contained .cu text exporting `run`."""
    entry_file, symbol = _check(solution, where)
    files = {s.path: s.content for s in solution.sources}
    done: set[str] = set()
    units = [entry_file] + [p for p in files if p != entry_file and p.endswith(_TRANSLATION_UNITS)]
    parts = []
    for unit in units:
        if unit in done:
            continue
        parts.append(f'#line 1 "{unit}"\n{_inline(unit, files, done)}')
    text = "\n".join(parts)
    if symbol != "run":
        text += (
            "\n// Alias added by ptxwb: the evaluator calls `run`.\n"
            f'extern "C" TVM_FFI_DLL_EXPORT int __tvm_ffi_run(void* self, const TVMFFIAny* args, int32_t n, '
            f"TVMFFIAny* result) {{\n  return __tvm_ffi_{symbol}(self, args, n, result);\n}}\n"
        )
    return text


def load_solution(path: Path) -> Solution:
    data = read_json(path)
    try:
        return Solution.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise UserError(f"{path}: not a FlashInfer-Bench Solution: field {where}: {first['msg']}") from None


def read_candidate(path: Path) -> tuple[str, Solution | None]:
    """The candidate's source from a `.cu` file, `-` (standard input) or a Solution JSON (with the Solution)."""
    if str(path) == "-":
        source = sys.stdin.read()
        if not source.strip():
            raise UserError("-: standard input held no source (pipe a .cu file in, or name one)")
        return source, None
    if path.suffix == ".json":
        solution = load_solution(path)
        return solution_source(solution, str(path)), solution
    source = read_text(path, ".cu file")
    if not source.strip():
        raise UserError(f"{path}: the file is empty")
    return source, None
