"""The `local` executor: build and static here, the GPU tiers in a worker process on this machine."""

from __future__ import annotations

from pathlib import Path

from workbench.evaluate.gpu_executor import GpuExecutor
from workbench.evaluate.worker import worker_argv
from workbench.evaluate.worker_client import WorkerClient


class LocalExecutor(GpuExecutor):
    name = "local"

    def __init__(self, cache_dir: Path | None = None) -> None:
        super().__init__(WorkerClient(worker_argv()), cache_dir)
