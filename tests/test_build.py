"""The build stage on real nvcc: artifacts, the ptxas report, warnings, errors, cache, timeout."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.build_support import KERNELS, build_kernel, needs_nvcc, session_cache
from workbench.evaluate.build.link_policy import import_allowed, library_kernels
from workbench.evaluate.build.nvcc import BuildToolchain, build, build_toolchain, compile_source, first_errors
from workbench.evaluate.build.ptxas_report import parse_ptxas
from workbench.evaluate.gpu.sandbox import landlock_abi
from workbench.evaluate.render import short_kernel
from workbench.evaluate.result import Status
from workbench.tasks import get_target

pytestmark = needs_nvcc


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_cache(tmp_path_factory)


def test_wgmma_kernel_builds_with_ptx_cubin_and_report(cache: Path) -> None:
    stage = build_kernel("wgmma_gemm.cu", "hopper", cache)
    assert stage.status == Status.passed, stage.compiler_output
    for path in (stage.library_path, stage.ptx_path, stage.cubin_path):
        assert path is not None and Path(path).is_file()
    assert "wgmma.mma_async" in Path(stage.ptx_path or "").read_text()
    assert Path(stage.cubin_path or "").read_bytes()[:4] == b"\x7fELF"
    assert "-gencode" in stage.command and "arch=compute_90a,code=sm_90a" in stage.command
    assert {"-O3", "-lineinfo", "--ptxas-options=-v", "-shared"} <= set(stage.command)
    [kernel] = stage.resources
    assert kernel.kernel.startswith("(anonymous namespace)::gemm_wgmma(")  # demangled
    assert kernel.registers and kernel.registers > 0
    assert kernel.shared_bytes == 2 * 64 * 16 * 2  # the two bf16 operand tiles
    assert (kernel.spill_stores_bytes, kernel.spill_loads_bytes) == (0, 0)
    assert stage.toolchain and "release" in stage.toolchain


def test_second_build_is_a_cache_hit(cache: Path) -> None:
    first = build_kernel("wgmma_gemm.cu", "hopper", cache)
    second = build_kernel("wgmma_gemm.cu", "hopper", cache)
    assert second.cache_hit and second.status == Status.passed
    assert second.build_key == first.build_key
    assert second.resources == first.resources
    assert second.library_path == first.library_path


def test_hopper_advisories_become_structured_warnings(cache: Path) -> None:
    stage = build_kernel("wgmma_serialized.cu", "hopper", cache)
    assert stage.status == Status.passed, stage.compiler_output
    kinds = {(w.code, w.kind) for w in stage.warnings}
    assert ("C7508", "setmaxnreg_ignored") in kinds
    assert ("C7514", "wgmma_serialized") in kinds
    assert {"C7517", "C7519"} <= {w.code for w in stage.warnings if w.kind == "wgmma_sync_injected"}
    serialized = next(w for w in stage.warnings if w.kind == "wgmma_serialized")
    assert serialized.kernel and "serialized_wgmma" in serialized.kernel
    assert "serialized_wgmma" in serialized.text and "_ZN" not in serialized.text
    assert "wgmma_serialized (C7514)" in stage.message
    assert {short_kernel(r.kernel) for r in stage.resources} == {"serialized_wgmma", "ignored_setmaxnreg"}


def test_compile_error_keeps_output_and_trims_errors(cache: Path) -> None:
    stage = build_kernel("compile_error.cu", "hopper", cache)
    assert stage.status == Status.compile_error
    assert stage.errors == ['kernel.cu(12): error: identifier "undeclared_value" is undefined']
    assert stage.errors[0] in stage.message
    assert "undeclared_value" in stage.compiler_output and "/tmp" not in stage.compiler_output
    assert stage.library_path is None and stage.cubin_path is None
    again = build_kernel("compile_error.cu", "hopper", cache)
    assert again.cache_hit and again.status == Status.compile_error


def test_missing_run_export_is_a_build_failure(cache: Path) -> None:
    source = (
        (KERNELS / "abi_example.cu")
        .read_text()
        .replace("TVM_FFI_DLL_EXPORT_TYPED_FUNC(run,", "TVM_FFI_DLL_EXPORT_TYPED_FUNC(other,")
    )
    stage = asyncio.run(build(source, get_target("hopper"), 300, cache))
    assert stage.status == Status.compile_error
    assert "exports no `run`" in stage.message


def test_timeout_kills_nvcc_and_is_not_cached(tmp_path: Path) -> None:
    source = (KERNELS / "abi_example.cu").read_text() + "\n// timeout test\n"
    stage = asyncio.run(compile_source(source, get_target("hopper"), 0.2, tmp_path))
    assert stage.status == Status.timeout
    assert "0.2 s" in stage.message
    assert not any(p.name == stage.build_key for p in tmp_path.rglob("*")), "a timeout must not be cached"
    assert not list(tmp_path.glob("build-*")), "the temporary build folder is removed"


def test_banned_source_never_reaches_nvcc(tmp_path: Path) -> None:
    stage = asyncio.run(
        build((KERNELS / "banned_cublas.cu").read_text(), get_target("hopper"), 300, tmp_path)
    )
    assert stage.status == Status.banned
    assert stage.message.startswith("line 2: [cublas]")
    assert not any(tmp_path.iterdir())


def test_parse_ptxas_entry_functions_only() -> None:
    # Captured from nvcc 13.0 -O3 --ptxas-options=-v on sm_90a (device function `opaque` is not a kernel).
    output = """\
ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions reading accumulator registers of  a wgmma between start and end of the pipeline stage in the function '_Z13serial_kernelPfmm'
ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine register count at entry.
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z13serial_kernelPfmm' for 'sm_90a'
ptxas info    : Function properties for _Z13serial_kernelPfmm
    32 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 34 registers, used 0 barriers, 32 bytes cumulative stack size, 4096 bytes smem, 360 bytes cmem[0]
ptxas info    : Compile time = 5.714 ms
ptxas info    : Function properties for _Z6opaquePf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
"""
    resources, warnings = parse_ptxas(output)
    [kernel] = resources
    assert kernel.kernel == "_Z13serial_kernelPfmm"
    assert (
        kernel.registers,
        kernel.stack_frame_bytes,
        kernel.spill_stores_bytes,
        kernel.spill_loads_bytes,
    ) == (
        34,
        32,
        8,
        4,
    )
    assert (kernel.shared_bytes, kernel.constant_bytes) == (4096, 360)
    assert [(w.code, w.kind, w.kernel) for w in warnings] == [
        ("C7514", "wgmma_serialized", "_Z13serial_kernelPfmm"),
        ("C7508", "setmaxnreg_ignored", None),
    ]


def test_first_errors_skips_summary_lines() -> None:
    output = 'kernel.cu(3): error: expected a ";"\nkernel.cu(9): error: x\n2 errors detected in the compilation of "kernel.cu".\n'
    assert first_errors(output) == ['kernel.cu(3): error: expected a ";"', "kernel.cu(9): error: x"]
    assert len(first_errors("\n".join(f"k.cu({i}): error: e" for i in range(20)))) == 5


def test_hidden_vendor_symbol_is_caught_at_the_link(cache: Path) -> None:
    stage = build_kernel("banned_hidden_symbol.cu", "hopper", cache)
    assert stage.status == Status.banned
    assert "imports cublasCreate_v2" in stage.message
    # One error per denied import, naming the source line that made it and what to do instead.
    assert len(stage.errors) == 1
    assert stage.errors[0].startswith("line 9: the library imports cublasCreate_v2")
    assert "(instead:" in stage.errors[0]


@pytest.mark.parametrize(
    ("symbol", "allowed"),
    [
        ("sinf@GLIBC_2.2.5", True),
        # The same functions under the names newer glibc and -ffast-math bind them to.
        ("__isoc23_strtol@GLIBC_2.38", True),
        ("__isoc99_sscanf@GLIBC_2.7", True),
        ("__expf_finite@GLIBC_2.15", True),
        ("perror@GLIBC_2.2.5", True),
        ("__isoc23_system@GLIBC_2.38", False),
        ("_ZNSo3putEc@GLIBCXX_3.4", True),
        ("__cxa_throw@CXXABI_1.3", True),
        ("_Unwind_Resume@GCC_3.0", True),
        ("__cudaRegisterFunction@libcudart.so.13", True),
        ("cudaMalloc@libcudart.so.13", True),
        ("cuTensorMapEncodeTiled", True),
        ("TVMFFIEnvGetStream", True),
        ("__gmon_start__", True),
        ("cublasCreate_v2", False),
        ("cublasLtMatmul@libcublasLt.so.13", False),
        ("cudnnCreate", False),
        ("_ZN7cutlass4gemm6device4GemmE", False),
        ("my_helper_in_another_library", False),
        # Doors into the process or past it, whatever the source looked like.
        ("dlopen@GLIBC_2.34", False),
        ("dlsym@GLIBC_2.34", False),
        ("dl_iterate_phdr@GLIBC_2.2.5", False),
        ("_r_debug@GLIBC_2.2.5", False),
        ("getauxval@GLIBC_2.16", False),
        ("syscall@GLIBC_2.2.5", False),
        ("ptrace@GLIBC_2.2.5", False),
        ("process_vm_writev@GLIBC_2.15", False),
        ("fork@GLIBC_2.2.5", False),
        ("execve@GLIBC_2.2.5", False),
        ("posix_spawn@GLIBC_2.15", False),
        ("mprotect@GLIBC_2.2.5", False),
        ("fopen@GLIBC_2.2.5", False),
        ("getenv@GLIBC_2.2.5", False),
        ("environ@GLIBC_2.2.5", False),
        ("pthread_create@GLIBC_2.34", False),
        (
            "_ZNSt6thread15_M_start_threadESt10unique_ptrINS_6_StateESt14default_deleteIS1_EEPFvvE@GLIBCXX_3.4.22",
            False,
        ),
        ("_ZNSt13basic_filebufIcSt11char_traitsIcEE4openEPKcSt13_Ios_Openmode@GLIBCXX_3.4", False),
        ("cudaGetExportTable@libcudart.so.13", False),
        ("cuProfilerStop", False),
        ("TVMFFIFunctionGetGlobal", False),
        ("TVMFFIEnvRegisterCAPI", False),
        ("PyRun_SimpleString", False),
        ("signal@GLIBC_2.2.5", False),
        ("_setjmp@GLIBC_2.2.5", False),
        ("longjmp@GLIBC_2.2.5", False),
        ("fesetround@GLIBC_2.2.5", False),
        ("malloc@GLIBC_2.2.5", True),
        # Locks and waits on the calling thread, calendar time, the floating-point environment.
        ("pthread_rwlock_rdlock@GLIBC_2.34", True),
        ("pthread_mutex_clocklock@GLIBC_2.34", True),
        ("sched_yield@GLIBC_2.2.5", True),
        # what <unistd.h> and <sys/time.h> declare: a sleep and the time pass, the process calls do not
        ("usleep@GLIBC_2.2.5", True),
        ("gettimeofday@GLIBC_2.2.5", True),
        ("fork@GLIBC_2.2.5", False),
        ("execve@GLIBC_2.2.5", False),
        ("getpid@GLIBC_2.2.5", False),
        ("read@GLIBC_2.2.5", False),
        ("nanosleep@GLIBC_2.2.5", True),
        ("timespec_get@GLIBC_2.16", True),
        ("strftime@GLIBC_2.2.5", True),
        ("fegetround@GLIBC_2.2.5", True),
        ("__ctype_b_loc@GLIBC_2.3", True),
        ("__ctype_toupper_loc@GLIBC_2.3", True),
        ("pthread_self@GLIBC_2.2.5", True),
        ("_ZNSt6thread20hardware_concurrencyEv@GLIBCXX_3.4", True),
        ("_ZNSt6thread6_StateD2Ev@GLIBCXX_3.4.22", False),
        ("__printf_chk@GLIBC_2.3.4", True),
        ("expf@GLIBC_2.27", True),
        ("TVMFFIErrorSetRaisedFromCStr", True),
    ],
)
def test_allowed_imports(symbol: str, allowed: bool) -> None:
    assert import_allowed(symbol) == allowed


def _abi_example_with(host: str, ahead: str = "") -> str:
    """The ABI example with `host` code put before its export, and `ahead` before the whole file."""
    head, export, tail = (KERNELS / "abi_example.cu").read_text().rpartition("TVM_FFI_DLL_EXPORT_TYPED_FUNC")
    return ahead + head + host + export + tail


@needs_nvcc
def test_a_system_call_in_host_assembly_is_banned(tmp_path: Path) -> None:
    door = 'static long door() { long r; asm volatile("syscall" : "=a"(r) : "a"(39)); return r; }\n'
    source = _abi_example_with(door + "long (*volatile keep)() = door;\n")
    stage = asyncio.run(compile_source(source, get_target("hopper"), 300, tmp_path))
    assert stage.status == Status.banned, stage.message
    assert "system call instruction" in stage.message


def test_nvtx_with_its_tool_loader_switched_back_on_is_banned_at_the_build(tmp_path: Path) -> None:
    """The build leaves NVTX no way to find a tool (honest ranges then pass: `debug_checks_left_in.cu`); a
    source that defines the loader back on brings the environment read and the dlopen it was built
    without, and the link policy refuses them at the line that made them."""
    loader = (
        "#undef NVTX_SUPPORT_ENV_VARS\n#define NVTX_SUPPORT_ENV_VARS 1\n"
        "#undef NVTX_SUPPORT_DYNAMIC_INJECTION_LIBRARY\n#define NVTX_SUPPORT_DYNAMIC_INJECTION_LIBRARY 1\n"
        "#include <nvtx3/nvToolsExt.h>\n"
        'static void mark() { nvtxMarkA("gemm"); }\nvoid (*volatile keep)() = mark;\n'
    )
    stage = asyncio.run(
        compile_source(_abi_example_with("", ahead=loader), get_target("hopper"), 300, tmp_path)
    )
    assert stage.status == Status.banned, stage.message
    assert "dlopen" in stage.message and "looks up code at run time" in stage.message


def test_a_kernel_in_a_librarys_namespace_is_banned_at_the_build(tmp_path: Path) -> None:
    """What the source scan cannot see (a namespace opened, not a `cub::` name): the module's kernels are
    judged by their own namespace; the user's kernels beside them, and one that only takes a library type
    as a template argument, are not a library's."""
    inside = (
        "namespace cub {\n__global__ void copy(float* x) { x[threadIdx.x] = 1.f; }\n}  // namespace cub\n"
    )
    stage = asyncio.run(compile_source(_abi_example_with(inside), get_target("hopper"), 300, tmp_path))
    assert stage.status == Status.banned, stage.message
    assert "1 kernel(s) of a library's own templates (cub::copy(float*))" in stage.message
    assert library_kernels(["_Z6reduceIN3cub3SumEEvv", "_ZN12_GLOBAL__N_14gemmEv"]) == []
    assert library_kernels(["_ZN6thrust8cuda_cub4core13_kernel_agentIvEEvv"]) != []
    assert library_kernels(["_ZN3cub18CUB_300001_SM_9006detail11EmptyKernelIvEEvv"]) == []


@pytest.mark.slow  # CUB's whole device-wide reduce compiled (12 s); the check itself is the test above's
def test_cubs_device_reduce_through_using_namespace_is_banned_at_the_build(tmp_path: Path) -> None:
    """CUB's device-wide reduce reached without the `cub::` the source scan knows (`using namespace cub`):
    its kernels are in the module, under CUB's namespace."""
    reduce = (
        "using namespace cub;\n"
        "void reduce(float* in, float* out, void* tmp, size_t bytes, cudaStream_t s) {\n"
        "  DeviceReduce::Sum(tmp, bytes, in, out, 1024, s);\n}\n"
        "void (*volatile keep_reduce)(float*, float*, void*, size_t, cudaStream_t) = reduce;\n"
    )
    source = _abi_example_with(reduce, ahead="#include <cub/cub.cuh>\n")
    stage = asyncio.run(compile_source(source, get_target("hopper"), 300, tmp_path))
    assert stage.status == Status.banned, stage.message
    assert "kernel(s) of a library's own templates" in stage.message and "DeviceReduce" in stage.message


def test_ptxas_error_keeps_the_ptx_it_cites(cache: Path) -> None:
    stage = build_kernel("wgmma_gemm.cu", "blackwell", cache)  # wgmma does not exist on sm_100a
    assert stage.status == Status.compile_error
    assert stage.errors[0].startswith("ptxas kernel.ptx, line ")
    assert "wgmma" in stage.errors[0] and "sm_100a" in stage.errors[0]
    assert stage.ptx_path and "wgmma.mma_async" in Path(stage.ptx_path).read_text()
    assert stage.cubin_path is None and stage.library_path is None


@pytest.mark.parametrize("cancel_after_s", [1.0, 2.5])
def test_a_cancelled_build_leaves_no_open_pipes_behind(cancel_after_s: float, tmp_path: Path) -> None:
    """Ctrl-C cancels the build: nvcc (and cuobjdump, later on) are reaped before the event loop closes."""
    import gc
    import warnings

    source = (KERNELS / "wgmma_gemm.cu").read_text()

    async def cancel_midway() -> None:
        task = asyncio.ensure_future(build(source, get_target("hopper"), 180.0, tmp_path))
        await asyncio.sleep(cancel_after_s)
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        asyncio.run(cancel_midway())
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
    assert not list(tmp_path.rglob("build.json"))  # nothing half-built is cached


def _reading(path: Path) -> str:
    """The ABI example with host assembly that puts `path`'s bytes into the library, its `.incbin` pasted
    together by the preprocessor where no source scan follows it."""
    paste = (
        "#define CAT(a, b) a##b\n#define STR(x) #x\n#define XSTR(x) STR(x)\n"
        f'asm(".section .rodata\\n." XSTR(CAT(inc, bin)) " \\"{path}\\"\\n.previous");\n'
    )
    return _abi_example_with(paste)


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock: the build is not confined")
def test_the_build_reads_nothing_beyond_the_toolchain_and_its_own_folder(tmp_path: Path) -> None:
    """A file beside the build (a key, another candidate's source) cannot be read into the library or the
    compiler's messages, however the source asks; one of the toolchain's can, so the request is real."""
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-42\n")
    hopper = get_target("hopper")
    stage = asyncio.run(build(_reading(secret), hopper, 300, tmp_path / "cache"))
    assert stage.status == Status.compile_error
    assert any(f"file not found: {secret}" in error for error in stage.errors), stage.errors
    assert "SECRET-42" not in stage.compiler_output + stage.message
    header = build_toolchain().tvm_ffi_include / "tvm" / "ffi" / "function.h"
    allowed = asyncio.run(build(_reading(header), hopper, 300, tmp_path / "cache"))
    assert allowed.status == Status.passed and allowed.library_path
    assert header.read_bytes()[:200] in Path(allowed.library_path).read_bytes()


def test_a_host_compiler_outside_the_system_is_reachable_but_never_a_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiler = tmp_path / "gcc-13" / "bin"
    compiler.mkdir(parents=True)
    for name in ("gcc", "g++"):
        (compiler / name).write_text("#!/bin/sh\n")
        (compiler / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{compiler}:{os.environ['PATH']}")
    toolchain = BuildToolchain(
        tmp_path / "cuda" / "bin" / "nvcc", "", tmp_path / "i", tmp_path / "l", "", False
    )
    monkeypatch.setenv("HOME", "/nonexistent-home")
    assert toolchain.reach[-1] == tmp_path / "gcc-13"
    monkeypatch.setenv("HOME", str(tmp_path / "gcc-13"))  # gcc in ~/bin: the home folder stays closed
    assert tmp_path / "gcc-13" not in toolchain.reach
