"""MiniPTXAgent: the turn loop. UI-agnostic: it yields typed items and asks an `Approver`.

Turn = model call -> code extraction -> approval -> evaluation -> feedback. Every session event is
written (fsync'd) through `SessionWriter` before it is yielded, so a crash loses at most the live items.
"""

from __future__ import annotations

import asyncio
import hashlib
import platform
import time
import uuid
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Literal, NamedTuple, TypeVar

import workbench
from workbench.agent import feedback, prompts
from workbench.agent.approval import Approver, Decision, RunEverything
from workbench.agent.config import AgentConfig, recorded_settings
from workbench.agent.extract import extract_kernel
from workbench.agent.items import EvalProgress, LiveItem, LoopItem, ModelRetry, TextDelta
from workbench.agent.models.base import (
    ChatMessage,
    Model,
    ModelError,
    ModelExhausted,
    PersonStopped,
    Reply,
    RetryNotice,
)
from workbench.evaluate.request import EvalRequest, Executor, Progress
from workbench.evaluate.result import EvalResult
from workbench.secrets import redact
from workbench.session.events import (
    Candidate,
    CandidateOrigin,
    Control,
    EndReason,
    Evaluation,
    Event,
    Message,
    SessionEnd,
    SessionStart,
)
from workbench.session.listings import carry
from workbench.session.log import SessionRead, SessionWriter, kept_through
from workbench.tasks import resolve_task

T = TypeVar("T")
ControlAction = Literal["pause", "resume", "step", "auto"]


@dataclass(frozen=True)
class ForkPoint:
    """Continue `parent` after its turn `turn` from `kept`, the events a fork keeps (`kept_through`)."""

    parent: SessionRead
    turn: int
    kept: list[Event]


class _Ended(Exception):
    """Ends the session with `reason` (one of `SessionEnd.reason`)."""

    def __init__(self, reason: EndReason, note: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.note = note


class _Opened(NamedTuple):
    """A session file made by `open`: its writer, its first line, the events that follow it, the first turn."""

    writer: SessionWriter
    start: SessionStart
    first: list[Event]
    first_turn: int


@dataclass
class _State:
    messages: list[Message] = field(default_factory=list)
    cost_usd: float = 0.0
    turn: int = 0


def target_met(result: EvalResult, target_speedup: float) -> bool:
    """Every stage that ran passed and a measured speedup reaches the target (a static run never does)."""
    speedup = result.stages.timing.speedup
    return result.all_ran_passed and speedup is not None and speedup >= target_speedup


def _versions(model: Model) -> dict[str, str]:
    versions = {"workbench": workbench.__version__, "python": platform.python_version()}
    if model.author == "model":
        versions["litellm"] = metadata.version("litellm")
    return versions


class MiniPTXAgent:
    """One session: `async for item in agent.run(): …` drives it to its end.

    `task` is a catalogue name or a Definition JSON path (recorded as given). To continue a recorded
    session from one of its turns, build the agent with `continue_from`.
    """

    def __init__(
        self,
        *,
        task: str,
        target: str,
        model: Model,
        executor: Executor,
        out: Path,
        config: AgentConfig | None = None,
        approver: Approver | None = None,
        fork: ForkPoint | None = None,
        session_id: str | None = None,
    ) -> None:
        self.task_ref = task
        self.task = resolve_task(task)
        self.target = self.task.target(target)  # the prompts name the family this task requires there
        self.model = model
        self.executor = executor
        self.out = out
        self.config = config or AgentConfig()
        self.approver: Approver = approver or RunEverything()
        self.fork = fork
        self.session_id = session_id or uuid.uuid4().hex
        self._pending_user: list[str] = []
        self._pending_controls: list[Control] = []
        self._stop_requested = False
        self._state = _State()
        self._opened: _Opened | None = None

    @classmethod
    def continue_from(
        cls,
        parent: SessionRead,
        turn: int,
        *,
        model: Model,
        executor: Executor,
        out: Path,
        config: AgentConfig | None = None,
        approver: Approver | None = None,
    ) -> MiniPTXAgent:
        """A fork of `parent` at `turn`, continued with `model`; the parent's settings unless `config` is given."""
        start = parent.start
        kept = kept_through(parent, turn)  # a UserError for a turn the parent lacks
        if config is None:
            config = AgentConfig.model_validate(recorded_settings(start.settings))
        return cls(
            task=start.task,
            target=start.target,
            model=model,
            executor=executor,
            out=out,
            config=config,
            approver=approver,
            fork=ForkPoint(parent, turn, kept),
        )

    # --- what a UI may call while the loop runs -------------------------------------------------

    def add_user_message(self, text: str) -> None:
        """A person's message for the model; it is recorded and sent with the next model call."""
        if text.strip():
            self._pending_user.append(text)

    def record_control(self, action: ControlAction, note: str = "") -> None:
        """Record a person's control action (pause, resume, step, auto) at the loop's next step."""
        self._pending_controls.append(
            Control(turn=self._state.turn or None, action=action, by="human", note=note)
        )

    def request_stop(self) -> None:
        """Stop at the next step (before the next model call or evaluation)."""
        self._stop_requested = True

    @property
    def cost_usd(self) -> float:
        return self._state.cost_usd

    # --- the loop --------------------------------------------------------------------------------

    def open(self) -> None:
        """Build the prompts and create the session file with its first line; `run` does it if not yet.

        A UI calls it before it shows anything: a workload or pack the prompts cannot use, or a file
        that cannot be written, is a `UserError` then, not a failure on the screen.
        """
        if self._opened is not None:
            return
        first_turn = 1
        history: list[Event] = []
        if self.fork is not None:
            history = list(self.fork.kept)
            first_turn = self.fork.turn + 1
            pack_id, pack_hash = self.fork.parent.start.pack_id, self.fork.parent.start.pack_hash
            head: list[Message] = []
        else:
            built = prompts.build(self.task, self.target, self.config)
            pack_id, pack_hash = built.pack_id, built.pack_hash
            head = [
                Message(role="system", content=built.system, source="workbench"),
                Message(role="user", content=built.task, source="workbench"),
            ]
        start = SessionStart(
            session_id=self.session_id,
            task=self.task_ref,
            target=self.target.name,
            model=self.model.name,
            author=self.model.author,
            settings=self._settings(),
            pack_id=pack_id,
            pack_hash=pack_hash,
            versions=_versions(self.model),
            parent_session=self.fork.parent.start.session_id if self.fork else None,
            fork_turn=self.fork.turn if self.fork else None,
        )
        writer = SessionWriter(self.out, start)
        # What is yielded is what the file holds: the events as written (no host path in them).
        self._opened = _Opened(writer, writer.start, [*history, *head], first_turn)

    async def run(self) -> AsyncIterator[LoopItem]:
        self.open()
        assert self._opened is not None
        writer, start, first, first_turn = self._opened
        started = time.monotonic()
        ended = False
        try:
            yield start
            for event in first:
                yield self._write(writer, event)
            end: SessionEnd | None = None
            for turn in range(first_turn, self.config.turns + 1):
                self._state.turn = turn
                try:
                    async for item in self._turn(writer, turn):
                        yield item
                    self._check_limits(started, turn)
                except _Ended as stop:
                    end = SessionEnd(turn=turn, reason=stop.reason, note=stop.note)
                    break
            if end is None:
                end = SessionEnd(turn=self._state.turn or None, reason="turn_limit")
            for control in self._flush_controls(writer):
                yield control
            written = self._write(writer, end)
            ended = True
            yield written
        except (asyncio.CancelledError, GeneratorExit, KeyboardInterrupt):
            if not ended:
                # Closed from outside (a UI cancelled the run, Ctrl-C): the person stopped it.
                note = "interrupted"
                writer.append(
                    SessionEnd(turn=self._state.turn or None, reason="stopped_by_person", note=note)
                )
            raise
        finally:
            writer.close()

    def _settings(self) -> dict[str, object]:
        settings: dict[str, object] = self.config.model_dump()
        settings["executor"] = self.executor.name
        settings["model_settings"] = {
            k: redact(str(v)) if isinstance(v, str) else v for k, v in self.model.settings().items()
        }
        return settings

    def _write(self, writer: SessionWriter, event: Event) -> Event:
        """Append `event` to the session; returns it as written, which the model is sent too."""
        event = writer.append(event)
        if isinstance(event, Message):
            self._state.messages.append(event)
            self._state.cost_usd += event.cost_usd or 0.0
        return event

    def _flush_controls(self, writer: SessionWriter) -> list[Event]:
        controls, self._pending_controls = self._pending_controls, []
        return [self._write(writer, c) for c in controls]

    def _check_stop(self, turn: int) -> None:
        if self._stop_requested:
            raise _Ended("stopped_by_person", f"stop requested during turn {turn}")

    def _check_limits(self, started: float, turn: int) -> None:
        if turn >= self.config.turns:
            return  # the turn limit ends it anyway
        if self.config.cost_limit_usd is not None and self._state.cost_usd >= self.config.cost_limit_usd:
            raise _Ended(
                "cost_limit", f"${self._state.cost_usd:.4f} spent, limit ${self.config.cost_limit_usd:.4f}"
            )
        elapsed = time.monotonic() - started
        if self.config.wall_limit_s is not None and elapsed >= self.config.wall_limit_s:
            raise _Ended("wall_limit", f"{elapsed:.0f} s elapsed, limit {self.config.wall_limit_s:.0f} s")

    async def _turn(self, writer: SessionWriter, turn: int) -> AsyncIterator[LoopItem]:
        for control in self._flush_controls(writer):
            yield control
        self._check_stop(turn)
        if not await self.approver.before_turn(turn):
            yield self._write(
                writer, Control(turn=turn, action="stop", by="human", note="stopped before the turn")
            )
            raise _Ended("stopped_by_person", f"stopped before turn {turn}")
        for control in self._flush_controls(writer):
            yield control
        self._check_stop(turn)  # a stop asked for while the approver held the turn: no model call
        pending, self._pending_user = self._pending_user, []
        for text in pending:
            yield self._write(writer, Message(turn=turn, role="user", content=text, source="human"))

        reply_box: list[Reply] = []
        async for item in self._ask_model(turn, reply_box):
            yield item
        reply = reply_box[0]
        yield self._write(
            writer,
            Message(
                turn=turn,
                role="assistant",
                content=reply.content,
                source=self.model.author,
                usage=reply.usage,
                cost_usd=reply.cost_usd,
                latency_s=reply.latency_s,
            ),
        )
        for control in self._flush_controls(writer):
            yield control
        self._check_stop(turn)

        source = extract_kernel(reply.content, self.config.language)
        if source is None:
            yield self._write(
                writer,
                Message(
                    turn=turn, role="user", content=feedback.no_code(turn, self.config), source="workbench"
                ),
            )
            return
        decision = await self.approver.review(turn, source)
        for control in self._flush_controls(writer):
            yield control
        if decision.by == "human" or decision.action != "run":
            yield self._write(
                writer, Control(turn=turn, action=decision.action, by=decision.by, note=decision.note)
            )
        if decision.action == "stop":
            raise _Ended("stopped_by_person", decision.note or f"stopped at the review of turn {turn}")
        if decision.action == "skip":
            yield self._write(
                writer,
                Message(
                    turn=turn, role="user", content=feedback.skipped(turn, self.config), source="workbench"
                ),
            )
            return
        candidate = self._candidate(turn, source, decision)
        yield self._write(writer, candidate)

        result_box: list[EvalResult] = []
        async for item in self._evaluate(turn, candidate.source, result_box):
            yield item
        result = result_box[0]
        # The PTX and SASS travel with the session, so a replay anywhere shows them.
        listings = await asyncio.to_thread(carry, result)
        yield self._write(writer, Evaluation(turn=turn, result=result, listings=listings))
        text = feedback.for_result(result, turn, self.config, candidate)
        yield self._write(writer, Message(turn=turn, role="user", content=text, source="workbench"))
        if target_met(result, self.config.target_speedup):
            speedup = result.stages.timing.speedup
            raise _Ended("target_met", f"speedup {speedup:.3f}x >= target {self.config.target_speedup:g}x")

    @staticmethod
    def _candidate(turn: int, source: str, decision: Decision) -> Candidate:
        origin: CandidateOrigin
        if decision.action == "run":
            final, origin, original = source, "model", None
        else:
            assert decision.source is not None  # the Decision validator guarantees it
            final, original = decision.source, source
            origin = "edited" if decision.action == "edit" else "override"
        digest = hashlib.sha256(final.encode("utf-8")).hexdigest()
        return Candidate(turn=turn, source=final, origin=origin, original=original, sha256=digest)

    def context(self, turn: int) -> list[ChatMessage]:
        """The messages sent to the model for `turn` under the configured context policy."""
        head = [m for m in self._state.messages if m.turn is None]
        body = [m for m in self._state.messages if m.turn is not None]
        if self.config.context == "latest-pair":
            earlier = [m.turn for m in body if m.turn is not None and m.turn < turn and m.role == "assistant"]
            latest = max(earlier, default=None)
            body = [m for m in body if m.turn in (latest, turn)]
        return [ChatMessage(role=m.role, content=m.content) for m in [*head, *body]]

    async def _ask_model(self, turn: int, box: list[Reply]) -> AsyncIterator[LiveItem]:
        queue: asyncio.Queue[LiveItem] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def on_delta(text: str) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, TextDelta(turn=turn, text=text))

        def on_retry(notice: RetryNotice) -> None:
            item = ModelRetry(
                turn=turn, attempt=notice.attempt, delay_s=notice.delay_s, error=redact(notice.error)
            )
            loop.call_soon_threadsafe(queue.put_nowait, item)

        work = self.model.complete(self.context(turn), on_delta=on_delta, on_retry=on_retry)
        try:
            async for item in _drain(work, queue, box):
                yield item
        except PersonStopped as exc:
            raise _Ended("stopped_by_person", str(exc) or f"the person stopped at turn {turn}") from None
        except ModelExhausted as exc:
            raise _Ended("model_exhausted", redact(str(exc))) from None
        except ModelError as exc:
            raise _Ended("model_error", redact(str(exc))) from None

    async def _evaluate(self, turn: int, source: str, box: list[EvalResult]) -> AsyncIterator[LiveItem]:
        queue: asyncio.Queue[LiveItem] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def on_progress(progress: Progress) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, EvalProgress(turn=turn, progress=progress))

        request = EvalRequest(
            task=self.task_ref,
            target=self.target.name,
            source=source,
            workload=self.config.workload,
            language=self.config.language,
            source_counters=self.config.source_counters,
        )
        async for item in _drain(self.executor.evaluate(request, on_progress), queue, box):
            yield item


async def _drain(work: Awaitable[T], queue: asyncio.Queue[LiveItem], box: list[T]) -> AsyncIterator[LiveItem]:
    """Run `work`, yielding what its callbacks queue meanwhile; its result goes into `box`."""
    task = asyncio.ensure_future(work)
    try:
        while not task.done():
            getter = asyncio.ensure_future(queue.get())
            await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
            else:
                getter.cancel()
        # Callbacks scheduled with call_soon_threadsafe just before the end run on the next loop step.
        await asyncio.sleep(0)
        while not queue.empty():
            yield queue.get_nowait()
        box.append(task.result())
    finally:
        if not task.done():
            task.cancel()
