"""The `local` executor on a machine without a GPU: build and static run here, the worker answers that
there is no GPU, and the GPU tiers are reported as not run (never as passed)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from build_support import needs_nvcc

from workbench.evaluate.executors import make_executor
from workbench.evaluate.request import EvalRequest, Progress
from workbench.evaluate.result import Status
from workbench.evaluate.worker import list_gpus

KERNEL = Path(__file__).parent / "gpu" / "kernels" / "wgmma_gemm.cu"


@needs_nvcc
@pytest.mark.skipif(
    bool(list_gpus()), reason="this machine has a GPU: tests/gpu covers the local executor there"
)
def test_without_a_gpu_the_gpu_tiers_are_not_run(tmp_path: Path) -> None:
    executor = make_executor("local", tmp_path / "builds")
    events: list[Progress] = []

    async def go():
        try:
            request = EvalRequest(task="gemm_n7168_k5120", target="hopper", source=KERNEL.read_text())
            return await executor.evaluate(request, events.append)
        finally:
            await executor.close()

    result = asyncio.run(go())
    assert result.executor == "local"
    assert result.stages.build.status == Status.passed and result.stages.static.status == Status.passed
    for stage in (result.stages.correctness, result.stages.dynamic, result.stages.timing):
        assert stage.status == Status.not_run and stage.message.startswith("no GPU on")
    assert result.status == Status.not_run
    assert [(e.stage, e.state) for e in events][::2] == [
        ("build", "started"),
        ("static", "started"),
        ("correctness", "started"),
        ("dynamic", "started"),
        ("timing", "started"),
    ]
