"""The honest corpus through the static executor: every kernel builds and passes the static tier, none is
refused by the source scan, the include allow-list, the link policy or the Triton AST check."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.build_support import needs_nvcc, session_cache
from tests.honest_support import CUDA, TRITON, target_of, task_of
from workbench.evaluate.build.ban import scan
from workbench.evaluate.build.triton_ban import scan as triton_scan
from workbench.evaluate.executors import make_executor
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import EvalResult, Status
from workbench.tasks import Catalogue


def test_the_corpus_is_large_and_each_kernel_says_what_it_exercises() -> None:
    assert len(CUDA) >= 15 and len(TRITON) >= 3
    for path in CUDA:
        assert path.read_text().startswith("// Honest corpus"), path.name
    for path in TRITON:
        assert path.read_text().startswith('"""Honest corpus (Triton)'), path.name
    assert {target_of(p) for p in CUDA} == {"hopper", "blackwell"}
    # Not only the headline GEMM: a memory-bound family's kernels too, each naming a task of the catalogue.
    catalogue = Catalogue.load()
    assert all(catalogue.get(task_of(p)) for p in CUDA + TRITON)
    assert any(catalogue.get(task_of(p)).target("hopper").required_family == "ASYNC_COPY" for p in CUDA)


@pytest.mark.parametrize("path", CUDA + TRITON, ids=lambda p: p.name)
def test_the_source_scan_refuses_none(path: Path) -> None:
    findings = triton_scan(path.read_text()) if path.suffix == ".py" else scan(path.read_text())
    assert [f.describe() for f in findings] == []


# The corpus kernel the composed tests below add to: plain host code, one wgmma kernel.
ABI_GUIDE_STYLE = next(path for path in CUDA if path.name == "abi_guide_style.cu")


def _evaluate(path: Path, cache: Path, source: str | None = None) -> EvalResult:
    """`path` (or `source` in its place: the kernel with something added) through the static executor."""
    executor = make_executor("static", cache)
    request = EvalRequest(
        task=task_of(path),
        target=target_of(path),  # type: ignore[arg-type]
        source=path.read_text() if source is None else source,
        language="triton" if path.suffix == ".py" else "cuda",
    )
    return asyncio.run(executor.evaluate(request))


def _assert_static_passes(result: EvalResult) -> None:
    build, static = result.stages.build, result.stages.static
    assert build.status == Status.passed, f"{build.status}: {build.message} {build.errors[:3]}"
    assert static.status == Status.passed, static.message
    assert result.status == Status.not_run  # the GPU tiers are the H200's (tests/gpu/test_honest_gpu.py)


@needs_nvcc
@pytest.mark.parametrize("path", CUDA + TRITON, ids=lambda p: p.name)
def test_each_kernel_builds_and_passes_the_static_tier(
    path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    result = _evaluate(path, session_cache(tmp_path_factory))
    _assert_static_passes(result)
    assert result.stages.static.required_present


# What kernels written elsewhere carry around an honest kernel, each refused by no rule; one build holds
# them all (a refusal names its line, so the culprit is still told apart):
# - the headers cuda_runtime.h brings in, named directly by older or terser code (its math, atomics and
#   intrinsics headers, some through crt/): nvcc warns on the internal wrappers;
# - a cuBLAS reference switched off with `#if 0`, never compiled;
# - host code leaning on more of the standard library than ours: a reader-writer lock around a cache of
#   launched shapes, the rounding mode checked, a calendar-time log line, a layout flag read with
#   <cctype>, a C-style pthread lock and gettimeofday/usleep through their POSIX headers, and a file dump
#   left in behind a debug switch (its header included, the dump compiled out).
RUNTIME_HEADERS = (
    "math_functions.h",
    "device_types.h",
    "host_config.h",
    "sm_32_atomic_functions.h",
    "vector_functions.hpp",
    "channel_descriptor.h",
    "crt/sm_90_rt.h",
)
CUBLAS_UNDER_IF_0 = (
    "#if 0  // the cuBLAS reference this kernel was checked against\n"
    "#include <cublas_v2.h>\n"
    "static void reference(cublasHandle_t handle, const void* a, const void* b, void* c, int m, int n, int k) {\n"
    "  const float one = 1.f, zero = 0.f;\n"
    "  cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, b, CUDA_R_16BF, k, a, CUDA_R_16BF, k,\n"
    "               &zero, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);\n"
    "}\n"
    "#endif\n"
)
STANDARD_LIBRARY_HOST = (
    "#include <bits/stdc++.h>\n"
    "#include <cfenv>\n"
    "#include <fstream>\n"
    "#include <shared_mutex>\n"
    "#include <pthread.h>\n"
    "#include <sys/time.h>\n"
    "#include <unistd.h>\n"
    "static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;\n"
    "static std::shared_mutex shapes_lock;\n"
    "static std::set<std::array<int, 3>> shapes;\n"
    "static void note_shape(int m, int n, int k) {\n"
    "  {\n"
    "    std::shared_lock<std::shared_mutex> read(shapes_lock);\n"
    "    if (shapes.count({m, n, k})) return;\n"
    "  }\n"
    "  std::unique_lock<std::shared_mutex> write(shapes_lock);\n"
    "  shapes.insert({m, n, k});\n"
    "  timespec now{};\n"
    "  timespec_get(&now, TIME_UTC);\n"
    "  char stamp[32];\n"
    '  std::strftime(stamp, sizeof stamp, "%T", std::gmtime(&now.tv_sec));\n'
    '  if (std::fegetround() != FE_TONEAREST) fprintf(stderr, "%s: host rounding is not to nearest\\n", stamp);\n'
    "  timeval since{};\n"
    "  gettimeofday(&since, nullptr);\n"
    "  pthread_mutex_lock(&log_lock);\n"
    '  if (since.tv_sec < 0) { fprintf(stderr, "clock before 1970\\n"); usleep(1); }\n'
    "  pthread_mutex_unlock(&log_lock);\n"
    '  const char layout = "nt"[k & 1];\n'
    "  if (!std::isalpha(layout) || std::toupper(layout) == 'X') fprintf(stderr, \"odd layout %c\\n\", layout);\n"
    "#ifdef GEMM_DUMP_SHAPES\n"
    "  std::ofstream(\"shapes.txt\", std::ios::app) << m << ' ' << n << ' ' << k << '\\n';\n"
    "#endif\n"
    "}\n"
)


@needs_nvcc
def test_a_kernel_carrying_what_outside_code_carries_builds_and_passes(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    honest = ABI_GUIDE_STYLE
    source = honest.read_text().replace(
        "namespace abi_style_gemm {", STANDARD_LIBRARY_HOST + "namespace abi_style_gemm {", 1
    )
    source = source.replace("  cudaStream_t stream = ", "  note_shape(m, n, k);\n  cudaStream_t stream = ", 1)
    assert "note_shape(m, n, k);" in source
    source = "".join(f"#include <{header}>\n" for header in RUNTIME_HEADERS) + CUBLAS_UNDER_IF_0 + source
    _assert_static_passes(_evaluate(honest, session_cache(tmp_path_factory), source))


@needs_nvcc
def test_a_triton_kernel_with_a_self_test_under_the_main_guard_builds_and_passes(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Triton files written elsewhere often end in a self-test (`if __name__ == "__main__":` with torch's
    own GEMM to compare against): it never runs where the evaluator imports the file, so it refuses nothing."""
    honest = next(path for path in TRITON if path.name == "gemm_block_pointers.py")
    source = honest.read_text() + (
        '\n\nif __name__ == "__main__":\n'
        "    import torch\n\n"
        "    a = torch.randn(256, 128, device='cuda', dtype=torch.bfloat16)\n"
        "    b = torch.randn(256, 128, device='cuda', dtype=torch.bfloat16)\n"
        "    c = torch.empty(256, 256, device='cuda', dtype=torch.bfloat16)\n"
        "    run(a, b, c)\n"
        "    torch.testing.assert_close(c, a @ b.T)\n"
    )
    _assert_static_passes(_evaluate(honest, session_cache(tmp_path_factory), source))
