"""FlashInfer-Bench Solution JSON -> one self-contained source (no nvcc needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from workbench.errors import UserError
from workbench.evaluate.build.ban import scan
from workbench.evaluate.solution import Solution, read_candidate, solution_source

KERNELS = Path(__file__).parent / "data" / "kernels"


def make(sources: dict[str, str], entry: str = "main.cu::run", **spec: object) -> Solution:
    return Solution.model_validate(
        {
            "name": "s",
            "definition": "gemm_n7168_k5120",
            "author": "tests",
            "spec": {"language": "cuda", "target_hardware": ["H100"], "entry_point": entry, **spec},
            "sources": [{"path": p, "content": c} for p, c in sources.items()],
        }
    )


def test_headers_are_inlined_once_in_include_order() -> None:
    text = solution_source(
        make(
            {
                "main.cu": '#include "a.cuh"\n#include "b.cuh"\nint main_body;\n',
                "a.cuh": '#pragma once\n#include "b.cuh"\nint a_body;\n',
                "b.cuh": "#pragma once\nint b_body;\n",
            }
        )
    )
    assert text.count("int b_body;") == 1 and text.count("int a_body;") == 1
    assert text.index("b_body") < text.index("a_body") < text.index("main_body")
    assert '#line 1 "a.cuh"' in text and '#line 1 "b.cuh"' in text
    assert "already inlined" in text
    assert "__tvm_ffi_run(" not in text, "no alias when the entry symbol is already run"
    assert scan(text) == []


def test_other_translation_units_follow_the_entry_and_alias_is_added() -> None:
    text = solution_source(
        make({"kernel.cu": "int k;\n", "main.cu": "int m;\n"}, entry="main.cu::gemm_entry")
    )
    assert text.index("int m;") < text.index("int k;")
    assert "return __tvm_ffi_gemm_entry(self, args, n, result);" in text


def test_unknown_quoted_include_is_left_for_the_ban_scan() -> None:
    text = solution_source(make({"main.cu": '#include "elsewhere.h"\n'}))
    [finding] = scan(text)
    assert finding.rule == "include_not_allowed" and "elsewhere.h" in finding.text


def test_shipped_solution_reads_like_its_parts() -> None:
    source, solution = read_candidate(KERNELS / "wgmma_solution.json")
    assert solution is not None and solution.definition == "gemm_n7168_k5120"
    assert "wgmma.mma_async" in source and "TVM_FFI_DLL_EXPORT_TYPED_FUNC(gemm, run_impl);" in source
    assert scan(source) == []


@pytest.mark.parametrize(
    ("sources", "spec", "message"),
    [
        ({"main.py": "x = 1\n"}, {"entry": "main.py::run"}, "not a CUDA/C++ source"),
        ({"main.cu": ""}, {"entry": "other.cu::run"}, "not among the sources"),
        ({"main.cu": "", "notes.txt": ""}, {}, "neither a CUDA/C++ file nor a header"),
        ({"main.cu": ""}, {"entry": "main.cu::not-an-identifier"}, "not a C identifier"),
        ({"main.cu": ""}, {"destination_passing_style": False}, "outputs must be passed in"),
        ({"/abs/main.cu": ""}, {"entry": "/abs/main.cu::run"}, "must be relative"),
    ],
)
def test_bad_solutions(sources: dict[str, str], spec: dict[str, object], message: str) -> None:
    entry = str(spec.pop("entry", "main.cu::run"))
    with pytest.raises(UserError, match=re.escape(message)):
        solution_source(make(sources, entry=entry, **spec))
