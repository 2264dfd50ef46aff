"""The ABI check: `run` must take the task's inputs, then its outputs; no honest kernel is failed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from honest_support import task_of

from workbench.agent.extract import extract_kernel
from workbench.agent.prompts import template
from workbench.evaluate.build.abi import check_abi, exported_parameters
from workbench.evaluate.solution import read_candidate
from workbench.tasks import resolve_task

ROOT = Path(__file__).resolve().parent.parent
GEMM = "gemm_n7168_k5120"
# Every kernel the project ships or tests with that is written for a task, and that task.
HONEST = {
    **{str(p.relative_to(ROOT)): GEMM for p in (ROOT / "references" / "gemm").glob("*.cu")},
    "references/attention/mha_fwd_d128.cu": "mha_with_lse_d128",
    "references/attention/mha_fwd_d128_causal.cu": "mha_with_lse_d128_causal",
    "references/attention/mha_bwd_d128.cu": "mha_bwd_d128",
    "references/attention/mha_bwd_d128_causal.cu": "mha_bwd_d128_causal",
    **{
        str(p.relative_to(ROOT)): task_of(p)
        for p in (ROOT / "tests" / "gpu").glob("*/*.cu")
        if "data" not in p.parts
    },
    **{
        f"tests/data/kernels/{name}.cu": GEMM
        for name in (
            "abi_example",
            "wgmma_gemm",
            "mma_sync_gemm",
            "tcgen05_gemm",
            "banned_cublas",
            "banned_dlopen",
        )
    },
}


def header(source: str) -> str:
    return "#include <tvm/ffi/function.h>\nnamespace {\n" + source


@pytest.mark.parametrize(("path", "task"), sorted(HONEST.items()))
def test_every_honest_kernel_passes(path: str, task: str) -> None:
    assert exported_parameters((ROOT / path).read_text()) is not None  # read, not merely not judged
    assert check_abi((ROOT / path).read_text(), resolve_task(task).definition) is None


def test_the_shipped_sessions_candidates_and_the_documented_examples_pass() -> None:
    for session in (ROOT / "sessions").glob("*.jsonl"):
        events = [json.loads(line) for line in session.read_text().splitlines()]
        definition = resolve_task(events[0]["task"]).definition
        for event in events:
            if event["type"] == "candidate":
                assert check_abi(event["source"], definition) is None, (session.name, event["turn"])
    pack = re.search(r"```cuda\n(.*?)```", (ROOT / "knowledge_packs/common/abi.md").read_text(), re.DOTALL)
    assert pack is not None
    for example in (pack.group(1), extract_kernel(template("abi_example.md")) or ""):
        assert exported_parameters(example) is not None
        assert check_abi(example, resolve_task(GEMM).definition) is None
    source, _ = read_candidate(ROOT / "tests/data/kernels/wgmma_solution.json")
    assert check_abi(source, resolve_task(GEMM).definition) is None


def test_the_attention_forward_given_the_gemm_task_is_a_mismatch_naming_both_signatures() -> None:
    source = (ROOT / "references/attention/mha_fwd_d128.cu").read_text()
    message = check_abi(source, resolve_task(GEMM).definition)
    assert message is not None
    assert message.startswith("`run` takes 5 parameters (tvm::ffi::TensorView Q, tvm::ffi::TensorView K,")
    assert "tvm::ffi::TensorView LSE)" in message
    assert f"{GEMM} passes 3, its inputs then its outputs (tvm::ffi::TensorView A: bfloat16[M, K]," in message
    assert "tvm::ffi::TensorView C: bfloat16[M, N])" in message
    gemm = (ROOT / "references/gemm/01_simt.cu").read_text()
    assert "mha_with_lse_d128 passes 5" in (
        check_abi(gemm, resolve_task("mha_with_lse_d128").definition) or ""
    )


@pytest.mark.parametrize(
    "source",
    [
        # a lambda in the macro
        (
            "}\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(run, [](tvm::ffi::TensorView a, tvm::ffi::TensorView b,\n"
            "  tvm::ffi::TensorView c) { launch(a, b, c); });"
        ),
        # aliases and an object-like macro
        (
            "using TV = tvm::ffi::TensorView;\ntypedef const TV& CTV;\n#define OUT tvm::ffi::TensorView\n"
            "void go(CTV a, TV b, OUT c) {}\n}\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(run, go);"
        ),
        # namespaces, a call before the definition, a declaration, an unnamed parameter
        (
            "void go(tvm::ffi::TensorView, tvm::ffi::TensorView, tvm::ffi::TensorView);\n"
            "void helper(tvm::ffi::TensorView x) { if (go(x, x, x)) {} }\n"
            "namespace inner { }\nvoid go(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView)\n{ }\n"
            "}\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(run, go);"
        ),
        # a signature quoted in a comment or a string does not count
        (
            "// void go(tvm::ffi::TensorView q, tvm::ffi::TensorView k, tvm::ffi::TensorView v, int x) {}\n"
            'const char* s = "void go(int a) {}";\n'
            "void go(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView c) {}\n"
            "}\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(run, go);"
        ),
    ],
)
def test_signatures_written_in_other_ways_are_read(source: str) -> None:
    parameters = exported_parameters(header(source))
    assert parameters is not None and [p.kind for p in parameters] == ["tensor"] * 3
    assert check_abi(header(source), resolve_task(GEMM).definition) is None


def test_scalars_defaults_and_a_wrong_kind() -> None:
    source = header(
        "void go(const tvm::ffi::TensorView& a, DLTensor* b, int64_t n, unsigned int m = 4, float s = 1.0f) {}\n"
        "}\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(run, go);"
    )
    parameters = exported_parameters(source)
    assert parameters is not None
    assert [p.kind for p in parameters] == ["tensor", "tensor", "scalar", "scalar", "scalar"]
    assert parameters[3].text == "unsigned int m = 4"
    message = check_abi(source, resolve_task(GEMM).definition)
    assert message is not None and message.startswith("`run` takes 5 parameters")


@pytest.mark.parametrize(
    "source",
    [
        "template <typename T> void go(T a, T b, T c) {}\n}\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(run, go<tvm::ffi::TensorView>);",
        "void go(tvm::ffi::TensorView a) {}\nvoid go(tvm::ffi::TensorView a, int b) {}\n}\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(run, go);",
        '#include "impl.cuh"\n}\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(run, defined_elsewhere);',
        "#define PARAMS(t) t a, t b\nvoid go(PARAMS(tvm::ffi::TensorView)) {}\n}\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(run, go);",
        "void go(MyTensor a) {}\n}\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(run, go);",
        "void go(tvm::ffi::TensorView a) {}\n}\n",  # no export at all: the build says so
    ],
)
def test_what_cannot_be_read_for_sure_is_not_judged(source: str) -> None:
    assert exported_parameters(header(source)) is None
    assert check_abi(header(source), resolve_task(GEMM).definition) is None
