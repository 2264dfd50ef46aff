"""The sweep's two pools: model calls in flight, and evaluation workers.

Every trajectory is an ordinary agent session; its model and its executor are wrapped here, so the
loop itself is unchanged. Model calls: `concurrency` at once (a call retrying after a rate limit holds
its slot, so a limited provider sees fewer calls). Evaluations: one worker per local GPU or ssh host;
for `local` the candidate is built first on a CPU core (the content-addressed build cache keeps it),
so builds overlap the GPU's work and the worker finds the build done. `static` needs no GPU: its
builds run one per CPU core.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from workbench.agent.models import ChatMessage, Model, Reply
from workbench.agent.models.base import Author, OnDelta, OnRetry
from workbench.evaluate.build.nvcc import build
from workbench.evaluate.executors import make_executor
from workbench.evaluate.request import EvalRequest, Executor, ProgressCallback
from workbench.evaluate.result import EvalResult
from workbench.tasks import get_target


class SweepPool(Executor, Protocol):
    """What the sweep runs its sessions' evaluations through: this host's workers, or a Ray cluster's."""

    @property
    def slots(self) -> int:
        """How many evaluations run at once."""
        ...

    async def shutdown(self) -> None:
        """Release every worker, once, at the end of the sweep."""
        ...


@dataclass(frozen=True)
class Requeued:
    """An evaluation handed to another worker because the one holding it was lost (a Ray actor or node)."""

    task: str
    target: str
    candidate: str
    """The first 12 hex digits of the source's sha256."""
    worker: str
    attempt: int
    error: str


class PooledModel:
    """A model whose calls wait for a free slot of the sweep's model pool."""

    def __init__(self, inner: Model, slots: asyncio.Semaphore) -> None:
        self.inner = inner
        self.name = inner.name
        self.author: Author = inner.author
        self._slots = slots

    def settings(self) -> dict[str, object]:
        return self.inner.settings()

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        on_delta: OnDelta | None = None,
        on_retry: OnRetry | None = None,
    ) -> Reply:
        async with self._slots:
            return await self.inner.complete(messages, on_delta=on_delta, on_retry=on_retry)


def visible_gpus() -> list[str]:
    """The GPUs a `local` worker may be pinned to: CUDA_VISIBLE_DEVICES, else what nvidia-smi lists."""
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [gpu.strip() for gpu in given.split(",") if gpu.strip()]
    try:
        listed = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return (
        [line.strip() for line in listed.stdout.splitlines() if line.strip()]
        if listed.returncode == 0
        else []
    )


def pinned_local(gpu: str, cache_dir: Path | None, worker_service: bool | None = None) -> Executor:
    """The `local` executor with its worker on one GPU of several (GPU modules load only for it)."""
    from workbench.evaluate.local_executor import LocalExecutor

    return LocalExecutor(cache_dir, gpu=gpu, worker_service=worker_service)


def make_workers(
    specs: Sequence[str], cache_dir: Path | None, worker_service: bool | None = None
) -> list[Executor]:
    """One executor per worker: every local GPU (one unpinned worker if none is listed), every ssh host."""
    workers: list[Executor] = []
    for spec in specs:
        gpus = visible_gpus() if spec == "local" else []
        if len(gpus) > 1:
            workers.extend(pinned_local(gpu, cache_dir, worker_service) for gpu in gpus)
        else:
            workers.append(make_executor(spec, cache_dir, worker_service))
    return workers


class EvaluationPool:
    """Hands each evaluation to an idle worker; the sessions see it as one executor."""

    def __init__(
        self,
        specs: Sequence[str],
        cache_dir: Path | None = None,
        cpus: int | None = None,
        worker_service: bool | None = None,
    ) -> None:
        self.name = "+".join(dict.fromkeys(specs))
        self.cache_dir = cache_dir
        self.static = all(spec == "static" for spec in specs)
        self.prebuild = all(spec == "local" for spec in specs)
        self.workers = make_workers(specs, cache_dir, worker_service)
        self.cpus = cpus or os.cpu_count() or 1
        self._cpus = asyncio.Semaphore(self.cpus)
        self._idle: asyncio.Queue[Executor] = asyncio.Queue()
        for worker in self.workers:
            self._idle.put_nowait(worker)

    @property
    def slots(self) -> int:
        """How many evaluations run at once."""
        return self.cpus if self.static else len(self.workers)

    async def evaluate(self, request: EvalRequest, progress: ProgressCallback | None = None) -> EvalResult:
        if self.static:
            async with self._cpus:
                return await self.workers[0].evaluate(request, progress)
        if self.prebuild:
            async with self._cpus:
                await build(
                    request.source, get_target(request.target), request.compile_timeout_s, self.cache_dir
                )
        worker = await self._idle.get()
        try:
            return await worker.evaluate(request, progress)
        finally:
            self._idle.put_nowait(worker)

    async def close(self) -> None:
        """Nothing per session: the sweep closes the workers once, with `shutdown`."""

    async def shutdown(self) -> None:
        for worker in self.workers:
            await worker.close()
