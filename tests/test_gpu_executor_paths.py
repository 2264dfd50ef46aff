"""`GpuExecutor.evaluate`'s paths against a stand-in worker (no GPU here): what each path hands the
worker, in which order, with which waits, and the end that always follows a begin. The local CUDA path
builds here; the ssh path's build runs `python -m workbench.evaluate.remote_build` (here without ssh)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from build_support import needs_nvcc, session_cache

from workbench.evaluate import ssh_executor
from workbench.evaluate.gpu.protocol import BEGIN_MARGIN_S, STAGE_MARGIN_S
from workbench.evaluate.gpu_executor import GpuExecutor
from workbench.evaluate.remote_build import RemoteBuildError
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import EvalResult, Status
from workbench.evaluate.ssh_executor import SshExecutor
from workbench.evaluate.worker_client import WorkerClient, WorkerError

KERNEL = Path(__file__).parent / "gpu" / "kernels" / "wgmma_gemm.cu"
TASK = "gemm_n7168_k5120"
WGMMA_KERNELS = ["_Z17wgmma_gemm_kernel14CUtensorMap_stS_P13__nv_bfloat16iii"]


class StandInWorker(WorkerClient):
    """Answers as a worker on a one-GPU host would, and keeps what it was asked."""

    def __init__(self, fail_op: str | None = None) -> None:
        super().__init__([])
        self.asked: list[tuple[dict, float]] = []
        self.fail_op = fail_op

    async def start(self) -> dict:
        self.hello = {"type": "hello", "gpus": ["NVIDIA H200"], "host": "gpu-7"}
        return self.hello

    async def request(self, message: dict, timeout_s: float, on_progress: object = None) -> dict:
        self.asked.append((message, timeout_s))
        if message["op"] == self.fail_op:
            raise WorkerError("the worker exited (status 1)")
        if message["op"] == "begin":
            return {
                "type": "begun",
                "ok": True,
                "device": "NVIDIA H200 (0)",
                "seed": 7,
                "phases_s": {"load": 1.0},
            }
        if message["op"] == "stage":
            return {"type": "stage", "stage": message["stage"], "result": {"status": "passed"}}
        return {"type": "ended"}

    async def close(self) -> None:
        self.hello = None


def ops(worker: StandInWorker) -> list[str]:
    return [message.get("stage", message["op"]) for message, _ in worker.asked]


def evaluate(executor: GpuExecutor, **settings: Any) -> EvalResult:
    request = EvalRequest(task=TASK, target="hopper", source=KERNEL.read_text(), **settings)
    return asyncio.run(executor.evaluate(request))


@needs_nvcc
def test_the_local_path_builds_here_and_hands_the_worker_the_library(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    worker = StandInWorker()
    executor = GpuExecutor(worker, session_cache(tmp_path_factory))
    result = evaluate(executor, seed=5, call_timeout_s=3.0, profile_timeout_s=100.0, sanitize=False)
    assert result.status == Status.passed, result.message
    assert ops(worker) == ["begin", "correctness", "timing", "dynamic", "end"]
    (begin, begin_wait), (stage, stage_wait) = worker.asked[0], worker.asked[1]
    assert begin["library"] == result.stages.build.library_path
    assert begin["kernels"] == WGMMA_KERNELS
    assert (begin["seed"], begin["sanitize"], begin["timeouts"]) == (
        5,
        False,
        {"dynamic_s": 100.0, "call_s": 3.0},
    )
    assert begin["spec"]["target"] == "hopper" and "triton_entry" not in begin["spec"]
    # Its wgmma.m64n256k16, 4096 FLOPs a thread: what the dynamic tier counts any other work's at.
    assert begin["spec"]["mma_flops_per_thread"] == {"HGMMA": 2 * 64 * 256 * 16 / 128}
    assert begin_wait == 100.0 + BEGIN_MARGIN_S and stage_wait == 100.0 + STAGE_MARGIN_S
    assert (stage["trials"], stage["warmup"], stage["iterations"]) == (3, 10, 50)
    assert result.seed == 7 and result.device == "NVIDIA H200 (0)"


@needs_nvcc
def test_a_worker_lost_at_begin_is_an_infrastructure_error_and_no_end_is_sent(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    worker = StandInWorker(fail_op="begin")
    result = evaluate(GpuExecutor(worker, session_cache(tmp_path_factory)))
    assert ops(worker) == ["begin"]
    assert result.stages.correctness.status == Status.infrastructure_error
    assert result.stages.correctness.message == "GPU worker: the worker exited (status 1)"


@needs_nvcc
def test_the_ssh_path_builds_on_the_gpu_host_with_the_remote_build_module(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTXWB_CACHE", str(session_cache(tmp_path_factory)))
    ran: list[str] = []

    def here(
        address: object, options: object = None, module: str = "workbench.evaluate.gpu.worker"
    ) -> list[str]:
        ran.append(module)
        return [sys.executable, "-m", module]  # this machine stands in for the GPU host

    monkeypatch.setattr(ssh_executor, "ssh_command", here)
    executor = SshExecutor("ssh://gpu-7")
    worker = executor.client = StandInWorker()
    result = evaluate(executor)
    assert ran == ["workbench.evaluate.gpu.worker", "workbench.evaluate.remote_build"]
    assert result.status == Status.passed, result.message
    assert result.stages.static.required_present
    assert ops(worker) == ["begin", "correctness", "timing", "dynamic", "end"]
    assert worker.asked[0][0]["kernels"] == WGMMA_KERNELS
    assert worker.asked[0][0]["library"] == result.stages.build.library_path
    assert worker.asked[0][0]["spec"]["mma_flops_per_thread"] == {"HGMMA": 2 * 64 * 256 * 16 / 128}


def test_a_remote_build_without_a_reply_is_an_infrastructure_error(monkeypatch: pytest.MonkeyPatch) -> None:
    async def unreachable(*_: object) -> object:
        raise RemoteBuildError("exited with status 255: ssh: connect to host gpu-7: Connection refused")

    executor = SshExecutor("ssh://gpu-7")
    worker = executor.client = StandInWorker()
    monkeypatch.setattr(executor, "build", unreachable)
    result = evaluate(executor)
    assert result.status == Status.infrastructure_error
    assert result.message == (
        "build: remote build: exited with status 255: ssh: connect to host gpu-7: Connection refused"
    )
    assert ops(worker) == []  # nothing begun, nothing to end
