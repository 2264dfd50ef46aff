"""Sweeps on a Ray cluster: `ptxwb bench run SPEC --ray local|auto|ADDRESS`.

What runs where:
- Evaluation actors, as many as the cluster holds room for when the sweep starts. For `local`, one
  per GPU (placed by Ray's `GPU` resource; Ray sets the actor's CUDA_VISIBLE_DEVICES, so its GPU worker
  sees that GPU alone), one candidate at a time on its GPU and the next one building beside it: the
  build is a CPU task pinned to the actor's node, so that node's build cache holds what the worker then
  finds, and nvcc never keeps a GPU waiting. For `static` (no GPU) the actors are CPU actors, one per
  CPU, each building and reading one candidate at a time. What an actor asks of the cluster is
  configurable (`GPU=1`, `CPU=2`, a custom resource such as `H200=1`).
- The driver keeps everything else: the model calls (API keys never leave its environment; a `local`
  cluster is started without the secret-named variables, which its processes would otherwise inherit),
  every session file, and the results store. An actor is sent the task, target and source only.
- Faults: an actor or node that dies mid-evaluation fails the call in the driver; the candidate goes to
  the next free actor (a `Requeued` in the sweep's summary) and Ray restarts the dead actor, which
  rejoins the pool once it answers again. Only the driver writes sessions, so a lost evaluation leaves
  nothing behind and the requeued one is recorded once.

Every node needs the workbench installed (the same version as the driver), nvcc, and for `local` the
GPU extras, as an ssh:// host does. Stage progress is not streamed back from actors.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workbench.bench.pools import Requeued
from workbench.errors import UserError
from workbench.evaluate.build.nvcc import build
from workbench.evaluate.executors import make_executor
from workbench.evaluate.request import EvalRequest, ProgressCallback
from workbench.evaluate.result import EvalResult
from workbench.secrets import is_secret_name
from workbench.tasks import get_target

try:
    import ray
    from ray.exceptions import RayActorError, RayTaskError
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
except ImportError as exc:
    raise UserError(f"--ray needs Ray, an optional extra: pip install 'ptx-workbench[ray]' ({exc})") from None

MAX_RESTARTS = 4
"""How often Ray restarts a dead evaluation actor before it stays dead."""
MAX_LOSSES = 3
"""An evaluation lost with its actor this many times stops the sweep (--resume finishes it)."""
CLOSE_TIMEOUT_S = 30.0
GPU_EXECUTOR = "local"


class ActorShape(BaseModel):
    """What one evaluation actor asks of the cluster, and how many candidates it holds at once."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    resources: dict[str, float] = Field(min_length=1)
    in_flight: int = Field(ge=1)

    def ray_options(self) -> dict[str, Any]:
        custom = {name: amount for name, amount in self.resources.items() if name not in ("CPU", "GPU")}
        return {
            "num_cpus": self.resources.get("CPU", 0),
            "num_gpus": self.resources.get("GPU", 0),
            "resources": custom,
        }

    def room(self, totals: dict[str, float]) -> int:
        """How many such actors a cluster with these resources holds."""
        return int(min(totals.get(name, 0.0) // amount for name, amount in self.resources.items()))

    def describe(self) -> str:
        return ",".join(f"{name}={amount:g}" for name, amount in self.resources.items())


def parse_resources(text: str) -> dict[str, float]:
    """`NAME=AMOUNT[,NAME=AMOUNT…]`, as `--ray-resources` takes it."""
    wrong = UserError(f"--ray-resources: expected NAME=AMOUNT[,NAME=AMOUNT], e.g. GPU=1, got {text!r}")
    resources: dict[str, float] = {}
    for part in text.split(","):
        name, equals, amount = part.strip().partition("=")
        try:
            value = float(amount)
        except ValueError:
            raise wrong from None
        if not equals or not name.strip() or not value > 0 or name.strip() in resources:
            raise wrong
        resources[name.strip()] = value
    return resources


def actor_shape(executors: Sequence[str], resources: dict[str, float] | None = None) -> ActorShape:
    """The actors' shape for a sweep's executors: `local` on GPUs, two candidates each; `static` on CPUs."""
    kinds = set(executors)
    if kinds == {GPU_EXECUTOR}:
        return ActorShape(resources=resources or {"GPU": 1.0}, in_flight=2)
    if kinds == {"static"}:
        return ActorShape(resources=resources or {"CPU": 1.0}, in_flight=1)
    raise UserError(
        f"--ray runs the executor `local` (on the cluster's GPUs) or `static`, not {', '.join(sorted(kinds))}; "
        "ssh:// hosts need no Ray"
    )


@dataclass(frozen=True)
class Cluster:
    address: str
    """Where other drivers reach it (the head's GCS address)."""
    resources: dict[str, float]
    started_here: bool

    def describe(self) -> str:
        shown = ", ".join(
            f"{self.resources[name]:g} {name}s" for name in ("CPU", "GPU") if name in self.resources
        )
        return f"Ray cluster {self.address}{' (started here)' if self.started_here else ''}: {shown or 'no CPUs'}"


@contextmanager
def _without_secrets() -> Iterator[None]:
    """The environment without its secret-named variables while a local cluster's processes start."""
    hidden = {name: os.environ.pop(name) for name in list(os.environ) if _hidden(name)}
    try:
        yield
    finally:
        os.environ.update(hidden)


def _hidden(name: str) -> bool:
    # Ray's own settings (RAY_*) stay: its processes need them, and they are not a provider's key.
    return is_secret_name(name) and not name.startswith("RAY_")


@contextmanager
def ray_cluster(
    address: str, *, num_cpus: int | None = None, num_gpus: int | None = None
) -> Iterator[Cluster]:
    """Connected to Ray for the block. `local`: a new cluster on this machine (`num_cpus`/`num_gpus`:
    what it declares; Ray detects them otherwise), gone afterwards; `auto`: the cluster `ray start`
    made on this machine; HOST:PORT: the head of one elsewhere."""
    if address.startswith("ray://"):
        raise UserError(
            f"--ray {address}: Ray Client addresses are not supported; run the sweep on a node of the "
            "cluster with --ray auto, or give the head's HOST:PORT"
        )
    try:
        if address == "local":
            with _without_secrets():
                ray.init(
                    address="local",
                    num_cpus=num_cpus,
                    num_gpus=num_gpus,
                    include_dashboard=False,
                    logging_level=logging.WARNING,
                )
        else:
            ray.init(address=address, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UserError(f"--ray {address}: no Ray cluster to join ({str(exc).splitlines()[0]})") from None
    try:
        yield Cluster(
            address=ray.get_runtime_context().gcs_address,
            resources=dict(ray.cluster_resources()),
            started_here=address == "local",
        )
    finally:
        ray.shutdown()


class ActorReady(BaseModel):
    """What an evaluation actor says once it is up (again)."""

    node: str
    pid: int
    gpus: list[str]
    cuda_visible_devices: str | None


def build_here(payload: str, cache_dir: str | None) -> str:
    """Build a candidate on this node, through its build cache (a CPU task; the ban scan included)."""
    request = EvalRequest.model_validate_json(payload)
    cache = Path(cache_dir) if cache_dir else None
    stage = asyncio.run(build(request.source, get_target(request.target), request.compile_timeout_s, cache))
    return stage.model_dump_json()


class EvaluationActor:
    """Holds one executor (for `local`, one GPU worker, on the GPU Ray gave this actor) and judges
    the candidates sent to it: for `local` each is built first as a CPU task on this node, while the
    one before it holds the GPU."""

    def __init__(self, executor: str, cache_dir: str | None) -> None:
        self.cache_dir = cache_dir
        self.executor = make_executor(executor, Path(cache_dir) if cache_dir else None)
        self.prebuild = executor == GPU_EXECUTOR
        self.node = ray.get_runtime_context().get_node_id()
        self.gpu = asyncio.Lock()

    async def ready(self) -> str:
        return ActorReady(
            node=self.node,
            pid=os.getpid(),
            gpus=[str(gpu) for gpu in ray.get_gpu_ids()],
            cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        ).model_dump_json()

    async def evaluate(self, payload: str) -> str:
        request = EvalRequest.model_validate_json(payload)
        if self.prebuild:
            here = NodeAffinitySchedulingStrategy(node_id=self.node, soft=False)
            await _build_task.options(scheduling_strategy=here).remote(payload, self.cache_dir)
        async with self.gpu:
            result = await self.executor.evaluate(request)
        return result.model_dump_json()

    async def close(self) -> None:
        await self.executor.close()


_build_task = ray.remote(num_cpus=1)(build_here)
_Actor = ray.remote(EvaluationActor)


@dataclass(frozen=True)
class ActorPlan:
    executor: str
    shape: ActorShape
    count: int

    def describe(self) -> str:
        return f"{self.count} evaluation actors ({self.shape.describe()} each, executor {self.executor})"


def plan_actors(cluster: Cluster, executors: Sequence[str], shape: ActorShape) -> ActorPlan:
    count = shape.room(cluster.resources)
    if count < 1:
        raise UserError(
            f"the Ray cluster {cluster.address} has no room for one evaluation actor ({shape.describe()}); "
            "start its nodes with GPUs, or ask less of each with --ray-resources"
        )
    return ActorPlan(executor=executors[0], shape=shape, count=count)


@dataclass
class ActorSlot:
    """One evaluation actor as the driver sees it."""

    index: int
    handle: Any
    ready: ActorReady | None = None
    evaluations: int = 0
    holding: list[str] = field(default_factory=list)
    """The candidates (source sha256, 12 hex digits) in flight on it now."""

    @property
    def label(self) -> str:
        where = f" (node {self.ready.node[:8]}, pid {self.ready.pid})" if self.ready else ""
        return f"actor {self.index}{where}"


def candidate_id(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:12]


class RayEvaluationPool:
    """The sweep's evaluations on Ray actors; the sessions see it as one executor.

    Made inside the sweep's event loop: the actors are asked for at once and each joins the pool when it
    first answers. Each actor is in the queue of free places once per candidate it may hold.
    """

    def __init__(
        self, plan: ActorPlan, on_requeue: Callable[[Requeued], None], cache_dir: Path | None = None
    ) -> None:
        self.name = f"ray:{plan.executor}"
        self.in_flight = plan.shape.in_flight
        self.on_requeue = on_requeue
        remote = _Actor.options(
            **plan.shape.ray_options(), max_restarts=MAX_RESTARTS, max_concurrency=plan.shape.in_flight
        )
        cache = str(cache_dir) if cache_dir else None
        self.actors = [ActorSlot(index, remote.remote(plan.executor, cache)) for index in range(plan.count)]
        self._free: asyncio.Queue[ActorSlot | None] = asyncio.Queue()
        self._places = plan.count * self.in_flight
        self._gone = ""
        self._joining: set[asyncio.Task[None]] = set()
        for slot in self.actors:
            self._spawn_join(slot, self.in_flight)

    @property
    def slots(self) -> int:
        return len(self.actors) * self.in_flight

    def _spawn_join(self, slot: ActorSlot, places: int) -> None:
        task = asyncio.create_task(self._join(slot, places))
        self._joining.add(task)
        task.add_done_callback(self._joining.discard)

    async def _join(self, slot: ActorSlot, places: int) -> None:
        """The actor's places go to the queue once it answers; an actor that stays dead takes them along."""
        try:
            slot.ready = ActorReady.model_validate_json(await slot.handle.ready.remote())
        except RayActorError as exc:
            self._gone = f"{slot.label}: {_first_line(exc)}"
            self._places -= places
            if self._places == 0:
                self._free.put_nowait(None)
            return
        for _ in range(places):
            self._free.put_nowait(slot)

    async def _take(self) -> ActorSlot:
        slot = await self._free.get()
        if slot is None:
            self._free.put_nowait(None)  # every other waiter learns it too
            raise UserError(
                f"every Ray evaluation actor is gone (last: {self._gone}); --resume finishes the sweep"
            )
        return slot

    async def _run_on(self, slot: ActorSlot, payload: str, candidate: str) -> str:
        """One evaluation on one actor; the actor's place is free again after it, unless the actor was lost."""
        slot.holding.append(candidate)
        lost = False
        try:
            reply: str = await slot.handle.evaluate.remote(payload)
            slot.evaluations += 1
            return reply
        except RayActorError:
            lost = True
            raise
        except RayTaskError as exc:
            if isinstance(exc.cause, UserError):
                raise exc.cause from None  # bad input said on the node: one line here too
            raise
        finally:
            slot.holding.remove(candidate)
            if not lost:
                self._free.put_nowait(slot)

    async def evaluate(self, request: EvalRequest, progress: ProgressCallback | None = None) -> EvalResult:
        payload = request.model_dump_json()
        candidate = candidate_id(request.source)
        attempt = 0
        while True:
            attempt += 1
            slot = await self._take()
            try:
                reply = await self._run_on(slot, payload, candidate)
            except RayActorError as exc:
                self._spawn_join(slot, 1)  # Ray restarts it; it takes candidates again once it answers
                lost = Requeued(
                    request.task, request.target, candidate, slot.label, attempt, _first_line(exc)
                )
                if attempt == MAX_LOSSES:
                    raise UserError(
                        f"{request.task} {request.target}: candidate {candidate} lost its Ray actor "
                        f"{MAX_LOSSES} times (last: {lost.error}); --resume finishes the sweep"
                    ) from None
                self.on_requeue(lost)
                continue
            try:
                return EvalResult.model_validate_json(reply)
            except ValidationError as exc:
                raise UserError(
                    f"{slot.label} answered with no verdict this workbench reads (is every node on the same "
                    f"version?): {_first_line(exc)}"
                ) from None

    async def close(self) -> None:
        """Nothing per session: the sweep closes the actors once, with `shutdown`."""

    async def shutdown(self) -> None:
        for task in list(self._joining):
            task.cancel()
        await asyncio.gather(*(self._close(slot) for slot in self.actors))

    async def _close(self, slot: ActorSlot) -> None:
        try:
            await asyncio.wait_for(slot.handle.close.remote(), CLOSE_TIMEOUT_S)
        except (RayActorError, TimeoutError):
            pass  # dead or stuck: killed below all the same
        ray.kill(slot.handle, no_restart=True)

    def report(self) -> str:
        """Evaluations per actor, for the sweep's summary."""
        counts = "; ".join(f"{slot.label} {slot.evaluations}" for slot in self.actors)
        return f"Ray: {sum(s.evaluations for s in self.actors)} evaluations on {len(self.actors)} actors ({counts})"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


class RayPools:
    """The sweep's pool factory for `--ray`; keeps the pool it made, for the summary."""

    def __init__(self, plan: ActorPlan, cache_dir: Path | None = None) -> None:
        self.plan = plan
        self.cache_dir = cache_dir
        self.made: RayEvaluationPool | None = None

    def __call__(self, on_requeue: Callable[[Requeued], None]) -> RayEvaluationPool:
        self.made = RayEvaluationPool(self.plan, on_requeue, self.cache_dir)
        return self.made
