"""The session screen: header, conversation, code, verdict and timing panes over one driver.

The screen folds what the driver produces into a `SessionView` and renders the selected turn (or
the latest, while following). It never waits on long work itself: the driver runs in a named
worker, and anything slow an action starts runs in a worker too.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import ComposeResult, SuspendNotSupported
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer

from workbench.agent.items import EvalProgress, ModelRetry, TextDelta
from workbench.agent.loop import MiniPTXAgent
from workbench.agent.models import resumed
from workbench.errors import UserError
from workbench.evaluate.result import EvalResult
from workbench.paths import runs_dir
from workbench.session.events import Candidate, Evaluation, Event, Message, SessionEnd, SessionStart
from workbench.session.log import fork_session, kept_through, read_session
from workbench.tui import keymap
from workbench.tui.artifacts import ArtifactCache, first_error_line
from workbench.tui.drivers.base import Driver, Item
from workbench.tui.drivers.live import LiveDriver
from workbench.tui.drivers.replay import ReplayDriver
from workbench.tui.model import SessionView, TurnView
from workbench.tui.naming import named_for
from workbench.tui.replay import ReplayDelta
from workbench.tui.screens.dialogs import ConfirmScreen, EditorScreen, PromptScreen
from workbench.tui.screens.help import HelpScreen
from workbench.tui.starter import starter_kernel
from workbench.tui.widgets.code_pane import CodePane
from workbench.tui.widgets.conversation import ConversationPane
from workbench.tui.widgets.header import HeaderFacts, SessionHeader
from workbench.tui.widgets.timing import TimingPane
from workbench.tui.widgets.verdict import VerdictPane

PANES = {"conversation": "Conversation", "code": "Code", "verdict": "Verdict", "timing": "Timing"}


def cuda_answer(source: str) -> str:
    """A person's kernel as the `human` model's answer: one cuda block, as the loop extracts it."""
    return f"```cuda\n{source.rstrip()}\n```\n"


class SessionScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = keymap.bindings()
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]  # noqa: RUF012 - Textual reads it per instance

    def __init__(self, driver: Driver) -> None:
        super().__init__()
        self.driver = driver
        self.view = SessionView()
        self.selected: int | None = None  # None: follow the latest turn
        self.artifacts = ArtifactCache(self._run_listing_job)
        self._shown_key: tuple[object, ...] | None = None
        self._answer_open = False
        self._named: tuple[EvalResult, EvalResult] | None = None  # the last verdict shown, renamed

    # --- layout ----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield SessionHeader(id="header")
        with Horizontal(id="body"):
            yield ConversationPane(id="conversation")
            with Vertical(id="work"):
                yield CodePane(id="code")
                with Horizontal(id="bottom"):
                    yield VerdictPane(id="verdict")
                    yield TimingPane(id="timing")
        yield Footer()

    def on_mount(self) -> None:
        for pane_id, title in PANES.items():
            self.query_one(f"#{pane_id}").border_title = title
        self._refresh_header()
        # Once the screen has been drawn: the app may still be composing around a screen just mounted,
        # and a driver failing at once (a session file that cannot be written) ends the app.
        self.call_after_refresh(self._drive)

    @work(name="driver", group="driver", exclusive=True)
    async def _drive(self) -> None:
        await self.driver.run(self)

    async def on_unmount(self) -> None:
        await self.driver.close()

    # --- the sink the driver feeds ---------------------------------------------------------------

    @property
    def target(self) -> str:
        return self.view.start.target if self.view.start else ""

    @property
    def shown_turn(self) -> int | None:
        return self.selected if self.selected is not None else self.view.latest_turn

    async def ingest(self, item: Item) -> None:
        try:
            await self._ingest(item)
        except NoMatches:  # the screen is being dismissed (back, quit) while its driver still feeds it
            if self._shown:
                raise

    async def _ingest(self, item: Item) -> None:
        conversation = self.query_one(ConversationPane)
        if isinstance(item, (TextDelta, ReplayDelta)):
            await conversation.stream(item.turn, item.text)
            return
        if isinstance(item, EvalProgress):
            self.view.add_progress(item.turn, item.progress)
            if item.turn == self.shown_turn:
                turn = self.view.turn(item.turn)
                self.query_one(VerdictPane).show(self._as_shown(turn.evaluation), turn.progress)
            return
        if isinstance(item, ModelRetry):
            await conversation.discard_stream(item.turn)
            self.notify(
                f"model call failed, retrying in {item.delay_s:.0f} s: {item.error}", severity="warning"
            )
            return
        event: Event = item
        touched = self.view.apply(event)
        if isinstance(event, Message):
            await conversation.add_message(event)
        if (
            isinstance(event, SessionStart)
            or touched is not None
            and touched == self.shown_turn
            and isinstance(event, (Candidate, Evaluation, Message))
        ):
            self._show_turn()
        if isinstance(event, Evaluation):
            self.query_one(TimingPane).show(self.view, self.shown_turn)
            if touched is not None:
                self.artifacts.prefetch(self.view.turn(touched), self.target)
        if isinstance(event, SessionEnd):
            self.refresh_bindings()
        self._refresh_header()

    async def rebuild(self, events: list[Event]) -> None:
        """Fold `events` afresh (a replay seeking) and redraw every pane."""
        self.view = SessionView.from_events(events)
        if self.selected is not None and self.selected not in self.view.turns:
            self.selected = None
        await self.query_one(ConversationPane).load([e for e in events if isinstance(e, Message)])
        self._shown_key = None
        self._show_turn()
        self.query_one(TimingPane).show(self.view, self.shown_turn)
        self._refresh_header()

    @property
    def _shown(self) -> bool:
        """Still the screen a person sees: current, and the app neither exiting nor shutting down (both
        take the widgets down while the screen stays current), so a missing widget there is a bug, not a
        late arrival."""
        return self.is_current and self.is_attached and self.app.is_running

    def _run_listing_job(self, job: Callable[[], Awaitable[None]]) -> None:
        self.run_worker(self._listing_job(job), name="listing", group="listing")

    async def _listing_job(self, job: Callable[[], Awaitable[None]]) -> None:
        await job()
        # A tab said "loading", "disassembling" or "rebuilding": show what is ready for the turn shown.
        number = self.shown_turn
        if number is None:
            return
        try:
            code = self.query_one(CodePane)
        except NoMatches:  # the listing was ready only after the screen went (back, quit): nothing to show
            if self._shown:
                raise
            return
        for tab, maker in self.artifacts.listings(self.view.turn(number), self.target).items():
            code.update_placeholder(tab, maker)

    def state_changed(self) -> None:
        try:
            self._state_changed()
        except NoMatches:  # as in `ingest`: a driver's last word reaching a screen being dismissed
            if self._shown:
                raise

    def _state_changed(self) -> None:
        self._refresh_header()
        self.refresh_bindings()
        self._show_turn()  # e.g. a candidate now waiting for review
        # The `human` model's turn: open the editor for the person's kernel (once).
        driver = self.driver
        if (
            isinstance(driver, LiveDriver)
            and driver.human is not None
            and driver.human.waiting
            and not self._answer_open
        ):
            self._write_answer()

    # --- rendering -------------------------------------------------------------------------------

    def _refresh_header(self) -> None:
        driver = self.driver
        facts = HeaderFacts(
            state=driver.state,
            mode=driver.mode,
            selected_turn=self.selected,
            speed=driver.speed,
            hint=driver.hint,
            next_turn=driver.next_turn,
        )
        self.query_one(SessionHeader).show(self.view, facts)

    def _show_turn(self) -> None:
        number = self.shown_turn
        code = self.query_one(CodePane)
        verdict = self.query_one(VerdictPane)
        if number is None:
            verdict.show(None)
            return
        turn = self.view.turn(number)
        pending = self.driver.pending_source(number) if turn.candidate is None else None
        key = (
            number,
            turn.candidate.sha256 if turn.candidate else pending,
            id(turn.evaluation),
            self.target,
        )
        if key != self._shown_key:
            same_turn = self._shown_key is not None and self._shown_key[0] == number
            previous = self.view.previous_source(number)
            documents = self.artifacts.documents(turn, previous, self.target, pending)
            error = first_error_line(turn.evaluation)
            code.show(documents, keep_position=same_turn, error_line=error - 1 if error else None)
            self._shown_key = key
        verdict.show(self._as_shown(turn.evaluation), turn.progress)

    def _as_shown(self, result: EvalResult | None) -> EvalResult | None:
        """The verdict naming the person's own file where the build named its copy (author mode)."""
        own = self.driver.own_file
        if result is None or own is None:
            return result
        if self._named is None or self._named[0] is not result:
            self._named = (result, named_for(result, *own))
        return self._named[1]

    def _select(self, number: int | None) -> None:
        self.selected = number
        self._show_turn()
        self.query_one(TimingPane).show(self.view, self.shown_turn)
        if number is not None:
            self.query_one(ConversationPane).scroll_to_turn(number)
        self._refresh_header()

    # --- which actions are possible ---------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        in_mode = keymap.is_mode_action(action, self.driver.mode)
        if in_mode is False:
            return False
        if action in keymap.DRIVER_ACTIONS:
            if self.driver.can(action):
                return True
            # Dimmed while it may become possible; gone from the footer once the session is over.
            return False if self.driver.state == "ended" else None
        return True

    async def _driver_call(self, name: str) -> None:
        method = getattr(self.driver, name)
        result = method()
        if hasattr(result, "__await__"):
            await result
        self.state_changed()

    # --- control actions (delegated to the driver) ------------------------------------------------

    async def action_toggle_pause(self) -> None:
        await self._driver_call("toggle_pause")

    async def action_faster(self) -> None:
        await self._driver_call("faster")

    async def action_slower(self) -> None:
        await self._driver_call("slower")

    def action_seek_back(self) -> None:
        self._seek(-1)

    def action_seek_forward(self) -> None:
        self._seek(1)

    def _seek(self, direction: int) -> None:
        driver = self.driver
        assert isinstance(driver, ReplayDriver)
        driver.seek(direction)  # at once: a key pressed during a redraw still moves a turn
        self.run_worker(driver.redraw(), name="seek", group="seek")

    async def action_step(self) -> None:
        await self._driver_call("step")

    async def action_auto(self) -> None:
        await self._driver_call("auto")

    async def action_stop(self) -> None:
        await self._driver_call("stop")

    async def action_approve(self) -> None:
        await self._driver_call("approve")

    async def action_skip(self) -> None:
        await self._driver_call("skip")

    # --- the person's own source: edit, replace, write a turn, message -----------------------------

    def _live(self) -> LiveDriver:
        assert isinstance(self.driver, LiveDriver)
        return self.driver

    def action_edit(self) -> None:
        driver = self._live()
        if driver.human is not None and driver.human.waiting:
            self._write_answer()
            return
        source = driver.approver.source
        if source is None:
            return

        def done(text: str | None) -> None:
            if text is not None:
                driver.submit_edit(text)

        self.app.push_screen(EditorScreen(source, f"Edit turn {driver.approver.turn}'s candidate"), done)

    def _write_answer(self) -> None:
        """The `human` model's turn: the person writes the kernel; it goes to the loop as a cuda block."""
        driver = self._live()
        human = driver.human
        assert human is not None
        previous = self.view.turn(self.view.latest_turn).candidate if self.view.latest_turn else None
        starting = previous.source if previous else starter_kernel(driver.agent.task.definition)
        context = human.messages[-1].content if human.messages else ""
        self._answer_open = True

        def done(text: str | None) -> None:
            self._answer_open = False
            if text is not None:
                human.answer(cuda_answer(text))

        turn = driver.approver.turn or 1
        # After a turn the context is the verdict's feedback, in lines; before the first, the task (markdown).
        editor = EditorScreen(
            starting, f"Your kernel for turn {turn}", context=context, plain=self.view.latest_turn is not None
        )
        self.app.push_screen(editor, done)

    def action_edit_external(self) -> None:
        # The terminal belongs to the editor until it exits (App.suspend): the loop is waiting anyway.
        driver = self._live()
        source = driver.approver.source
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        if source is None:
            return
        if not editor:
            self.notify(
                "set $EDITOR (or $VISUAL) to edit outside, or press e for the built-in editor",
                severity="warning",
            )
            return
        with tempfile.TemporaryDirectory(prefix="ptxwb-edit-") as folder:
            path = Path(folder) / f"turn{driver.approver.turn}.cu"
            path.write_text(source, encoding="utf-8")
            try:
                with self.app.suspend():
                    subprocess.run([*shlex.split(editor), str(path)], check=False)
            except SuspendNotSupported:
                self.notify(
                    "this terminal cannot hand over to $EDITOR: press e for the built-in editor",
                    severity="warning",
                )
                return
            text = path.read_text(encoding="utf-8")
        if text.strip():
            driver.submit_edit(text)

    def action_override(self) -> None:
        driver = self._live()

        def done(answer: str | None) -> None:
            if not answer:
                return
            path = Path(answer).expanduser()
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                self.notify(f"cannot read {path}: {exc.strerror}", severity="error")
                return
            if not text.strip():
                self.notify(f"{path} is empty", severity="error")
                return
            if driver.human is not None and driver.human.waiting:
                driver.human.answer(cuda_answer(text))  # the person's turn: their file is the answer
            else:
                driver.submit_override(text, str(path))

        self.app.push_screen(
            PromptScreen("Override", "Evaluate this .cu file instead of the candidate:", "", "kernel.cu"),
            done,
        )

    def action_message(self) -> None:
        driver = self._live()

        def done(text: str | None) -> None:
            if text:
                driver.message(text)
                self.notify("message queued: the model reads it with its next call")

        self.app.push_screen(PromptScreen("Message", "A message for the model's next turn:"), done)

    def action_evaluate_now(self) -> None:
        self.run_worker(self.driver.evaluate_now(force=True), name="evaluate", group="evaluate")  # type: ignore[attr-defined]

    # --- turn navigation ---------------------------------------------------------------------------

    def action_previous_turn(self) -> None:
        turns = self.view.turn_numbers
        here = self.shown_turn
        earlier = [t for t in turns if here is not None and t < here]
        if earlier:
            self._select(earlier[-1])

    def action_next_turn(self) -> None:
        turns = self.view.turn_numbers
        here = self.shown_turn
        later = [t for t in turns if here is None or t > here]
        if later:
            self._select(None if later[0] == self.view.latest_turn else later[0])

    def action_follow(self) -> None:
        self._select(None)
        self.query_one(ConversationPane).follow()

    # --- looking around ----------------------------------------------------------------------------

    def action_tab(self, key: str) -> None:
        self.query_one(CodePane).activate(key)

    def action_next_mark(self) -> None:
        code = self.query_one(CodePane)
        code.view(code.active).jump_to_mark(1)

    def action_previous_mark(self) -> None:
        code = self.query_one(CodePane)
        code.view(code.active).jump_to_mark(-1)

    def action_source_sass(self) -> None:
        code = self.query_one(CodePane)
        sass = code.document("sass")
        number = self.shown_turn
        turn = self.view.turn(number) if number is not None else None
        if not sass.source_lines:
            carried = self.artifacts.lines_missing(turn) if turn is not None else None
            if turn is not None and carried is not None and not sass.unavailable:
                self.notify(f"{carried}: rebuilding the kernel here to map its lines …", timeout=4)
                self.run_worker(self._map_lines(turn), name="lines", group="lines", exclusive=True)
                return
            why = (
                sass.unavailable
                or "this listing has no line table (built without -lineinfo, or no nvdisasm here)"
            )
            self.notify(f"no source ↔ SASS map: {why}", severity="warning", timeout=4)
            return
        if code.active == "sass":
            line = code.view("sass").cursor_line
            source = sass.source_line_at(line if line is not None else code.view("sass").scroll_offset.y)
            if source is None:
                self.notify("no CUDA line for this SASS line", timeout=2)
                return
            code.activate("cuda")
            code.view("cuda").goto_line(source - 1)
            code.view("cuda").relate({source - 1})
            return
        cuda = code.view("cuda")
        line = (cuda.cursor_line if cuda.cursor_line is not None else cuda.scroll_offset.y) + 1
        instructions = sass.instructions_of(line)
        if not instructions:
            self.notify(f"no SASS instruction comes from CUDA line {line}", timeout=3)
            return
        code.activate("sass")
        code.view("sass").goto_line(instructions[0])
        code.view("sass").relate(set(instructions))
        self.notify(f"CUDA line {line}: {len(instructions)} SASS instructions (tinted)", timeout=3)

    async def _map_lines(self, turn: TurnView) -> None:
        why = await self.artifacts.map_lines(turn, self.target)
        if why is not None:
            self.notify(f"no source ↔ SASS map: {why}", severity="warning", timeout=6)
            return
        if self.shown_turn != turn.number or not self.is_attached:
            return  # the person has moved on to another turn, or left the screen
        code = self.query_one(CodePane)
        code.replace("sass", self.artifacts.listings(turn, self.target)["sass"])
        self.action_source_sass()  # the jump the key asked for

    def action_goto_error(self) -> None:
        number = self.shown_turn
        result = self.view.turn(number).evaluation if number is not None else None
        line = first_error_line(result)
        if line is None:
            self.notify("no compiler error with a line number in this turn", timeout=2)
            return
        code = self.query_one(CodePane)
        code.activate("cuda")
        code.view("cuda").goto_line(line - 1)

    def action_focus_pane(self, name: str) -> None:
        # On a narrow screen the conversation and the code take turns.
        self.set_class(name == "conversation", "-conversation")
        pane = self.query_one(f"#{name}")
        if name == "code":
            self.query_one(CodePane).view(self.query_one(CodePane).active).focus()
        elif name == "timing":
            self.query_one("#timing-table").focus()
        else:
            pane.focus()

    def action_zoom(self) -> None:
        if self.maximized is not None:
            self.minimize()
            return
        pane = self._focused_pane()
        if pane is not None:
            self.maximize(pane, container=False)

    def _focused_pane(self) -> Widget | None:
        node = self.focused
        while node is not None:
            if node.id in PANES:
                return node
            node = node.parent  # type: ignore[assignment]
        return self.query_one("#code")

    # --- keeping things ------------------------------------------------------------------------------

    def action_screenshot(self) -> None:
        start = self.view.start
        stem = f"ptxwb-{start.task if start else 'session'}-turn{self.shown_turn or 0}-{time.strftime('%Y%m%d-%H%M%S')}"
        path = self.app.save_screenshot(f"{stem}.svg", path=str(Path.cwd()))
        self.notify(f"screenshot saved: {path}")

    def action_copy_kernel(self) -> None:
        number = self.shown_turn
        candidate = self.view.turn(number).candidate if number is not None else None
        if candidate is None:
            self.notify("this turn has no kernel", severity="warning")
            return
        task = self.view.start.task if self.view.start else "kernel"
        default = f"{Path(task).stem}-turn{number}.cu"

        def write(answer: str | None) -> None:
            if not answer:
                return
            path = Path(answer).expanduser()
            if path.exists():
                self.notify(f"{path} exists: choose another name", severity="error")
                return
            try:
                path.write_text(candidate.source, encoding="utf-8")
            except OSError as exc:
                self.notify(f"cannot write {path}: {exc.strerror}", severity="error")
                return
            self.notify(f"turn {number}'s kernel written to {path}")

        self.app.push_screen(
            PromptScreen("Write kernel", f"File for turn {number}'s kernel:", default), write
        )

    def action_fork(self) -> None:
        source = self.driver.session_path
        number = self.shown_turn
        if source is None or number is None:
            self.notify("nothing to fork yet", severity="warning")
            return
        default = str(runs_dir() / f"{source.stem}-fork-t{number}.jsonl")
        if isinstance(self.driver, LiveDriver):
            prompt = f"Continue from turn {number} (same model, paused) in a new session file:"
            self.app.push_screen(
                PromptScreen("Fork", prompt, default), lambda a: self._continue_fork(a, number)
            )
            return

        def fork(answer: str | None) -> None:
            if not answer:
                return
            destination = Path(answer).expanduser()
            try:
                fork_session(source, number, destination, session_id=uuid.uuid4().hex)
            except UserError as exc:
                self.notify(str(exc), severity="error")
                return
            self.notify(
                f"forked at turn {number} into {destination}; to go on with a model: "
                f"ptxwb session fork {source} --turn {number} --model MODEL",
                timeout=12,
            )

        self.app.push_screen(PromptScreen("Fork", f"Fork at turn {number} into:", default), fork)

    def _continue_fork(self, answer: str | None, number: int) -> None:
        """Live: end this session and go on from turn `number` in a new one, paused, same model."""
        if not answer:
            return
        driver = self._live()
        destination = Path(answer).expanduser()
        if destination.exists():
            self.notify(f"{destination} exists: choose another name", severity="error")
            return
        agent = driver.agent
        try:
            parent = read_session(agent.out)
            forked = MiniPTXAgent.continue_from(
                parent,
                number,
                model=resumed(agent.model, kept_through(parent, number)),
                executor=agent.executor,
                out=destination,
                config=agent.config,
            )
        except UserError as exc:
            self.notify(str(exc), severity="error")
            return
        driver.stop()
        # The fork's screen goes on top (this one may be the app's first screen, which cannot be
        # switched away); this session has been asked to stop.
        self.app.push_screen(SessionScreen(LiveDriver(forked, pace="step", human=driver.human)))

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(self.driver.mode))

    @property
    def run_going(self) -> bool:
        """A live run that has not ended: leaving it stops it."""
        return isinstance(self.driver, LiveDriver) and self.driver.end is None

    def leave(self, title: str, leave: Callable[[], object]) -> None:
        """`leave` (this screen, or the app), once the person agrees to stop a live run still going."""
        if not self.run_going:
            leave()
            return
        task = self.view.start.task if self.view.start else "this task"
        question = (
            f"The run on {task} is still going: {title.lower()} stops it. Its session file keeps every "
            f"turn so far ({self.driver.session_path})."
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._live().stop()
                leave()

        self.app.push_screen(ConfirmScreen(title, question), answered)

    async def action_back(self) -> None:
        if self.app.screen_stack[0] is self:
            await self.app.run_action("home")  # the app opened on this session: home is where it goes back
        else:
            self.leave("Leaving", self.dismiss)

    def action_quit(self) -> None:
        self.leave("Quitting", self.app.exit)
