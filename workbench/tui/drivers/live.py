"""The live agent loop in the screen: the app observes the loop's items and is its `Approver`.

Step, auto and pause decide whether the loop waits before a turn and before an evaluation; while it
waits, the person runs the candidate, edits it, replaces it, skips it, or stops. The loop records
every decision and control as session events; nothing of the loop's state lives in widgets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, TypeVar

from workbench.agent.approval import Decision
from workbench.agent.items import EvalProgress, TextDelta
from workbench.agent.loop import MiniPTXAgent
from workbench.agent.models.base import ChatMessage
from workbench.errors import UserError
from workbench.session.events import Evaluation, Message, SessionEnd
from workbench.tui import keymap
from workbench.tui.drivers.base import Driver, Sink

Pace = Literal["auto", "step"]
Waiting = Literal["turn", "review", "answer"]

# The keymap's driver actions of live mode: the ones this driver answers.
ACTIONS = frozenset(a.action for a in keymap.for_mode("live") if a.driver)
# Of those, the ones possible only while the loop waits for a review of the candidate (the table
# does not say when an action is possible, only that the driver decides).
REVIEW_ACTIONS = frozenset({"approve", "edit", "edit_external", "override", "skip"})
# The rest are possible while the session runs; once it ended, only forking it is.
RUNNING_ACTIONS = ACTIONS - REVIEW_ACTIONS
ENDED_ACTIONS = frozenset({"fork"})

T = TypeVar("T")


class TuiApprover:
    """Asked by the loop before each turn and before each evaluation; answered by the person's keys."""

    def __init__(self, pace: Pace, changed: Callable[[], None]) -> None:
        self.pace: Pace = pace
        self.waiting: Waiting | None = None
        self.turn: int | None = None
        self.source: str | None = None
        self._changed = changed
        self._gate: asyncio.Future[bool] | None = None
        self._decision: asyncio.Future[Decision] | None = None

    async def before_turn(self, turn: int) -> bool:
        self.turn = turn
        if self.pace == "auto":
            return True
        self._gate = asyncio.get_running_loop().create_future()
        return await self._wait("turn", self._gate)

    async def review(self, turn: int, source: str) -> Decision:
        self.turn = turn
        if self.pace == "auto":
            return Decision.run(by="workbench")
        self.source = source
        self._decision = asyncio.get_running_loop().create_future()
        try:
            return await self._wait("review", self._decision)
        finally:
            self.source = None

    async def _wait(self, what: Waiting, future: asyncio.Future[T]) -> T:
        self.waiting = what
        self._changed()
        try:
            return await future
        finally:
            self.waiting = None
            self._changed()

    # --- the person's side -------------------------------------------------------------------------

    def release(self) -> None:
        """Let the loop go on from where it waits: start the turn, or run the candidate as written."""
        if self.waiting == "turn" and self._gate is not None and not self._gate.done():
            self._gate.set_result(True)
        elif self.waiting == "review":
            self.decide(Decision.run())

    def decide(self, decision: Decision) -> None:
        if self._decision is not None and not self._decision.done():
            self._decision.set_result(decision)

    def stop(self) -> None:
        if self.waiting == "turn" and self._gate is not None and not self._gate.done():
            self._gate.set_result(False)
        elif self.waiting == "review":
            self.decide(Decision.stop("stopped by the person"))


class TuiHuman:
    """The `human` model's writer in the TUI: the screen opens the editor and answers the future."""

    def __init__(self) -> None:
        self.messages: Sequence[ChatMessage] = ()
        self._answer: asyncio.Future[str | None] | None = None
        self._changed: Callable[[], None] = lambda: None

    def attach(self, changed: Callable[[], None]) -> None:
        self._changed = changed

    @property
    def waiting(self) -> bool:
        return self._answer is not None and not self._answer.done()

    async def __call__(self, messages: Sequence[ChatMessage]) -> str | None:
        self.messages = messages
        self._answer = asyncio.get_running_loop().create_future()
        self._changed()
        try:
            return await self._answer
        finally:
            self._changed()

    def answer(self, text: str | None) -> None:
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(text)


class LiveDriver(Driver):
    mode = "live"

    def __init__(
        self,
        agent: MiniPTXAgent,
        *,
        pace: Pace = "auto",
        human: TuiHuman | None = None,
    ) -> None:
        self.agent = agent
        self.human = human
        self.approver = TuiApprover(pace, self._changed)
        agent.approver = self.approver
        self.session_path: Path | None = agent.out
        self.end: SessionEnd | None = None
        self.streaming = False
        self.evaluating = False
        self._sink: Sink | None = None
        if human is not None:
            human.attach(self._changed)

    @property
    def state(self) -> str:  # type: ignore[override]
        if self.end is not None:
            return "ended"
        if self.human is not None and self.human.waiting:
            return "your turn"
        if self.approver.waiting == "review":
            return "awaiting approval"
        if self.approver.waiting == "turn":
            return "paused"
        if self.evaluating:
            return "evaluating"
        if self.streaming:
            return "streaming"
        return "auto" if self.approver.pace == "auto" else "step"

    @property
    def hint(self) -> str:
        state = self.state
        return {
            "your turn": "your turn: e opens the editor (ctrl+s there submits) · o evaluates your own file",
            "awaiting approval": "r runs it · e edits it · o evaluates your file · k skips · X stops",
            "paused": "s runs one turn · a runs on · m adds a message first",
            "auto": "space pauses before the next turn · m adds a message",
            "step": "the turn runs, then waits · a runs on",
            "ended": "[ ] browse turns · f forks at the shown turn",
        }.get(state, "")

    @property
    def next_turn(self) -> int | None:
        return self.approver.turn

    def can(self, action: str) -> bool:
        if self.end is not None:
            return action in ENDED_ACTIONS
        if action in ("edit", "override") and self.human is not None and self.human.waiting:
            return True  # the person's turn: write it in the editor, or evaluate a file of their own
        if action in REVIEW_ACTIONS:
            return self.approver.waiting == "review"
        return action in RUNNING_ACTIONS

    def pending_source(self, turn: int) -> str | None:
        return self.approver.source if self.approver.turn == turn else None

    def open(self) -> None:
        self.agent.open()

    async def run(self, sink: Sink) -> None:
        self._sink = sink
        try:
            async for item in self.agent.run():
                self.streaming = isinstance(item, TextDelta)
                if isinstance(item, EvalProgress):
                    self.evaluating = True
                elif isinstance(item, (Evaluation, Message)):
                    self.evaluating = False
                if isinstance(item, SessionEnd):
                    self.end = item
                await sink.ingest(item)
        except UserError as exc:
            self.fail(sink, exc)
        finally:
            # The executor may hold a worker process: release it while the app's loop still runs.
            await self.agent.executor.close()
        self.streaming = self.evaluating = False
        self._changed()

    async def close(self) -> None:
        # Leaving the screen while the loop waits: let it stop cleanly (the worker is cancelled too).
        self._sink = None
        self.approver.stop()
        if self.human is not None:
            self.human.answer(None)

    def _changed(self) -> None:
        if self._sink is not None:
            self._sink.state_changed()

    # --- controls --------------------------------------------------------------------------------

    def toggle_pause(self) -> None:
        if self.approver.pace == "auto":
            self.approver.pace = "step"
            self.agent.record_control("pause")
        else:
            self.approver.pace = "auto"
            self.agent.record_control("resume")
            self.approver.release()
        self._changed()

    def step(self) -> None:
        self.approver.pace = "step"
        self.agent.record_control("step")
        self.approver.release()
        self._changed()

    def auto(self) -> None:
        self.approver.pace = "auto"
        self.agent.record_control("auto")
        self.approver.release()
        self._changed()

    def stop(self) -> None:
        self.agent.request_stop()
        self.approver.stop()
        if self.human is not None:
            self.human.answer(None)
        self._changed()

    def approve(self) -> None:
        self.approver.decide(Decision.run())

    def skip(self) -> None:
        self.approver.decide(Decision.skip("skipped by the person"))

    def submit_edit(self, source: str) -> None:
        original = self.approver.source
        if original is not None and source.strip() == original.strip():
            self.approver.decide(Decision.run())
        else:
            self.approver.decide(Decision.edit(source))

    def submit_override(self, source: str, origin: str) -> None:
        self.approver.decide(Decision.replace(source, note=f"from {origin}"))

    def message(self, text: str) -> None:
        self.agent.add_user_message(text)
