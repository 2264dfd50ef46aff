"""The `local` executor on a machine without a GPU: asking for it is bad input, said in one line before
anything is built, by the library and by `ptxwb eval` (exit 2)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.errors import UserError
from workbench.evaluate.executors import make_executor
from workbench.evaluate.gpu.worker import list_gpus
from workbench.evaluate.request import EvalRequest, Progress

KERNEL = Path(__file__).parent / "gpu" / "kernels" / "wgmma_gemm.cu"
pytestmark = pytest.mark.skipif(
    bool(list_gpus()), reason="this machine has a GPU: tests/gpu covers the local executor there"
)


def test_without_a_gpu_the_local_executor_is_refused_before_any_build(tmp_path: Path) -> None:
    executor = make_executor("local", tmp_path / "builds")
    events: list[Progress] = []

    async def go():
        try:
            request = EvalRequest(task="gemm_n7168_k5120", target="hopper", source=KERNEL.read_text())
            return await executor.evaluate(request, events.append)
        finally:
            await executor.close()

    with pytest.raises(UserError, match="no NVIDIA GPU on this machine"):
        asyncio.run(go())
    assert events == []
    assert not (tmp_path / "builds").exists()


def test_ptxwb_eval_local_without_a_gpu_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from workbench.cli.main import main; main()", "eval", str(KERNEL),
         "--task", "gemm_n7168_k5120", "--executor", "local"],
        capture_output=True, text=True, timeout=300, check=False, env={"PTXWB_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": os.environ["XDG_RUNTIME_DIR"]},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "no NVIDIA GPU" in lines[0] and "Traceback" not in done.stderr


def test_the_service_started_for_a_host_without_a_gpu_does_not_linger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.evaluate.service_client import running_labels

    # A folder of its own: a service another test file left in this process's folder is not this one's.
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    executor = make_executor("local", tmp_path / "builds")

    async def go():
        try:
            request = EvalRequest(task="gemm_n7168_k5120", target="hopper", source=KERNEL.read_text())
            return await executor.evaluate(request)
        finally:
            await executor.close()

    with pytest.raises(UserError, match="no NVIDIA GPU"):
        asyncio.run(go())
    assert running_labels() == []
