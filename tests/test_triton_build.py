"""Triton candidates through the static executor, no GPU: the trace of `run`, the compile for sm_90a and
sm_100a, ptxas, and the static tier's families on the cubins; torch work hidden from the AST check, bad
launches, compile errors and ABI mismatches as verdicts; the trace's closed doors.

Every evaluation is a real Triton compile in a child process (a few seconds each): they run two at a
time in one module fixture.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from build_support import session_cache

pytest.importorskip("triton", reason="the Triton track needs the triton wheel (the dev lock has it)")

from workbench.evaluate.gpu.sandbox import landlock_abi
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import EvalResult, Status
from workbench.evaluate.static_executor import StaticExecutor

KERNELS = Path(__file__).parent / "data" / "triton"

# The copy kernel of `copy_no_dot.py` without its `run`: each case below writes its own.
COPY = "import torch\n" + (KERNELS / "copy_no_dot.py").read_text().split("\n\ndef run(")[0] + "\n\n"
# A decoy: a real @triton.jit kernel, and torch work the AST cannot see (arithmetic on a tensor, a copy
# hidden in a view method, a compiler option passed through **).
DECOY = (
    COPY
    + """
def run(A, B, C):
    doubled = A + A
    flipped = B.t().contiguous()
    n = C.numel()
    options = {"ptx_options": "-O0"}
    copy_kernel[(triton.cdiv(n, 1024),)](doubled, C, n, BLOCK=1024, **options)
"""
)
# The tutorials' autograd wrapper, which the AST check lets through (`.apply` runs forward): torch work
# inside forward the AST cannot see is still the trace's.
THROUGH_APPLY = (
    COPY
    + """
class _Copy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A, C):
        ctx.n = C.numel()
        copy_kernel[(triton.cdiv(ctx.n, 1024),)](A, C, ctx.n, BLOCK=1024)
        C *= 2
        return C


def run(A, B, C):
    _Copy.apply(A, C)
"""
)
NEVER_LAUNCHES = (
    COPY
    + """
def run(A, B, C):
    n = C.numel()
    if n < 0:
        copy_kernel[(1,)](A, C, n, BLOCK=1024)
"""
)
WRONG_ABI = (
    COPY
    + """
def run(A, C):
    copy_kernel[(1,)](A, C, C.numel(), BLOCK=1024)
"""
)
RAISES = (
    COPY
    + """
def run(A, B, C):
    assert A.shape[0] == 7, "written for another M"
    copy_kernel[(1,)](A, C, C.numel(), BLOCK=1024)
"""
)
DOES_NOT_COMPILE = (
    COPY.replace(
        "    tl.store(Y + offsets, tl.load(X + offsets, mask=mask), mask=mask)\n",
        "    x = tl.load(X + offsets, mask=mask)\n"
        "    y = tl.dot(x, x)\n"
        "    tl.store(Y + offsets, y, mask=mask)\n",
    )
    + """
def run(A, B, C):
    copy_kernel[(1,)](A, C, C.numel(), BLOCK=1024)
"""
)

GEMM, ATTENTION = "gemm_n7168_k5120", "mha_with_lse_d128"
CASES: dict[str, tuple[str, str, str]] = {
    "gemm_tma": ((KERNELS / "gemm_tma.py").read_text(), GEMM, "hopper"),
    "gemm_blackwell": ((KERNELS / "gemm_block_ptr.py").read_text(), GEMM, "blackwell"),
    "attention": ((KERNELS / "attention_fwd.py").read_text(), ATTENTION, "hopper"),
    "no_tensor_core": ((KERNELS / "copy_no_dot.py").read_text(), GEMM, "hopper"),
    "decoy": (DECOY, GEMM, "hopper"),
    "through_apply": (THROUGH_APPLY, GEMM, "hopper"),
    "never_launches": (NEVER_LAUNCHES, GEMM, "hopper"),
    "wrong_abi": (WRONG_ABI, GEMM, "hopper"),
    "raises": (RAISES, GEMM, "hopper"),
    "does_not_compile": (DOES_NOT_COMPILE, GEMM, "hopper"),
}


def request(source: str, task: str, target: str) -> EvalRequest:
    return EvalRequest(task=task, target=target, source=source, language="triton")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_cache(tmp_path_factory)


@pytest.fixture(scope="module")
def results(cache: Path) -> dict[str, EvalResult]:
    async def evaluate_all() -> dict[str, EvalResult]:
        executor = StaticExecutor(cache)
        slots = asyncio.Semaphore(2)  # CI's two cores

        async def one(name: str) -> tuple[str, EvalResult]:
            async with slots:
                return name, await executor.evaluate(request(*CASES[name]))

        return dict(await asyncio.gather(*(one(name) for name in CASES)))

    return asyncio.run(evaluate_all())


def line_of(source: str, text: str) -> int:
    return next(number for number, line in enumerate(source.splitlines(), 1) if text in line)


def test_a_tma_gemm_on_hopper_shows_wgmma_tma_and_mbarriers(results: dict[str, EvalResult]) -> None:
    result = results["gemm_tma"]
    build, static = result.stages.build, result.stages.static
    assert build.status == Status.passed, build.message
    assert static.status == Status.passed and static.required_family == "GMMA"
    assert {"GMMA", "TMA", "MBARRIER"} <= set(static.families)
    assert static.opcodes.get("HGMMA", 0) > 0 and static.opcodes.get("UTMALDG", 0) > 0
    # The autotuner's two configs are two compiled kernels, each judged and listed.
    assert set(static.kernels) == {"gemm_tma#1", "gemm_tma#2"}
    assert [r.kernel for r in build.resources] == ["gemm_tma#1", "gemm_tma#2"]
    assert all(r.registers and r.spill_stores_bytes == 0 for r in build.resources)
    assert "grid 64x56" in build.message and "8 warps, 3 stages" in build.message
    assert build.command[:2] == ["ptxas", "-lineinfo"] and "--gpu-name=sm_90a" in build.command
    ptx = Path(build.ptx_path or "").read_text()
    assert ".entry gemm_tma" in ptx and "wgmma.mma_async" in ptx
    # Its wgmma shapes as the SASS holds them: what the GPU tiers count any other work's matrix multiplies at.
    shapes = static.mma_flops_per_thread
    assert set(shapes) == {"HGMMA"} and shapes["HGMMA"] >= 2 * 64 * 8 * 16 / 128
    assert Path(build.cubin_path or "").read_bytes()[:4] == b"\x7fELF"
    # A static pass is not a pass: the GPU tiers did not run.
    assert result.status == Status.not_run and result.static_passed


def test_a_gemm_for_blackwell_runs_tcgen05(results: dict[str, EvalResult]) -> None:
    static = results["gemm_blackwell"].stages.static
    assert static.status == Status.passed and static.required_family == "TCGEN05_MMA"
    assert static.opcodes.get("UTCHMMA", 0) > 0 and "TMEM" in static.families
    assert "GMMA" not in static.families


def test_attention_forward_uses_wgmma_for_both_products(results: dict[str, EvalResult]) -> None:
    result = results["attention"]
    assert result.stages.build.status == Status.passed, result.stages.build.message
    assert result.stages.static.status == Status.passed
    assert "attention_fwd grid 32x192" in result.stages.build.message  # S=4096/128 x B*H


def test_a_kernel_without_tl_dot_misses_the_family(results: dict[str, EvalResult]) -> None:
    static = results["no_tensor_core"].stages.static
    assert static.status == Status.static_missing_family
    assert "no tensor core at all" in static.message and "GMMA" not in static.families
    assert results["no_tensor_core"].status == Status.static_missing_family


def test_torch_work_the_ast_cannot_see_is_caught_by_the_trace(results: dict[str, EvalResult]) -> None:
    build = results["decoy"].stages.build
    assert build.status == Status.banned
    errors = "\n".join(build.errors)
    assert f"line {line_of(DECOY, 'A + A')}: [torch_compute] run ran torch's aten.add.Tensor" in errors
    assert f"line {line_of(DECOY, '.contiguous()')}: [torch_compute] run ran torch's aten.clone" in errors
    assert f"line {line_of(DECOY, '**options')}: [launch_option] launch option ptx_options=" in errors
    assert results["decoy"].stages.static.status == Status.not_run


def test_torch_work_inside_an_autograd_functions_forward_is_caught_by_the_trace(
    results: dict[str, EvalResult],
) -> None:
    build = results["through_apply"].stages.build
    assert build.status == Status.banned
    assert f"line {line_of(THROUGH_APPLY, 'C *= 2')}: [torch_compute] run ran torch's aten.mul" in "\n".join(
        build.errors
    )


def test_a_run_that_launches_nothing_is_banned(results: dict[str, EvalResult]) -> None:
    build = results["never_launches"].stages.build
    assert build.status == Status.banned and "[no_launch]" in build.message


def test_a_run_for_another_task_is_an_abi_mismatch(results: dict[str, EvalResult]) -> None:
    build = results["wrong_abi"].stages.build
    assert build.status == Status.abi_mismatch
    assert build.message == (
        f"line {line_of(WRONG_ABI, 'def run')}: run takes 2 parameters; the task passes 3 (A, B, C: its inputs, "
        "then its outputs)"
    )


def test_a_run_that_raises_names_its_line(results: dict[str, EvalResult]) -> None:
    build = results["raises"].stages.build
    assert build.status == Status.compile_error
    assert build.message.startswith(f"line {line_of(RAISES, 'assert A.shape')}: run raised AssertionError")


def test_a_kernel_triton_cannot_compile_names_its_line(results: dict[str, EvalResult]) -> None:
    build = results["does_not_compile"].stages.build
    assert build.status == Status.compile_error
    assert build.message.startswith(
        f"line {line_of(DOES_NOT_COMPILE, 'tl.dot(x, x)')}: Triton could not compile"
    )


def test_an_honest_import_not_run_here_is_unsupported_and_a_door_is_banned(cache: Path) -> None:
    """The scan's own classing reaches the verdict: numpy is honest elsewhere (`unsupported`), ctypes is a
    door (`banned`), and one door among honest imports makes the whole refusal `banned`."""
    source = (KERNELS / "copy_no_dot.py").read_text()

    def status(*imports: str) -> Status:
        code = "".join(f"{line}\n" for line in imports) + source
        return asyncio.run(StaticExecutor(cache).evaluate(request(code, GEMM, "hopper"))).stages.build.status

    assert status("import numpy as np") == Status.unsupported
    assert status("import ctypes") == Status.banned
    assert status("import numpy as np", "import ctypes") == Status.banned


def test_a_second_evaluation_is_a_cache_hit(results: dict[str, EvalResult], cache: Path) -> None:
    again = asyncio.run(StaticExecutor(cache).evaluate(request(*CASES["gemm_tma"])))
    assert again.stages.build.cache_hit
    assert again.stages.static.families == results["gemm_tma"].stages.static.families
    assert (again.stages.build.duration_s or 0) < 1.0


def traced(folder: Path, code: str) -> dict:
    """The trace child's report for `code` as the candidate's file, past the ban, sandboxed and with
    writes confined to `folder` (as the build gives it its own folder)."""
    source = folder / "kernel.py"
    source.write_text(code)
    out = folder / "kernels"
    out.mkdir()
    spec = {"names": ["A"], "tensors": [{"name": "A", "shape": [4], "dtype": "bfloat16"}]}
    request_file = folder / "request.json"
    request_file.write_text(
        json.dumps(
            {"source": str(source), "out": str(out), "arch": 90, "spec": spec, "device_name": "H200", "sms": 132,
             "sandbox": True, "writable": str(folder)}
        )
    )  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "workbench.evaluate.build.triton_trace", str(request_file)],
        check=True,
        cwd=folder,
        capture_output=True,
        timeout=120,
        env={"TRITON_CACHE_DIR": str(folder / "cache"), "TMPDIR": str(folder), "PATH": "/usr/bin:/bin"},
    )
    return json.loads((out / "trace.json").read_text())


@pytest.mark.skipif(sys.platform != "linux", reason="seccomp doors are Linux x86-64")
def test_the_trace_runs_the_candidate_behind_closed_doors(tmp_path: Path) -> None:
    """Past the ban, the candidate's code still cannot start a process (ptxas runs in the parent)."""
    report = traced(tmp_path, "import subprocess\nsubprocess.run(['true'], check=True)\n")
    assert report["error"]["kind"] == "import"
    assert report["error"]["message"].startswith("PermissionError") and report["error"]["line"] == 2


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")
def test_the_trace_writes_nowhere_but_its_own_folder(tmp_path: Path) -> None:
    """Past the ban, the candidate's code cannot write outside the build's folder: not another cache
    entry, not the workbench's code."""
    folder, outside = tmp_path / "build", tmp_path / "other-entry"
    folder.mkdir()
    outside.mkdir()
    report = traced(folder, f"open({str(outside / 'planted')!r}, 'w').write('x')\n")
    assert report["error"]["kind"] == "import"
    assert report["error"]["message"].startswith("PermissionError") and report["error"]["line"] == 1
    assert not (outside / "planted").exists()
