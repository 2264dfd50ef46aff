"""The home screen (`ptxwb` with no command): tasks, recent sessions, and starting a run."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Footer, Input, Label, Select, Static

from workbench.errors import UserError
from workbench.session.log import read_session
from workbench.tasks import TARGETS, Catalogue


@dataclass(frozen=True)
class SessionSummary:
    path: Path
    task: str
    target: str
    model: str
    turns: int
    best: str
    modified: float


def summarise(path: Path) -> SessionSummary | None:
    try:
        read = read_session(path)
        start = read.start
    except UserError:
        return None
    speedups = [
        e.result.stages.timing.speedup
        for e in read.events
        if e.type == "evaluation" and e.result.stages.timing.speedup is not None
    ]
    statuses = [e.result.status.value for e in read.events if e.type == "evaluation"]
    best = f"{max(speedups):.2f}×" if speedups else (statuses[-1] if statuses else "—")
    return SessionSummary(
        path, start.task, start.target, start.model, len(read.turns()), best, path.stat().st_mtime
    )


def recent_sessions(folders: list[Path], limit: int = 40) -> list[SessionSummary]:
    files = [p for folder in folders if folder.is_dir() for p in folder.glob("**/*.jsonl")]
    files.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    found = [summarise(p) for p in files[:limit]]
    return [s for s in found if s is not None]


@dataclass(frozen=True)
class RunRequest:
    task: str
    target: str
    model: str
    executor: str
    turns: int
    pace: str


class StartRunScreen(ModalScreen[RunRequest | None]):
    """Settings for a live run of one task: the model, the target, the executor, the pace."""

    DEFAULT_CSS = """
    StartRunScreen { align: center middle; }
    StartRunScreen > Vertical { width: 72; max-width: 100%; height: auto; border: thick $accent;
        background: $surface; padding: 0 1; }
    StartRunScreen Label { margin-top: 1; color: $text-muted; }
    StartRunScreen Horizontal { height: auto; margin-top: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, task: str) -> None:
        super().__init__()
        self.task_name = task

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = f"Run {self.task_name}"
            yield Label("Model: a litellm model string, `human` (you write each turn) or `scripted:FILE`")
            yield Input("human", id="model")
            yield Label("Target")
            yield Select([(t, t) for t in TARGETS], value="hopper", allow_blank=False, id="target")
            yield Label("Executor: static (no GPU), local, ssh://host")
            yield Input("static", id="executor")
            yield Label("Turns")
            yield Input("8", id="turns", type="integer")
            yield Label("Pace: step asks before each turn and each evaluation; auto runs on")
            yield Select([("step", "step"), ("auto", "auto")], value="step", allow_blank=False, id="pace")
            with Horizontal():
                yield Button("Start", variant="primary", id="start")
                yield Button("Cancel", id="cancel")

    @on(Button.Pressed, "#start")
    def start(self) -> None:
        turns = self.query_one("#turns", Input).value.strip()
        self.dismiss(
            RunRequest(
                task=self.task_name,
                target=str(self.query_one("#target", Select).value),
                model=self.query_one("#model", Input).value.strip() or "human",
                executor=self.query_one("#executor", Input).value.strip() or "static",
                turns=int(turns) if turns.isdigit() and int(turns) > 0 else 8,
                pace=str(self.query_one("#pace", Select).value),
            )
        )

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class HomeScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open", show=True),
        Binding("r", "refresh", "Refresh"),
        Binding("tab", "app.focus_next", "Switch list", show=True),
        Binding("q", "app.quit", "Quit"),
    ]
    DEFAULT_CSS = """
    HomeScreen #intro { height: auto; padding: 0 1; background: $panel; }
    HomeScreen #lists { height: 1fr; }
    HomeScreen DataTable { height: 1fr; border: round $panel-lighten-2; }
    HomeScreen DataTable:focus { border: round $accent; }
    HomeScreen #tasks { width: 2fr; }
    HomeScreen #sessions { width: 3fr; }
    HomeScreen.-narrow #lists { layout: vertical; }
    HomeScreen.-narrow #tasks, HomeScreen.-narrow #sessions { width: 1fr; }
    """
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]] | None] = [(0, "-narrow"), (110, "-wide")]

    def __init__(self, session_folders: list[Path]) -> None:
        super().__init__()
        self.session_folders = session_folders

    def compose(self) -> ComposeResult:
        intro = Text()
        intro.append(" PTX Workbench ", style="bold reverse")
        intro.append("  enter on a task starts a run · enter on a session replays it · ")
        intro.append("ptxwb author --task NAME KERNEL.cu", style="bold")
        intro.append(" watches your own file")
        yield Static(intro, id="intro")
        with Horizontal(id="lists"):
            tasks: DataTable[object] = DataTable(id="tasks", cursor_type="row")
            tasks.border_title = "Tasks"
            yield tasks
            sessions: DataTable[object] = DataTable(id="sessions", cursor_type="row")
            sessions.border_title = "Recent sessions"
            yield sessions
        yield Footer()

    def on_mount(self) -> None:
        tasks = self.query_one("#tasks", DataTable)
        tasks.add_columns("task", "family", "headline")
        try:
            catalogue = Catalogue.load()
        except UserError as exc:
            self.notify(str(exc), severity="error")
        else:
            for name, task in catalogue.tasks.items():
                family = task.facts.family if task.facts else "?"
                headline = "★" if task.facts and task.facts.headline else ""
                tasks.add_row(name, family, headline, key=name)
        sessions = self.query_one("#sessions", DataTable)
        sessions.add_columns("session", "task", "target", "model", "turns", "best", "when")
        self.action_refresh()

    @work(name="sessions", group="sessions", exclusive=True, thread=True)
    def action_refresh(self) -> None:
        found = recent_sessions(self.session_folders)
        self.app.call_from_thread(self._show_sessions, found)

    def _show_sessions(self, found: list[SessionSummary]) -> None:
        table = self.query_one("#sessions", DataTable)
        table.clear()
        for s in found:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.modified))
            table.add_row(s.path.name, s.task, s.target, s.model, str(s.turns), s.best, when, key=str(s.path))
        table.border_subtitle = f"{len(found)} in {', '.join(str(f) for f in self.session_folders)}"

    def action_open(self) -> None:
        focused = self.focused
        if not isinstance(focused, DataTable) or focused.row_count == 0:
            return
        key = focused.coordinate_to_cell_key(focused.cursor_coordinate).row_key.value
        if key is None:
            return
        if focused.id == "sessions":
            self._replay(Path(key))
        else:
            self.app.push_screen(StartRunScreen(key), self._start)

    @on(DataTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_open()

    def _replay(self, path: Path) -> None:
        from workbench.tui.drivers.replay import ReplayDriver
        from workbench.tui.screens.session import SessionScreen

        try:
            read = read_session(path)
        except UserError as exc:
            self.notify(str(exc), severity="error")
            return
        self.app.push_screen(SessionScreen(ReplayDriver(read, speed=4.0)))

    def _start(self, request: RunRequest | None) -> None:
        if request is None:
            return
        from workbench.tui.runs import live_screen

        try:
            screen = live_screen(
                request.task, request.target, request.model, request.executor, request.turns, request.pace
            )
        except UserError as exc:
            self.notify(str(exc), severity="error")
            return
        self.app.push_screen(screen)
