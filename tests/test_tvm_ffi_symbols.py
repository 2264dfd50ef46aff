"""The TVM-FFI link policy is derived from the pinned package: every symbol it can bring is classified.

A version bump that adds a C function to the headers, or a C++ function to libtvm_ffi.so, fails here
until the policy says whether a kernel may import it; the probe (every public header, the APIs a
kernel's host code touches) must build with no refusal.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

import pytest

from tests.build_support import needs_nvcc, session_cache
from workbench.evaluate.build.link_policy import check_library, denial
from workbench.evaluate.build.nvcc import build_toolchain, compile_source
from workbench.evaluate.build.symbol_origin import include_chain
from workbench.evaluate.build.tvm_ffi_symbols import (
    _UNCLASSIFIED,
    C_API,
    CXX_API,
    Refusal,
    qualified_name,
    rule_for,
)
from workbench.evaluate.result import Status
from workbench.tasks import get_target

PROBE_BODY = Path(__file__).parent / "data" / "tvm_ffi" / "probe_body.cu"
# Public headers the probe leaves out, each with the reason.
NOT_PROBED = {
    # nvcc's front end rejects its TypeTraits<UnchangedOr<Any>> specialisation (nvcc 13.0); g++ takes it.
    "tvm/ffi/extra/structural_mutate.h",
}


def _package() -> tuple[Path, Path]:
    toolchain = build_toolchain()
    return toolchain.tvm_ffi_include, toolchain.tvm_ffi_lib_dir


def _public_headers(include: Path) -> list[str]:
    headers = sorted(str(p.relative_to(include)) for p in (include / "tvm" / "ffi").rglob("*.h"))
    return [h for h in headers if "/internal/" not in h]


def test_every_c_function_the_headers_declare_is_classified() -> None:
    include, _ = _package()
    declared: set[str] = set()
    for header in _public_headers(include):
        text = (include / header).read_text()
        declared |= set(re.findall(r"TVM_FFI_DLL\b[^;{]*?\b(TVMFFI\w+)\s*\(", text, re.DOTALL))
    assert len(declared) > 40  # the parse found the C API, not nothing
    assert sorted(declared - C_API.keys()) == []


def test_every_symbol_the_library_exports_is_classified() -> None:
    _, lib_dir = _package()
    listed = subprocess.run(
        ["nm", "-D", "--defined-only", str(lib_dir / "libtvm_ffi.so")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = [line.split()[-1] for line in listed.splitlines() if line.split()]
    c_names = [n for n in names if n.startswith("TVMFFI")]
    cxx_names = [n for n in names if (qualified_name(n) or "").startswith("tvm::ffi::")]
    assert c_names and cxx_names
    assert sorted(n for n in c_names if n not in C_API) == []
    assert sorted(n for n in cxx_names if rule_for(n) is _UNCLASSIFIED) == []


def test_every_refusal_says_why_and_what_instead() -> None:
    for table in (C_API, CXX_API):
        for name, rule in table.items():
            assert rule.why, name
            assert (rule.refusal is None) == rule.allowed, name
            assert rule.allowed or rule.instead, name


@pytest.mark.parametrize(
    ("symbol", "refusal"),
    [
        ("TVMFFITypeGetOrAllocIndex", None),  # the umbrella header's object types: once refused, now allowed
        ("TVMFFIEnvTensorAlloc", None),
        ("TVMFFIFunctionGetGlobal", Refusal.banned),
        ("TVMFFIEnvSetStream", Refusal.banned),
        ("TVMFFIFunctionSetGlobal", Refusal.unsupported),
        ("TVMFFIFromAFutureVersion", Refusal.unsupported),  # unclassified: refused, never banned
        ("_ZN3tvm3ffi6Module12LoadFromFileERKNS0_6StringE", Refusal.banned),
        ("_ZN3tvm3ffi9ModuleObj11GetFunctionERKNS0_6StringEb", Refusal.banned),
        ("_ZN3tvm3ffi4json5ParseERKNS0_6StringEPS2_", None),
        ("_ZN3tvm3ffi9ReprPrintERKNS0_3AnyE", Refusal.unsupported),
        ("getenv@GLIBC_2.2.5", Refusal.unsupported),
        ("fopen@GLIBC_2.2.5", Refusal.unsupported),
        ("dlsym@GLIBC_2.34", Refusal.banned),
        ("cudaProfilerStart@libcudart.so.13", Refusal.unsupported),
        ("cublasCreate_v2", Refusal.banned),
    ],
)
def test_refusals_are_banned_only_for_what_a_cheater_does(symbol: str, refusal: Refusal | None) -> None:
    found = denial(symbol)
    assert (found.refusal if found else None) == refusal


def test_qualified_names_of_members_statics_and_guards() -> None:
    assert qualified_name("_ZNK3tvm3ffi9ModuleObj3fooEv") == "tvm::ffi::ModuleObj::foo"
    assert qualified_name("_ZGVZN3tvm3ffi9ModuleObj27_GetOrAllocRuntimeTypeIndexEvE6tindex") == (
        "tvm::ffi::ModuleObj::_GetOrAllocRuntimeTypeIndex"
    )
    assert qualified_name("_Z3foov") is None


def test_the_include_chain_runs_from_the_users_line_to_the_header() -> None:
    include, _ = _package()
    source = "// a kernel\n#include <cuda_runtime.h>\n#include <tvm/ffi/tvm_ffi.h>\n"
    line, chain = include_chain(source, "tvm/ffi/enum.h", [include]) or (0, ())
    assert line == 3 and chain[0] == "tvm/ffi/tvm_ffi.h" and chain[-1] == "tvm/ffi/enum.h"
    assert (
        include_chain(source, "tvm/ffi/extra/module.h", [include]) is None
    )  # the umbrella does not reach it


@needs_nvcc
def test_the_probe_of_every_public_header_builds_with_no_refusal(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    include, _ = _package()
    headers = [h for h in _public_headers(include) if h not in NOT_PROBED]
    source = "".join(f"#include <{h}>\n" for h in headers) + PROBE_BODY.read_text()
    cache = session_cache(tmp_path_factory)
    stage = asyncio.run(compile_source(source, get_target("hopper"), 300, cache))
    assert stage.status == Status.passed, stage.message or stage.compiler_output
    imports = subprocess.run(
        ["nm", "-D", "--undefined-only", str(stage.library_path)], capture_output=True, text=True, check=True
    ).stdout
    # The probe really reaches the library (the test cannot pass on a probe that imports nothing).
    assert {
        "TVMFFIEnvGetStream",
        "TVMFFIEnvTensorAlloc",
        "TVMFFITypeGetOrAllocIndex",
        "TVMFFIErrorSetRaised",
    } <= set(re.findall(r"\bTVMFFI\w+", imports))
    assert check_library(Path(stage.library_path or ""), "__tvm_ffi_run").denials == []
