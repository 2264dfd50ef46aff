"""The library ban: rules, lines, comments ignored, strings scanned; real banned kernels."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.evaluate.build.ban import refusal_of, scan
from workbench.evaluate.build.tvm_ffi_symbols import Refusal

KERNELS = Path(__file__).parent / "data" / "kernels"


def rules(source: str) -> list[tuple[int, str]]:
    return [(f.line, f.rule) for f in scan(source)]


@pytest.mark.parametrize(
    "name", ["abi_example.cu", "wgmma_gemm.cu", "mma_sync_gemm.cu", "tma_copy.cu", "tcgen05_gemm.cu"]
)
def test_own_kernels_pass(name: str) -> None:
    assert scan((KERNELS / name).read_text()) == []


def test_cublas_kernel_is_banned_on_its_include_and_calls() -> None:
    findings = scan((KERNELS / "banned_cublas.cu").read_text())
    assert (findings[0].line, findings[0].rule) == (2, "cublas")
    assert "cuBLAS" in findings[0].describe() and "line 2" in findings[0].describe()
    assert {f.rule for f in findings} == {"cublas"}
    assert {11, 12} <= {f.line for f in findings}


def test_dlopen_kernel_is_banned_but_its_comment_is_not() -> None:
    found = rules((KERNELS / "banned_dlopen.cu").read_text())
    assert (14, "dynamic_loading") in found and (14, "library_name") in found
    assert (15, "dynamic_loading") in found
    assert all(line > 3 for line, _ in found), "the comment naming cublas must not count"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("#include <cudnn.h>\n", [(1, "cudnn")]),
        ("#include <cutlass/gemm/device/gemm.h>\n", [(1, "cutlass")]),
        ("#include <cute/tensor.hpp>\n", [(1, "cutlass")]),
        ("#include <cublasLt.h>\n", [(1, "cublas")]),
        ("#include <thrust/sort.h>\n", [(1, "cub_thrust")]),
        ("#include <torch/extension.h>\n", [(1, "include_not_allowed")]),
        # The toolkit's own headers that reach the profiler, fatbinary registration or runtime compilation.
        ("#include <cupti.h>\n", [(1, "include_not_allowed")]),
        ("#include <nvperf_host.h>\n", [(1, "include_not_allowed")]),
        ("#include <nvvm.h>\n", [(1, "include_not_allowed")]),
        ("#include <crt/host_runtime.h>\n", [(1, "include_not_allowed")]),
        ('#include "my_helpers.cuh"\n', [(1, "include_not_allowed")]),
        # POSIX beyond the headers of what the link policy allows, and the standard library's internals.
        ("#include <unistd.h>\n#include <sys/time.h>\n#include <pthread.h>\n", []),
        ("#include <sys/mman.h>\n", [(1, "include_not_allowed")]),
        ("#include <dlfcn.h>\n", [(1, "include_not_allowed")]),
        ("#include <sys/syscall.h>\n", [(1, "include_not_allowed")]),
        ("#include <bits/c++config.h>\n", [(1, "include_not_allowed")]),
        ("#include HEADER_MACRO\n", [(1, "include_not_allowed")]),
        ("  #  include_next <cuda.h>\n", [(1, "include_not_allowed")]),
        # C23's #embed reads a file's bytes into the source, as .incbin does into the object.
        (
            'static const unsigned char key[] = {\n#embed "/home/u/.ssh/id_ed25519"\n};\n',
            [(2, "include_not_allowed")],
        ),
        ("\f#\vinclude <torch/extension.h>\n", [(1, "include_not_allowed")]),
        ("int x;\nusing namespace cute;\n", [(2, "cutlass")]),
        ("int x;\n\nauto t = cute::make_tensor(p);\n", [(3, "cutlass")]),
        ("CUTLASS_DEVICE void f();\n", [(1, "cutlass")]),
        ("void* h = dlopen(name, 1);\n", [(1, "dynamic_loading")]),
        ("int x;\ncudaProfilerStop();\n", [(2, "profiler_control")]),
        ('const char* lib = "libcudnn_ops.so";\n', [(1, "library_name")]),
        ('const char* n = R"x(libfoo.so.1)x";\n', [(1, "library_name")]),
        # The assembler reading a file at build time, however the directive's string is put together.
        (
            'asm(".section .rodata\\n.incbin \\"/home/u/.ssh/id_ed25519\\"\\n.previous");\n',
            [(1, "assembler_file")],
        ),
        ('int x;\nasm(".include \\"/home/u/.aws/credentials\\"");\n', [(2, "assembler_file")]),
        ('asm(".inc"\n    "bin \\"/etc/hostname\\"");\n', [(1, "assembler_file")]),
        ('asm(".inc\\x62in \\"/etc/hostname\\"");\n', [(1, "assembler_file")]),
        ('#define STR(x) #x\nasm(STR(.incbin "/etc/hostname"));\n', [(2, "assembler_file")]),
        # __has_include opens what it names: a path asks whether a file beyond the build's reach exists.
        ('#if __has_include("/home/u/.aws/credentials")\n#endif\n', [(1, "include_not_allowed")]),
        (
            "int x;\n#if __has_include_next (<../../../root/.ssh/id_rsa>)\n#endif\n",
            [(2, "include_not_allowed")],
        ),
        # Through a macro of the source's own: judged where it is used, whatever the operand's form there.
        (
            '#define PROBE(p) __has_include(p)\n#if PROBE("/etc/shadow")\n#endif\n',
            [(2, "include_not_allowed")],
        ),
        ('#define HAS __has_include\n#if HAS("/etc/shadow")\n#endif\n', [(2, "include_not_allowed")]),
        (
            '#define HAS(x) __has_include(x)\n#define P "/a"\n#if HAS(P)\n#endif\n',
            [(3, "include_not_allowed")],
        ),
        ("#define H(x) __has_include(<x>)\n#if H(/etc/shadow)\n#endif\n", [(1, "include_not_allowed")]),
        (
            '#define A(x) __has_include(x)\n#define B(y) A(y)\n#if B("/a")\n#endif\n',
            [(2, "include_not_allowed")],
        ),
        # So does GCC's dependency pragma, to compare the file's date; as a directive, _Pragma or a macro's #x.
        ('#pragma GCC dependency "/home/u/.aws/credentials"\n', [(1, "include_not_allowed")]),
        ('int x;\n_Pragma("GCC dependency \\"/etc/shadow\\"")\n', [(2, "include_not_allowed")]),
        ('#define P(x) _Pragma(#x)\nP(GCC dependency "/etc/shadow")\n', [(2, "include_not_allowed")]),
    ],
)
def test_rules(source: str, expected: list[tuple[int, str]]) -> None:
    assert rules(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        "#include <cuda_runtime.h>\n#include <cuda_bf16.h>\n#include <cuda_fp8.h>\n#include <cuda.h>\n",
        "#include <cooperative_groups.h>\n#include <cooperative_groups/reduce.h>\n#include <cuda/barrier>\n",
        "#include <cuda/ptx>\n#include <cuda/std/cstdint>\n#include <nv/target>\n",
        "#include <tvm/ffi/function.h>\n#include <dlpack/dlpack.h>\n#include <vector>\n#include <stdint.h>\n",
        "#include <mma.h>\n#include <cudaTypedefs.h>\n#include <cstdio>\n",
        "#include <crt/host_defines.h>\n#include <texture_fetch_functions.h>\n#include <curand_kernel.h>\n",
        # What cuda_runtime.h brings in, named directly (older code; nvcc warns on the internal wrappers).
        "#include <math_functions.h>\n#include <device_types.h>\n#include <sm_32_atomic_functions.h>\n",
        "#include <crt/sm_90_rt.h>\n#include <crt/math_functions.h>\n#include <cuda_stdint.h>\n",
        "#include <channel_descriptor.h>\n#include <vector_functions.hpp>\n#include <host_config.h>\n",
        # The whole standard library: what host code calls from it is the link policy's to judge.
        "#include <shared_mutex>\n#include <source_location>\n#include <cfenv>\n#include <wchar.h>\n",
        "#include <bits/stdc++.h>\n#include <fstream>\n#include <csignal>\n#include <setjmp.h>\n",
        "// #include <cublas_v2.h>\n/* cudnnConvolutionForward(\n cutlass::gemm */ int x;\n",
        'printf("ok\\n"); // dlopen("libcublas.so")\n',
        "int big = 1'000'000; char c = 'x'; const char* s = \"a /* not a comment */ b\";\n",
        "float cuteness = 1.0f;  // cublas, cute::\n",
        # `include` as a word or a member is no assembler directive.
        'const char* s = "see the include list"; opts.include_dirs = 1; // .incbin\n',
        'printf("1 file.\\n"); printf("include: %d\\n", n);\n',
        # Prose and the user's own names that only mention a library: honest messages and helpers.
        'printf("slower than cuBLAS\\n"); const char* note = "layout as in cuDNN";\n',
        'TVM_FFI_ICHECK(ok) << "cuBLAS-like tiling"; static const char* k = "gemm_cublas_compatible";\n',
        "int cutlass_style_swizzle(int x);\nnamespace cutlass_like { int y; }\nauto cublas_like = 1;\n",
        # CUB's primitives that go inside the user's own kernels.
        (
            "#include <cub/cub.cuh>\n#include <cub/warp/warp_reduce.cuh>\n"
            "using Sum = cub::BlockReduce<float, 128>; cub::WarpReduce<float>::TempStorage t; cub::Sum op;\n"
        ),
        # Feature tests by a header's name, and asking whether the operator exists.
        "#if defined(__has_include) && __has_include(<cuda/barrier>)\n#include <cuda/barrier>\n#endif\n",
        '#ifdef __has_include\n#if __has_include("cuda_fp8.h") || __has_include_next(<cutlass/cutlass.h>)\n#endif\n#endif\n',
        '#if 0\n#if __has_include("/etc/shadow")\n#endif\n#endif\n',
        # A portable source's own wrapper of the operator, asked for a header by name.
        (
            "#if defined(__has_include)\n#define HAS_INCLUDE(x) __has_include(x)\n#else\n#define HAS_INCLUDE(x) 0\n"
            "#endif\n#if HAS_INCLUDE(<cuda/barrier>)\n#endif\nint HAS_INCLUDE = 1;\n"
        ),
        "#define HAS __has_include\n#ifdef HAS\n#if HAS(<cuda_fp8.h>)\n#endif\n#endif\n",
        '#pragma GCC diagnostic push\n#pragma unroll 4\nprintf("GCC dependency check: none\\n");\n',
    ],
)
def test_allowed(source: str) -> None:
    assert scan(source) == []


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        ('extern "C" int cublasCreate_v2(void**);\n', "cublas"),
        ("cublasHandle_t handle;\n", "cublas"),
        ("int op = CUBLAS_OP_T;\n", "cublas"),
        ("int v = cudnnGetVersion();\n", "cudnn"),
        ("namespace cutlass { }\n", "cutlass"),
        ("cub::DeviceReduce::Sum(tmp, bytes, in, out, n);\n", "cub_thrust"),
        ("auto d = cub :: DispatchReduce<int>{};\n", "cub_thrust"),
        ("thrust::sort(v.begin(), v.end());\n", "cub_thrust"),
        ('const char* name = "cudnnConvolutionForward";\n', "library_name"),
        ('int gemm(int) __asm__("cublasSgemm_v2");\n', "library_name"),
        ('const char* file = "libcublas";\n', "library_name"),
    ],
)
def test_the_libraries_own_names_stay_refused(source: str, rule: str) -> None:
    assert [f.rule for f in scan(source)] == [rule]


def test_comment_markers_inside_strings_do_not_hide_code() -> None:
    source = 'const char* s = "/*";\ncublasCreate(&h);\nconst char* t = "*/";\n'
    assert rules(source) == [(2, "cublas")]


def test_line_numbers_survive_block_comments_and_raw_strings() -> None:
    source = '/* one\ntwo\nthree */\nauto r = R"(a\nb)";\n#include <cudnn.h>\n'
    assert rules(source) == [(6, "cudnn")]


SAFE_LINES = [
    "int x = 1;",
    "// cublasCreate(&h); in a line comment",
    "/* cudnnCreate(&h); */ float y = 2.0f;",
    'const char* s = "/* not a comment opener";',
    'const char* t = "// not a comment either";',
    "char q = '\\'';",
    "int big = 1'000'000;",
    "#include <cuda_bf16.h>",
    'asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");',
    "/* a block comment",
    "   spanning lines with cutlass::gemm inside */",
]


@given(st.lists(st.sampled_from(SAFE_LINES), max_size=30), st.data())
def test_a_banned_call_is_found_on_its_line_whatever_surrounds_it(
    lines: list[str], data: st.DataObject
) -> None:
    # Keep block comments balanced: an opener is always followed by its closer.
    text_lines: list[str] = []
    for line in lines:
        if line == SAFE_LINES[-1] and (not text_lines or text_lines[-1] != SAFE_LINES[-2]):
            continue
        if text_lines and text_lines[-1] == SAFE_LINES[-2] and line != SAFE_LINES[-1]:
            text_lines.append(SAFE_LINES[-1])
        text_lines.append(line)
    if text_lines and text_lines[-1] == SAFE_LINES[-2]:
        text_lines.append(SAFE_LINES[-1])
    slots = [i for i in range(len(text_lines) + 1) if i == 0 or text_lines[i - 1] != SAFE_LINES[-2]]
    where = data.draw(st.sampled_from(slots))
    text_lines.insert(where, "cublasSgemm(handle);")
    assert rules("\n".join(text_lines) + "\n") == [(where + 1, "cublas")]


REFERENCE = "#include <cublas_v2.h>\nstatic void reference(cublasHandle_t h) { cublasCreate_v2(&h); }\n"


@pytest.mark.parametrize(
    "source",
    [
        "#include <cuda_runtime.h>\n#if 0\n" + REFERENCE + "#endif\nint x;\n",
        "#if 0 // the reference, off\n" + REFERENCE + "#endif\n",
        "  #  if 0\n" + REFERENCE + "  # endif\n",
        "#if 0\n#ifdef CHECK\nint y;\n#else\n" + REFERENCE + "#endif\n" + REFERENCE + "#endif\n",
        # A comment hides an #endif from the preprocessor too; Windows line ends.
        "#if 0\n/*\n#endif\n*/\n" + REFERENCE + "#endif\n",
        ("#if 0\n" + REFERENCE + "#endif\n").replace("\n", "\r\n"),
    ],
)
def test_a_disabled_reference_under_if_0_is_not_the_candidates_code(source: str) -> None:
    """Honest files keep a cuBLAS reference switched off with `#if 0`: never compiled, never refused."""
    assert scan(source) == []


@pytest.mark.parametrize(
    "source",
    [
        "#if 0\nint a;\n#else\n" + REFERENCE + "#endif\n",
        "#if 0\nint a;\n#elif 1\n" + REFERENCE + "#endif\n",
        "#if 0\n#endif\n" + REFERENCE,
        # What the preprocessor reads as the group's end, whatever it looks like here.
        "#if 0\n#en\\\ndif\n" + REFERENCE,
        "#if 0\n%:endif\n" + REFERENCE,
        "#if 0\n\f#\vendif\n" + REFERENCE,
        # Not a literal 0, or a trigraph about: taken as live.
        "#if 0 \\\n|| 1\n" + REFERENCE + "#endif\n",
        "#if (0)\n" + REFERENCE + "#endif\n",
        "#if 0\n" + REFERENCE + "??=endif\n",
        # A comment over lines is one space: the condition goes on, or the directive is an #endif.
        "#if 0 /* off\n */ || 1\n" + REFERENCE + "#endif\n",
        "#if 0\n#/*\n*/endif\n" + REFERENCE,
        # Where the compiler's reading could differ from this one: nothing is taken for dead.
        "#if 0\rint a;\r#endif\r" + REFERENCE,
        "#if 0\n#en\\ \ndif\n" + REFERENCE,
        '#if 0\nconst char* p = R"(\n)";\n' + REFERENCE + "#endif\n",
    ],
)
def test_only_what_the_preprocessor_skips_is_left_out(source: str) -> None:
    assert "cublas" in {rule for _, rule in rules(source)}


def test_a_file_read_at_build_time_is_unsupported_as_an_include_off_the_list_is() -> None:
    """Reading a file is an honest construct the workbench does not run, whichever way it is asked for."""
    for source in (
        'asm(".incbin \\"table.bin\\"");\n',
        '#embed "table.bin"\n',
        '#include "table.h"\n',
        '#if __has_include("/data/table.bin")\n#endif\n',
    ):
        assert refusal_of(scan(source)) == Refusal.unsupported, source
