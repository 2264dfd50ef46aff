"""Author mode: the person edits a kernel file in their own editor; every save is evaluated.

Each save that changes the source becomes a turn: a `Candidate` (origin `override`: the person's
own source) and its `Evaluation`, written to a session file like any other run, so an authoring
session can be replayed too.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from pathlib import Path

from watchfiles import Change, awatch

from workbench.agent.items import EvalProgress
from workbench.errors import UserError
from workbench.evaluate.request import EvalRequest, Executor, Progress, RunSettings
from workbench.session.events import Candidate, Evaluation, Event, SessionEnd, SessionStart
from workbench.session.listings import carry
from workbench.session.log import SessionWriter
from workbench.tasks import get_target
from workbench.tui.drivers.base import Driver, Sink


class AuthorDriver(Driver):
    mode = "author"

    def __init__(
        self,
        *,
        task: str,
        target: str,
        kernel: Path,
        executor: Executor,
        out: Path | None,
        settings: RunSettings | None = None,
        debounce_ms: int = 300,
    ) -> None:
        """`settings`: how every save is judged (checked by the command that made them)."""
        self.task = task
        self.target = target
        self.kernel = kernel.resolve()
        self.executor = executor
        self.session_path = out
        self.settings = settings or RunSettings()
        self.debounce_ms = debounce_ms
        self.turn = 0
        self.evaluating = False
        self.problem: str | None = None
        self._last_sha: str | None = None
        self._lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._writer: SessionWriter | None = None
        self._judged = 0  # evaluations written: a session refused before any is not kept
        self._refused = False
        self._sink: Sink | None = None
        self._start = SessionStart(
            session_id=uuid.uuid4().hex,
            task=task,
            target=target,
            model="human",
            author="human",
            settings={
                "executor": executor.name,
                "kernel": self.kernel.name,  # the file's name only: no host path enters a session
                "workload": self.settings.workload,
                "language": self.settings.language,
                "source_counters": self.settings.source_counters,
            },
        )

    @property
    def state(self) -> str:  # type: ignore[override]
        if self.evaluating:
            return "evaluating"
        return "error" if self.problem else "watching"

    @property
    def hint(self) -> str:
        if self.problem:
            return self.problem
        return f"watching {self.kernel.name}: save it to re-evaluate · x evaluates now"

    @property
    def own_file(self) -> tuple[str, str] | None:
        return self.kernel.name, self.settings.language

    def can(self, action: str) -> bool:
        return action == "evaluate_now" and not self.evaluating

    def open(self) -> None:
        if self.session_path is not None and self._writer is None:
            self._writer = SessionWriter(self.session_path, self._start)

    async def run(self, sink: Sink) -> None:
        self._sink = sink
        try:
            self.open()
        except UserError as exc:
            self.fail(sink, exc)
            return
        await sink.ingest(self._start)
        await self.evaluate_now(force=True)
        async for changes in awatch(
            self.kernel.parent,
            watch_filter=self._is_our_file,
            stop_event=self._stop,
            debounce=self.debounce_ms,
            recursive=False,
        ):
            if changes:
                await self.evaluate_now()

    def _is_our_file(self, change: Change, path: str) -> bool:
        # Editors often save by writing a new file and renaming it over the old one: watch the name.
        return change != Change.deleted and Path(path).name == self.kernel.name

    async def evaluate_now(self, force: bool = False) -> None:
        """Evaluate the file as it is now; an unchanged file is evaluated again only when forced."""
        async with self._lock:
            sink = self._sink
            if sink is None:  # the screen has gone
                return
            try:
                await self._evaluate(sink, force)
            except UserError as exc:
                self.fail(sink, exc)

    def _read(self) -> str | None:
        """The file's source; None (and `problem` says why) when it cannot be a candidate yet: a save
        that is not UTF-8 or is empty waits for the next save, as `ptxwb eval` refuses it."""
        name = self.kernel.name
        try:
            source = self.kernel.read_bytes().decode("utf-8")
        except OSError as exc:
            self.problem = f"cannot read {name}: {exc.strerror}"
        except UnicodeDecodeError as exc:
            self.problem = f"{name}: not UTF-8 text (byte {exc.start}); save it as UTF-8 to evaluate it"
        else:
            if source.strip():
                self.problem = None
                return source
            self.problem = f"{name} is empty: write a kernel and save it"
        return None

    async def _evaluate(self, sink: Sink, force: bool) -> None:
        source = self._read()
        if source is None:
            sink.state_changed()  # the problem said
            return
        sha = hashlib.sha256(source.encode("utf-8")).hexdigest()
        if sha == self._last_sha and not force:
            sink.state_changed()  # the file is back to what was judged: the problem is gone
            return
        self._last_sha = sha
        self.turn += 1
        turn = self.turn
        await self._emit(Candidate(turn=turn, source=source, origin="override", sha256=sha))
        self.evaluating = True
        sink.state_changed()
        loop = asyncio.get_running_loop()

        def progress(step: Progress) -> None:
            item = EvalProgress(turn=turn, progress=step)
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(sink.ingest(item)))

        request = EvalRequest.of(self.settings, self.task, get_target(self.target).name, source)
        try:
            result = await self.executor.evaluate(request, progress)
        except UserError:
            self._refused = True  # the executor's refusal (no GPU there), not the session's
            raise
        finally:
            self.evaluating = False
        await self._emit(
            Evaluation(turn=turn, result=result, listings=await asyncio.to_thread(carry, result))
        )
        self._judged += 1
        sink.state_changed()

    async def _emit(self, event: Event) -> None:
        if self._writer is not None:
            event = self._writer.append(event)  # shown as the file holds it
        if self._sink is not None:
            await self._sink.ingest(event)

    async def close(self) -> None:
        self._stop.set()
        self._sink = None
        if self._writer is not None and self._refused and not self._judged:
            # Refused before any verdict (a GPU executor on a host without one): nothing worth a
            # session in runs/, which the home screen would list.
            self._writer.close()
            self._writer = None
            if self.session_path is not None:
                self.session_path.unlink(missing_ok=True)
        if self._writer is not None:
            end = SessionEnd(turn=self.turn or None, reason="stopped_by_person", note="author mode closed")
            try:
                self._writer.append(end)
            except UserError as exc:
                self.failure = self.failure or str(exc)  # the app is closing: its command says it
            finally:
                self._writer.close()
                self._writer = None
