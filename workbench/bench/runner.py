"""`ptxwb bench run`: every trajectory of a spec as an ordinary agent session, headless, resumable.

Crash safety: each session file is append-only and fsync'd per event. On `--resume` a trajectory
whose session ended is never run again; one cut short (kill -9) or interrupted (Ctrl-C) is run again
from its first turn, and the cut attempt is moved to `sessions/unfinished/` (kept, never counted).
Re-running rather than continuing keeps every trajectory one uninterrupted session, and a `scripted:`
or `replay:` model replays from its first answer as it should. The store is synced from the session
files first, so a crash between a session's end and its row loses nothing.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from workbench.agent.config import AgentConfig
from workbench.agent.items import LoopItem, ModelRetry
from workbench.agent.loop import MiniPTXAgent
from workbench.agent.models import Model, make_model
from workbench.bench.folder import UNFINISHED, SweepFolder
from workbench.bench.pools import EvaluationPool, PooledModel, Requeued, SweepPool
from workbench.bench.ptxbench import IMPORTS, SESSIONS
from workbench.bench.records import TrajectoryRecord, from_session
from workbench.bench.spec import Planned, SweepSpec, TrajectoryKey, plan
from workbench.bench.store import STORE_FILE, Store
from workbench.errors import UserError
from workbench.knowledge import load_pack
from workbench.session.events import Evaluation, Message
from workbench.session.log import read_session
from workbench.tasks import Catalogue

# What `ptxwb bench import-ptxbench` leaves in a folder, where a sweep may still start.
IMPORTED_NAMES = (IMPORTS, SESSIONS, STORE_FILE)


@dataclass(frozen=True)
class Started:
    key: TrajectoryKey


@dataclass(frozen=True)
class Judged:
    key: TrajectoryKey
    turn: int
    status: str


@dataclass(frozen=True)
class Retrying:
    key: TrajectoryKey
    turn: int
    attempt: int
    delay_s: float
    error: str


@dataclass(frozen=True)
class Finished:
    key: TrajectoryKey
    record: TrajectoryRecord


SweepEvent = Started | Judged | Retrying | Finished
OnEvent = Callable[[SweepEvent], None]
PoolFactory = Callable[[Callable[[Requeued], None]], SweepPool]
"""Makes the sweep's evaluation pool, given where to report a requeued evaluation (`ray_backend`)."""


@dataclass
class SweepSummary:
    planned: int
    already_finished: int
    rerun: int = 0
    ran: int = 0
    not_started: int = 0
    """Trajectories left for a later --resume because the sweep's cost limit was reached."""
    spent_usd: float = 0.0
    end_reasons: dict[str, int] = field(default_factory=dict)
    requeued: list[Requeued] = field(default_factory=list)
    """Evaluations run again because the worker holding them was lost (none with this host's workers)."""


def _model(spec: SweepSpec, model: str) -> Model:
    options = spec.model_options
    return make_model(
        model,
        api_base=options.api_base,
        temperature=options.temperature,
        max_tokens=options.max_tokens,
        retries=options.retries,
        backoff_s=options.backoff_s,
    )


def check_runnable(spec: SweepSpec, planned: list[Planned]) -> None:
    """What would fail in every session is said once, before any file is written."""
    for model in spec.models:
        _model(spec, model)  # a missing key, script or recorded session
    catalogue = Catalogue.load()
    for task in {p.key.task for p in planned}:
        catalogue.get(task).workload(spec.workload)
    for variant in spec.variants:
        if variant.pack:
            for target in spec.targets:
                load_pack(target, variant.pack_variant, spec.language)


def _prepare(folder: SweepFolder, spec: SweepSpec, text: str, resume: bool) -> None:
    stored = folder.spec()
    if stored is not None and not resume:
        raise UserError(f"{folder.root} already holds the sweep {stored.name!r}; --resume finishes it")
    if stored is not None and not stored.resumable_as(spec):
        raise UserError(
            f"{folder.root} holds a different sweep ({stored.name!r}): only concurrency, cost_limit and "
            "executor may change on --resume"
        )
    if stored is None and folder.root.is_dir():
        strangers = sorted(p.name for p in folder.root.iterdir() if not p.name.startswith(IMPORTED_NAMES))
        if strangers:
            raise UserError(
                f"{folder.root}: holds no sweep but other files ({strangers[0]}, …); choose a new folder"
            )
    folder.write_spec(spec, text)


def _set_aside(folder: SweepFolder, relpath: str) -> None:
    """Move a cut-short attempt out of the sweep, under a name no other attempt has."""
    source = folder.root / relpath
    aside = folder.root / UNFINISHED
    aside.mkdir(parents=True, exist_ok=True)
    attempt = 1
    while (target := aside / f"{source.stem}.attempt{attempt}.jsonl").exists():
        attempt += 1
    os.replace(source, target)


class SweepRunner:
    def __init__(
        self,
        folder: SweepFolder,
        spec: SweepSpec,
        *,
        cache_dir: Path | None = None,
        on_event: OnEvent | None = None,
        retry_model_errors: bool = False,
        pool: PoolFactory | None = None,
        worker_service: bool | None = None,
    ) -> None:
        self.folder = folder
        self.worker_service = worker_service
        self.spec = spec
        self.cache_dir = cache_dir
        self.on_event = on_event or (lambda event: None)
        self.retry_model_errors = retry_model_errors
        self.pool = pool
        self.spent = 0.0
        self._limit_reached = False

    async def run(self, text: str, resume: bool) -> SweepSummary:
        planned = plan(self.spec)
        check_runnable(self.spec, planned)
        _prepare(self.folder, self.spec, text, resume)
        with self.folder.open_store() as store:
            self.folder.sync(store)
            done = {r.key: r for r in store.records() if r.source == "sweep"}
            pending: list[Planned] = []
            rerun = 0
            for item in planned:
                record = done.get(item.key)
                if record is not None and record.finished and not self._retry(record):
                    continue
                if (self.folder.root / item.relpath).exists():
                    _set_aside(self.folder, item.relpath)
                    rerun += 1
                pending.append(item)
            store.remove(item.key for item in pending)
            kept = [r for r in done.values() if r.key not in {p.key for p in pending}]
            self.spent = sum(row.cost_usd or 0.0 for r in kept for row in r.rows)
            summary = SweepSummary(
                planned=len(planned), already_finished=len(planned) - len(pending), rerun=rerun
            )
            await self._run_all(pending, store, summary)
        summary.spent_usd = self.spent
        return summary

    def _retry(self, record: TrajectoryRecord) -> bool:
        return self.retry_model_errors and record.end_reason == "model_error"

    async def _run_all(self, pending: list[Planned], store: Store, summary: SweepSummary) -> None:
        pool: SweepPool = (
            self.pool(summary.requeued.append)
            if self.pool is not None
            else EvaluationPool(self.spec.executors, self.cache_dir, worker_service=self.worker_service)
        )
        models = asyncio.Semaphore(self.spec.concurrency)
        # Enough sessions in flight to keep both pools busy: every model slot, every evaluation slot.
        sessions = asyncio.Semaphore(self.spec.concurrency + pool.slots)

        async def one(item: Planned) -> None:
            async with sessions:
                if self._over_budget():
                    summary.not_started += 1
                    return
                record = await self._trajectory(
                    item, PooledModel(_model(self.spec, item.key.model), models), pool
                )
                store.put([record], {item.relpath: self._stamp(item)})
                summary.ran += 1
                reason = record.end_reason or "unfinished"
                summary.end_reasons[reason] = summary.end_reasons.get(reason, 0) + 1
                self.on_event(Finished(item.key, record))

        try:
            await asyncio.gather(*(one(item) for item in pending))
        finally:
            await pool.shutdown()

    def _over_budget(self) -> bool:
        limit = self.spec.cost_limit
        return limit is not None and self.spent >= limit

    def _stamp(self, item: Planned) -> tuple[int, int]:
        stat = (self.folder.root / item.relpath).stat()
        return (stat.st_size, stat.st_mtime_ns)

    def _config(self, item: Planned) -> AgentConfig:
        spec, variant = self.spec, item.variant
        remaining = spec.cost_limit - self.spent if spec.cost_limit is not None else None
        return AgentConfig(
            turns=spec.turns,
            target_speedup=spec.target_speedup,
            cost_limit_usd=remaining,
            context=variant.context,
            pack=variant.pack,
            pack_variant=variant.pack_variant,
            workload=spec.workload,
            language=spec.language,
        )

    async def _trajectory(self, item: Planned, model: Model, pool: SweepPool) -> TrajectoryRecord:
        out = self.folder.root / item.relpath
        agent = MiniPTXAgent(
            task=item.key.task,
            target=item.key.target,
            model=model,
            executor=pool,
            out=out,
            config=self._config(item),
        )
        self.on_event(Started(item.key))
        async for loop_item in agent.run():
            self._observe(item.key, loop_item)
        return from_session(item.key, read_session(out), item.relpath)

    def _observe(self, key: TrajectoryKey, item: LoopItem) -> None:
        if isinstance(item, Message) and item.cost_usd:
            self.spent += item.cost_usd
        elif isinstance(item, Evaluation) and item.turn is not None:
            self.on_event(Judged(key, item.turn, str(item.result.status.value)))
        elif isinstance(item, ModelRetry):
            self.on_event(Retrying(key, item.turn, item.attempt, item.delay_s, item.error))


def run_sweep(
    folder: SweepFolder,
    spec: SweepSpec,
    text: str,
    *,
    resume: bool = False,
    cache_dir: Path | None = None,
    on_event: OnEvent | None = None,
    retry_model_errors: bool = False,
    pool: PoolFactory | None = None,
    worker_service: bool | None = None,
) -> SweepSummary:
    runner = SweepRunner(
        folder,
        spec,
        cache_dir=cache_dir,
        on_event=on_event,
        retry_model_errors=retry_model_errors,
        pool=pool,
        worker_service=worker_service,
    )
    return asyncio.run(runner.run(text, resume))
