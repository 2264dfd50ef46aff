"""The `local` executor: build and static here, the GPU tiers in a worker on this machine: the per-user
worker service's (`worker_service.py`, warm across commands), or one of this command's own."""

from __future__ import annotations

import os
from pathlib import Path

from workbench.evaluate.gpu.worker import worker_argv
from workbench.evaluate.gpu_executor import GpuExecutor
from workbench.evaluate.service_client import ServiceClient, service_wanted
from workbench.evaluate.worker_client import WorkerClient, WorkerConnection


class LocalExecutor(GpuExecutor):
    name = "local"

    def __init__(
        self, cache_dir: Path | None = None, gpu: str | None = None, worker_service: bool | None = None
    ) -> None:
        """`gpu`: the one device (an index or UUID) the worker may see, for one worker per GPU.
        `worker_service`: through the service (None: unless PTXWB_NO_WORKER_SERVICE says not)."""
        client: WorkerConnection
        if worker_service if worker_service is not None else service_wanted():
            client = ServiceClient(gpu)
        else:
            env = None if gpu is None else {**os.environ, "CUDA_VISIBLE_DEVICES": gpu}
            client = WorkerClient(worker_argv(), env)
        super().__init__(client, cache_dir)
