"""The `local` executor: build and static here, the GPU tiers in a worker process on this machine."""

from __future__ import annotations

import os
from pathlib import Path

from workbench.evaluate.gpu.worker import worker_argv
from workbench.evaluate.gpu_executor import GpuExecutor
from workbench.evaluate.worker_client import WorkerClient


class LocalExecutor(GpuExecutor):
    name = "local"

    def __init__(self, cache_dir: Path | None = None, gpu: str | None = None) -> None:
        """`gpu`: the one device (an index or UUID) the worker may see, for one worker per GPU."""
        env = None if gpu is None else {**os.environ, "CUDA_VISIBLE_DEVICES": gpu}
        super().__init__(WorkerClient(worker_argv(), env), cache_dir)
