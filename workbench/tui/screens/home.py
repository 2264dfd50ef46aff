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
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from workbench.errors import UserError
from workbench.evaluate.result import Status
from workbench.paths import runs_dir, sessions_dir
from workbench.session.events import Evaluation
from workbench.session.log import read_session
from workbench.tasks import Catalogue, Task
from workbench.tui.screens.run_form import StartRunScreen
from workbench.tui.screens.session import SessionScreen
from workbench.tui.widgets.columns import Column, fitting, lines, narrowest, wrap
from workbench.tui.widgets.task_pane import render_task
from workbench.tui.widgets.timing import speedup_text
from workbench.tui.widgets.verdict import status_style


@dataclass(frozen=True)
class SessionSummary:
    path: Path
    task: str
    target: str
    model: str
    turns: int
    verdict: Status | None  # the last verdict
    best: float | None  # the best speedup of a correct, timed turn
    started: float


def summarise(path: Path) -> SessionSummary | None:
    try:
        read = read_session(path)
        start = read.start
    except UserError:
        return None
    results = [e.result for e in read.events if isinstance(e, Evaluation)]
    speedups = [r.speedup for r in results if r.speedup is not None]
    return SessionSummary(
        path,
        start.task,
        start.target,
        start.model,
        len(read.turns()),
        results[-1].status if results else None,
        max(speedups) if speedups else None,
        start.ts,
    )


def recent_sessions(folders: list[Path], limit: int = 40) -> list[SessionSummary]:
    files = [p for folder in folders if folder.is_dir() for p in folder.glob("**/*.jsonl")]
    files.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    found = [s for s in map(summarise, files[:limit]) if s is not None]
    return sorted(found, key=lambda s: s.started, reverse=True)


def model_label(model: str) -> str:
    """A session's model for the list: a `scripted:` or `replay:` model by its kind (its file is in the
    session), any other model string as it is."""
    kind, _, rest = model.partition(":")
    return kind if rest and kind in ("scripted", "replay") else model


def session_cells(s: SessionSummary) -> dict[str, Text]:
    date = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.started))
    verdict = Text(s.verdict.value, status_style(s.verdict)) if s.verdict else Text("—", "dim")
    return {
        "date": Text(date),
        "task": Text(s.task),
        "target": Text(s.target),
        "model": Text(model_label(s.model)),
        "turns": Text(str(s.turns)),
        "verdict": verdict,
        "best": speedup_text(s.best),
        "session": Text(s.path.name),
    }


def session_columns(rows: list[dict[str, Text]]) -> list[Column]:
    """The session list's columns: the file name wraps first, then the model, the task, the verdict;
    the number of turns and the target go before the best speedup and the file name do."""

    def column(key: str, priority: int, bend: int | None = None, least: int = 0) -> Column:
        texts = [key, *(row[key].plain for row in rows)]
        width = max(map(len, texts))
        narrow = None if bend is None else min(width, max(least, *map(narrowest, texts)))
        return Column(key, key, width, priority, narrow, bend or 0)

    return [
        column("date", 0, bend=5),
        column("task", 1, bend=3, least=12),
        column("target", 5),
        column("model", 4, bend=1, least=10),
        column("turns", 6),
        column("verdict", 2, bend=4),
        column("best", 2),
        column("session", 3, bend=0, least=16),
    ]


class TaskFilter(Input):
    """The home screen's filter box: typing narrows the tasks, up and down move through them."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down", "screen.move_task(1)", show=False),
        Binding("up", "screen.move_task(-1)", show=False),
        Binding("escape", "clear", "Clear filter", show=False),
    ]

    def action_clear(self) -> None:
        self.value = ""


def task_matches(task: Task, words: str) -> bool:
    """Every word of the filter is in the task's name, family or op type (`gemm 5120`, `causal d128`)."""
    haystack = " ".join(
        [task.name, task.definition.op_type, *(task.facts.family.split("_") if task.facts else [])]
    ).lower()
    return all(word in haystack for word in words.lower().split())


class HomeScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open", show=True),
        Binding("ctrl+r", "refresh", "Refresh sessions"),
        Binding("tab", "app.focus_next", "Next list", show=True),
    ]
    DEFAULT_CSS = """
    HomeScreen #intro { height: auto; padding: 0 1; background: $panel; }
    HomeScreen #top { height: 3fr; }
    HomeScreen #task-column { width: 2fr; }
    HomeScreen #filter { border: round $panel-lighten-2; }
    HomeScreen #filter:focus { border: round $accent; }
    HomeScreen DataTable { height: 1fr; border: round $panel-lighten-2; }
    HomeScreen DataTable:focus { border: round $accent; }
    HomeScreen #task-pane { width: 3fr; border: round $panel-lighten-2; padding: 0 1; }
    HomeScreen #sessions { height: 2fr; }
    HomeScreen.-narrow #top { layout: vertical; }
    HomeScreen.-narrow #task-column, HomeScreen.-narrow #task-pane { width: 1fr; }
    """
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]  # noqa: RUF012 - Textual reads it per instance

    def __init__(self, session_folders: list[Path]) -> None:
        super().__init__()
        self.session_folders = session_folders
        self.tasks: dict[str, Task] = {}
        self._found: list[SessionSummary] = []

    @classmethod
    def default(cls) -> HomeScreen:
        """The home of `ptxwb`: the shipped sessions and the runs folder here."""
        return cls([sessions_dir(), runs_dir()])

    def compose(self) -> ComposeResult:
        intro = Text()
        intro.append(" PTX Workbench ", style="bold reverse")
        intro.append("  type to filter the tasks · enter starts a run · enter on a session replays it · ")
        intro.append("ptxwb author --task NAME KERNEL.cu", style="bold")
        intro.append(" watches your own file · ctrl+q quits")
        yield Static(intro, id="intro")
        with Horizontal(id="top"):
            with Vertical(id="task-column"):
                yield TaskFilter(placeholder="filter: gemm 5120, causal d128, bwd …", id="filter")
                tasks: DataTable[object] = DataTable(id="tasks", cursor_type="row")
                tasks.border_title = "Tasks"
                yield tasks
            with VerticalScroll(id="task-pane") as pane:
                pane.border_title = "Task"
                # Read beside the list, not a stop of its own: Tab goes filter, tasks, sessions, where
                # enter and the arrows always do something.
                pane.can_focus = False
                yield Static(id="task-facts")
        sessions: DataTable[object] = DataTable(id="sessions", cursor_type="row")
        sessions.border_title = "Recent sessions"
        yield sessions
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#tasks", DataTable).add_columns("task", "family", "★")
        try:
            self.tasks = Catalogue.load().tasks
        except UserError as exc:
            self.notify(str(exc), severity="error")
        self._show_tasks("")
        self.query_one("#filter", TaskFilter).focus()

    def on_screen_resume(self) -> None:
        # Shown first, or again after a run or a replay: that run's session is in the list now.
        self.action_refresh()

    def on_resize(self) -> None:
        # The columns that fit depend on the width, known once the layout is done.
        self.call_after_refresh(lambda: self._show_sessions(self._found))

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._show_tasks(event.value)

    def _show_tasks(self, words: str) -> None:
        table = self.query_one("#tasks", DataTable)
        table.clear()
        shown = [task for task in self.tasks.values() if task_matches(task, words)]
        for task in shown:
            family = task.facts.family.replace("attention_", "attn ") if task.facts else "?"
            headline = "★" if task.facts and task.facts.headline else ""
            table.add_row(task.name, family, headline, key=task.name)
        table.border_subtitle = f"{len(shown)} of {len(self.tasks)}"
        if not shown:
            self.query_one("#task-facts", Static).update(Text(f"no task matches {words!r}", style="dim"))

    @on(DataTable.RowHighlighted, "#tasks")
    def _task_highlighted(self, event: DataTable.RowHighlighted) -> None:
        task = self.tasks.get(str(event.row_key.value))
        if task is not None:
            self.query_one("#task-facts", Static).update(render_task(task))

    def action_move_task(self, step: int) -> None:
        table = self.query_one("#tasks", DataTable)
        if table.row_count:
            table.move_cursor(row=max(0, min(table.cursor_row + step, table.row_count - 1)))

    @work(name="sessions", group="sessions", exclusive=True, thread=True)
    def action_refresh(self) -> None:
        found = recent_sessions(self.session_folders)
        self.app.call_from_thread(self._show_sessions, found)

    def _show_sessions(self, found: list[SessionSummary]) -> None:
        self._found = found
        table = self.query_one("#sessions", DataTable)
        at = table.cursor_row
        rows = [session_cells(s) for s in found]
        # Fitted to the width (every column whole, long names wrapped), so nothing hides off the right.
        width = table.size.width - table.styles.gutter.width - table.styles.scrollbar_size_vertical
        shown = fitting(session_columns(rows), width)
        table.clear(columns=True)
        for column in shown:
            table.add_column(column.title, key=column.key, width=column.width)
        for summary, cells in zip(found, rows, strict=True):
            row = [wrap(cells[c.key], c.width) for c in shown]
            table.add_row(*row, key=str(summary.path), height=max(map(lines, row)))
        if found:
            table.move_cursor(row=min(at, len(found) - 1), animate=False)
        table.border_subtitle = f"{len(found)} in {', '.join(str(f) for f in self.session_folders)}"

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self._open(self.query_one("#tasks", DataTable))

    def action_open(self) -> None:
        focused = self.focused
        if isinstance(focused, DataTable):
            self._open(focused)

    def _open(self, table: DataTable[object]) -> None:
        if table.row_count == 0:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        if key is None:
            return
        if table.id == "sessions":
            self._replay(Path(key))
        else:
            self.app.push_screen(StartRunScreen(self.tasks[key]), self._start)

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        self._open(event.data_table)

    def _replay(self, path: Path) -> None:
        from workbench.tui.drivers.replay import ReplayDriver

        try:
            read = read_session(path)
        except UserError as exc:
            self.notify(str(exc), severity="error")
            return
        self.app.push_screen(SessionScreen(ReplayDriver(read, speed=4.0)))

    def _start(self, screen: SessionScreen | None) -> None:
        if screen is not None:
            # `ptxwb` reports a run whose session failed: the app keeps the drivers it started (read by
            # name, since the app module imports this one).
            started = getattr(self.app, "started", None)
            if isinstance(started, list):
                started.append(screen.driver)
            self.app.push_screen(screen)
