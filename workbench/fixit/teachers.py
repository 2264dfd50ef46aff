"""Teacher models: a repair teacher proposes fixes for failures never fixed in their trajectory (a fix
is kept only when the evaluator passes it), and a reasoning teacher writes the way from a failure to
its fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from workbench.agent.extract import extract_kernel
from workbench.agent.models.base import ChatMessage, Model, ModelError
from workbench.evaluate.executors import make_executor
from workbench.evaluate.render import feedback_text
from workbench.evaluate.request import EvalRequest, Executor
from workbench.fixit.hygiene import Host, public_model, scrub
from workbench.fixit.pairs import Pair
from workbench.fixit.rows import MessagesRow, ask_for, prompt_messages
from workbench.fixit.text import render
from workbench.fixit.trajectory import STATIC, Trajectory, Turn
from workbench.tasks import get_target

# A fenced block, closed or left open at the end: reasoning is prose, the kernel comes after it.
_FENCED = re.compile(r"^ {0,3}(`{3,}|~{3,})[^\n]*\n.*?(?:^ {0,3}\1[ \t]*$\n?|\Z)", re.DOTALL | re.MULTILINE)


class Executors:
    """One executor per spec (`--executor`, or else each session's own), made when first needed."""

    def __init__(self, spec: str | None, cache_dir: Path | None = None) -> None:
        self.spec = spec
        self.cache_dir = cache_dir
        self._made: dict[str, Executor] = {}

    def spec_for(self, trajectory: Trajectory) -> str:
        return self.spec or str(trajectory.start.settings.get("executor") or STATIC)

    def get(self, trajectory: Trajectory) -> Executor:
        spec = self.spec_for(trajectory)
        if spec not in self._made:
            self._made[spec] = make_executor(spec, self.cache_dir)
        return self._made[spec]

    async def close(self) -> None:
        for executor in self._made.values():
            await executor.close()


class RepairReport(BaseModel):
    model: str
    tries: int
    failures: int = 0
    calls: int = 0
    fixed_gpu: int = 0
    fixed_static: int = 0
    not_fixed: int = 0
    stopped: str | None = None  # why the teacher stopped answering before the end


Say = Callable[[str], None]


def quiet(_: str) -> None:
    """No progress lines (the library's default; the CLI prints them on stderr)."""


@dataclass
class RepairTeacher:
    model: Model
    tries: int
    executors: Executors
    host: Host
    say: Say = quiet
    report: RepairReport = field(init=False)

    def __post_init__(self) -> None:
        self.report = RepairReport(model=public_model(self.model.name), tries=self.tries)

    async def fix(self, trajectory: Trajectory, failed: Turn) -> Pair | None:
        """Up to `tries` answers, each told the verdict on the one before; the first that passes is the fix."""
        if self.report.stopped:
            return None
        self.report.failures += 1
        messages = prompt_messages(trajectory, failed, ask_for("repair", failed), self.host)
        for attempt in range(1, self.tries + 1):
            try:
                reply = await self.model.complete(messages)
            except ModelError as exc:
                self.report.stopped = scrub(str(exc), self.host)
                return None
            self.report.calls += 1
            source = extract_kernel(reply.content)
            where = f"repair teacher: {trajectory.file.name} turn {failed.number}, try {attempt}"
            if source is None:
                self.say(f"{where}: no code")
                follow_up = render("no_code.md")
            else:
                fix = await self._judge(trajectory, failed, source)
                self.say(f"{where}: {fix.result.status}")
                if fix.proof is not None:
                    if fix.proof == "gpu":
                        self.report.fixed_gpu += 1
                    else:
                        self.report.fixed_static += 1
                    return Pair(
                        trajectory,
                        failed,
                        fix,
                        "repair",
                        "teacher",
                        teacher=self.model.name,
                        teacher_try=attempt,
                    )
                follow_up = render("retry.md", feedback=scrub(feedback_text(fix.result), self.host))
            messages = [
                *messages,
                ChatMessage(role="assistant", content=reply.content),
                ChatMessage(role="user", content=follow_up),
            ]
        self.report.not_fixed += 1
        return None

    async def _judge(self, trajectory: Trajectory, failed: Turn, source: str) -> Turn:
        request = EvalRequest(
            task=trajectory.start.task,
            target=get_target(trajectory.start.target).name,
            source=source,
            workload=failed.result.workload_uuid,
        )
        result = await self.executors.get(trajectory).evaluate(request)
        return Turn(None, source, "teacher", result)


class ReasoningReport(BaseModel):
    model: str
    written: int = 0
    empty: int = 0  # answers with no prose (or with a detail of this machine): no reasoning
    stopped: str | None = None


@dataclass
class ReasoningTeacher:
    model: Model
    host: Host
    say: Say = quiet
    report: ReasoningReport = field(init=False)

    def __post_init__(self) -> None:
        self.report = ReasoningReport(model=public_model(self.model.name))

    async def explain(self, row: MessagesRow) -> MessagesRow:
        """The row with the teacher's reasoning before its fixed kernel (unchanged if it wrote none)."""
        if self.report.stopped:
            return row
        question = render("reasoning.md", pair=row.prompt[-1].content, fixed=row.fixed_block)
        messages = [
            ChatMessage(role="system", content=render("reasoning_system.md")),
            ChatMessage(role="user", content=question),
        ]
        try:
            reply = await self.model.complete(messages)
        except ModelError as exc:
            self.report.stopped = scrub(str(exc), self.host)
            return row
        text = scrub(_FENCED.sub("", reply.content), self.host).strip()
        if not text or self.host.leaks(text):
            self.report.empty += 1
            return row
        self.report.written += 1
        self.say(f"reasoning teacher: {self.report.written} written")
        return row.with_reasoning(text, self.model.name)
