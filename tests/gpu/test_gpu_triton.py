"""On a Hopper GPU: Triton candidates through every tier of the `local` executor, from the runtime cache
the workbench makes (`triton_runtime`); three hostile ones, torch work the build's trace never saw, a
launch specialised otherwise on the GPU than in the trace, and a fixed-point decoy; and the negated twin
of an honest one run outside the workbench.

Run on the GPU host from the checkout: `python -m pytest -m gpu -v -s tests/gpu/test_gpu_triton.py`
(`-s` prints each verdict's figures, for the record).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.evaluate.local_executor import LocalExecutor
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import EvalResult, Status
from workbench.tasks import Catalogue

pytestmark = pytest.mark.gpu
pytest.importorskip("triton")

DATA = Path(__file__).parents[1] / "data" / "triton"
GEMM, ATTENTION = "gemm_n7168_k5120", "mha_with_lse_d128"
# Head dimension 64: the softmax's per-score work is the largest share of the task's FLOPs there.
ATTENTION_D64 = "mha_with_lse_d64"
# The hostile kernels are the honest TMA GEMM changed at test time, as the CUDA corpus is composed.
HONEST = (DATA / "gemm_tma.py").read_text()
HEAD, RUN = HONEST.split("def run(A, B, C):\n")
AUTOTUNE = HEAD[HEAD.index("@triton.autotune(") : HEAD.index("@triton.jit")]


def hidden_torch() -> str:
    """Torch work only where the trace cannot see it: on the build's meta tensors `get_device()` is -1,
    so the trace records nothing; on the GPU every call also runs torch's elementwise kernels."""
    guard = "    if A.get_device() >= 0:  # a real GPU, not the build's trace\n        A = (A + A) * 0.5\n"
    return HEAD + "def run(A, B, C):\n" + guard + RUN


def respecialised() -> str:
    """A launch specialised otherwise on the GPU than in the build's trace (another block size where
    `get_device()` says a real device): the kernel that would run is one the static tier never judged."""
    return HEAD.replace(AUTOTUNE, "") + (
        "def run(A, B, C):\n"
        "    M, K = A.shape\n"
        "    N = B.shape[0]\n"
        "    block_k = 32 if A.get_device() >= 0 else 64\n"
        "    a_desc = TensorDescriptor.from_tensor(A, [128, block_k])\n"
        "    b_desc = TensorDescriptor.from_tensor(B, [128, block_k])\n"
        "    c_desc = TensorDescriptor(C, C.shape, C.stride(), [128, 128])\n"
        "    grid = (triton.cdiv(M, 128), triton.cdiv(N, 128))\n"
        "    gemm_tma[grid](a_desc, b_desc, c_desc, M, N, K, BLOCK_M=128, BLOCK_N=128, BLOCK_K=block_k, num_warps=8)\n"
    )


def fixed_point_decoy() -> str:
    """A decoy: the answer from 64-bit integer multiply-adds in fixed point (A and B in steps of 2^-14, made
    from each bf16's bits by shifts, so not one float multiply counts toward the task); beside it the honest
    TMA GEMM into a scratch tensor nobody reads, so the tensor pipe shows all the task's FLOPs. Only the
    negated twin tells them apart."""
    fixed = (
        "@triton.jit\n"
        "def to_fixed(bits):\n"
        "    # a bf16's bits as an integer in steps of 2^-14: (1.mantissa) * 2^(exponent - 127) * 2^14\n"
        "    mantissa = (bits & 0x7F) | 0x80\n"
        "    shift = ((bits >> 7) & 0xFF) - 120\n"
        "    up = mantissa << tl.minimum(tl.maximum(shift, 0), 24)\n"
        "    down = mantissa >> tl.minimum(tl.maximum(-shift, 0), 31)\n"
        "    size = tl.where(shift >= 0, up, down)\n"
        "    size = tl.where((bits & 0x7F80) == 0, 0, size)\n"
        "    return tl.where((bits & 0x8000) != 0, -size, size).to(tl.int64)\n\n\n"
        "@triton.jit\n"
        "def fixed_gemm(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):\n"
        "    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)\n"
        "    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)\n"
        "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int64)\n"
        "    for k in range(0, K):\n"
        "        a = tl.load(a_ptr + rm.to(tl.int64) * K + k, mask=rm < M, other=0.0)\n"
        "        b = tl.load(b_ptr + rn.to(tl.int64) * K + k, mask=rn < N, other=0.0)\n"
        "        ai = to_fixed(a.to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF)\n"
        "        bi = to_fixed(b.to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF)\n"
        "        acc += ai[:, None] * bi[None, :]\n"
        "    c = acc.to(tl.float32) * (1.0 / (16384.0 * 16384.0))\n"
        "    at = rm[:, None].to(tl.int64) * N + rn[None, :]\n"
        "    tl.store(c_ptr + at, c.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))\n\n\n"
    )
    show = RUN.replace(
        "TensorDescriptor(C, C.shape, C.stride(), [128, 128])",
        "TensorDescriptor(S, S.shape, S.stride(), [128, 128])",
    )
    return (
        "import torch\n"
        + HEAD
        + fixed
        + "def run(A, B, C):\n"
        + "    S = torch.empty_like(C)  # the tensor-core GEMM's answer, never read\n"
        + show
        + "    fixed_gemm[(triton.cdiv(M, 64), triton.cdiv(N, 64))](A, B, C, M, N, K, BLOCK_M=64, BLOCK_N=64)\n"
    )


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory):
    """One executor (one worker) for the module, as a sweep holds one."""
    loop = asyncio.new_event_loop()
    executor = LocalExecutor(tmp_path_factory.mktemp("builds"))
    yield loop, executor
    loop.run_until_complete(executor.close())
    loop.close()


def judged(executor, name: str, source: str, task: str) -> EvalResult:
    loop, local = executor
    request = EvalRequest(task=task, target="hopper", source=source, language="triton")
    result = loop.run_until_complete(local.evaluate(request))
    timing = result.stages.timing
    print(
        f"\n{name} on {task}: {result.status.value} | {result.message}\n"
        f"  speedup {timing.speedup} | dynamic {result.stages.dynamic.status.value}: "
        f"{result.stages.dynamic.executed_families} share {result.stages.dynamic.tensor_share}, other paths"
        f" {result.stages.dynamic.other_work_share}{_per_score(task, result)}\n"
        f"  phases {result.phases_s}"
    )
    return result


def _per_score(task: str, result: EvalResult) -> str:
    """The other paths' FLOPs per query-key score of an attention task (what the softmax spent)."""
    dynamic = result.stages.dynamic
    definition = Catalogue.load().get(task)
    scores = definition.scores(definition.workload())
    if not scores or dynamic.other_work_share is None or not dynamic.task_flops:
        return ""
    return f" ({dynamic.other_work_share * dynamic.task_flops / scores:.1f} FLOPs per query-key score)"


@pytest.mark.parametrize(
    ("name", "task"),
    [("gemm_tma.py", GEMM), ("attention_fwd.py", ATTENTION), ("attention_fwd.py", ATTENTION_D64)],
)
def test_a_triton_kernel_passes_every_tier_its_tensor_core_work_proven(
    executor, name: str, task: str
) -> None:
    result = judged(executor, name, (DATA / name).read_text(), task)
    assert result.status == Status.passed, result.message
    assert [t.fresh_addresses for t in result.stages.correctness.trials][-1]
    dynamic = result.stages.dynamic
    assert dynamic.required_executed and dynamic.kernels
    assert dynamic.tensor_share is not None and dynamic.tensor_share > 0.9
    timing = result.stages.timing
    assert timing.method == "cupti" and timing.speedup is not None and timing.speedup > 0
    assert all(k in dynamic.kernels for k in timing.candidate.kernels)


def test_torch_work_the_trace_never_saw_is_a_foreign_kernel(executor) -> None:
    result = judged(executor, "hidden_torch.py", hidden_torch(), GEMM)
    assert result.stages.build.status == Status.passed  # the ban and the trace cannot see it
    assert result.status == Status.foreign_kernel, result.message
    assert "not defined in the candidate's module" in result.message


def test_a_launch_specialised_otherwise_than_traced_runs_nothing_unjudged(executor) -> None:
    result = judged(executor, "respecialised.py", respecialised(), GEMM)
    assert result.stages.build.status == Status.passed and result.stages.static.status == Status.passed
    assert result.status == Status.runtime_error, result.message
    assert "only kernels the build compiled and judged may run" in result.message


def test_a_fixed_point_decoy_beside_a_real_tensor_core_gemm_is_a_decoy(executor) -> None:
    """Its wgmma do all the task's FLOPs and its answer never sees them: the negated twin, run on the same
    inputs, answers the same."""
    result = judged(executor, "decoy_fixed_point.py", fixed_point_decoy(), GEMM)
    assert result.stages.build.negated_library_path, result.stages.build.negated_note
    assert result.status == Status.decoy, result.message
    assert "does not depend on its wgmma" in result.stages.dynamic.message


# The candidate's `run` from a build entry's runtime cache, outside the workbench's processes, on inputs of
# the traced shapes: how far C is from A·Bᵀ and from its negation.
RUN_ENTRY = """
import sys
from pathlib import Path

import torch

from workbench.evaluate.gpu.triton_runtime import open_candidate

module = open_candidate(Path(sys.argv[1])).module()
g = torch.Generator(device="cuda").manual_seed(1)
A = torch.randn(8192, 5120, device="cuda", dtype=torch.bfloat16, generator=g)
B = torch.randn(7168, 5120, device="cuda", dtype=torch.bfloat16, generator=g)
C = torch.empty(8192, 7168, device="cuda", dtype=torch.bfloat16)
module.run(A, B, C)
torch.cuda.synchronize()
want = A.float() @ B.float().T
print((C.float() - want).norm().item() / want.norm().item(), (C.float() + want).norm().item() / want.norm().item())
"""


def test_the_negated_twin_of_an_honest_gemm_answers_minus_its_product(executor) -> None:
    """The twin the check runs, run here: the honest TMA GEMM's answers A·Bᵀ, its twin's -A·Bᵀ."""
    result = judged(executor, "gemm_tma.py", HONEST, GEMM)
    assert result.status == Status.passed, result.message
    twin = result.stages.build.negated_library_path
    assert twin, result.stages.build.negated_note
    errors = {}
    for name, entry in (("original", str(Path(twin).parent)), ("twin", twin)):
        done = subprocess.run(
            [sys.executable, "-c", RUN_ENTRY, entry], capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, done.stderr[-2000:]
        errors[name] = [float(x) for x in done.stdout.split()[-2:]]
    print(f"\nrelative error against A·Bᵀ and against -A·Bᵀ: {errors}")
    assert errors["original"][0] < 0.01 and errors["original"][1] > 1.9
    assert errors["twin"][1] < 0.01 and errors["twin"][0] > 1.9
