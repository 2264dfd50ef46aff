"""On a GPU: a fresh worker's first candidate makes no CUDA context while another worker's candidate holds
the GPU's lock (its runner, ncu and memcheck runs wait with it), and the driver names the GPU as the
runner's hello does.

Run on the GPU host from the checkout: `python -m pytest -m gpu -n 0 -s tests/gpu/test_gpu_lock_gpu.py`.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from pathlib import Path

import pytest

from workbench.evaluate.gpu.device_uuid import gpu_uuid
from workbench.evaluate.gpu.gpu_lock import LOCK_DIR_ENV, GpuLock
from workbench.evaluate.local_executor import LocalExecutor
from workbench.evaluate.request import EvalRequest, Progress
from workbench.evaluate.result import EvalResult, Status

pytestmark = pytest.mark.gpu

KERNEL = Path(__file__).parent / "kernels" / "wgmma_gemm.cu"
TASK = "gemm_n7168_k5120"
HELD_S = 10.0  # longer than a runner's imports and context (about 5 s on the H200)
GPU_FILE = re.compile(r"/dev/nvidia\d+$")


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    return children


def _below(pid: int) -> list[int]:
    """Every process descended from `pid`, not itself."""
    children, found, todo = _children(), [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _worker() -> int | None:
    return next((p for p in _below(os.getpid()) if "workbench.evaluate.gpu.worker" in _command(p)), None)


def _on_the_gpu(pids: list[int]) -> list[str]:
    """Those of `pids` with a GPU's device file open (a CUDA context), by their command lines."""
    found = []
    for pid in pids:
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        if any(GPU_FILE.match(link) for link in links):
            found.append(_command(pid)[:120])
    return found


def test_the_driver_names_the_gpu_as_the_runners_hello_does() -> None:
    import torch

    uuid, why = gpu_uuid("cuda")
    assert why == ""
    assert uuid == f"GPU-{torch.cuda.get_device_properties(0).uuid}"


def test_a_fresh_workers_first_candidate_makes_no_context_while_another_holds_the_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "locks"
    monkeypatch.setenv(LOCK_DIR_ENV, str(folder))  # the worker started below inherits it
    uuid, why = gpu_uuid("cuda")
    assert uuid, why
    other = GpuLock(uuid, folder)  # another worker's candidate on this GPU
    other.hold()
    built = threading.Event()

    def seen(event: Progress) -> None:
        if event.stage == "build" and event.state == "finished":
            built.set()

    outcome: list[EvalResult] = []

    def evaluate() -> None:
        executor = LocalExecutor(tmp_path / "builds", worker_service=False)

        async def go() -> EvalResult:
            try:
                request = EvalRequest(task=TASK, target="hopper", source=KERNEL.read_text())
                return await executor.evaluate(request, seen)
            finally:
                await executor.close()

        outcome.append(asyncio.run(go()))

    offenders: set[str] = set()
    thread = threading.Thread(target=evaluate)
    thread.start()
    try:
        assert built.wait(300), "the build did not finish"
        deadline = time.monotonic() + 60
        while (worker := _worker()) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert worker is not None, "no worker process"
        # Meanwhile its candidate's begin waits for the lock: none of its processes may touch the GPU.
        # Every one that does is named, not only the first (each wrongly early start is its own fault).
        watch_until = time.monotonic() + HELD_S
        while time.monotonic() < watch_until:
            offenders.update(_on_the_gpu(_below(worker)))
            time.sleep(0.2)
    finally:
        other.release()
    # Let go, the candidate runs: its processes are seen on the GPU (so the watch above could see them).
    seen_after: list[str] = []
    while thread.is_alive() and not seen_after:
        worker = _worker()
        seen_after = _on_the_gpu(_below(worker)) if worker is not None else []
        time.sleep(0.1)
    thread.join(300)
    other.close()
    assert not offenders, (
        f"the worker's processes opened the GPU while another held its lock: {sorted(offenders)}"
    )
    assert seen_after, "no process of the worker was ever seen with the GPU open"
    result = outcome[0]
    assert result.status == Status.passed, result.message
    assert result.phases_s.get("gpu_lock", 0) >= HELD_S
