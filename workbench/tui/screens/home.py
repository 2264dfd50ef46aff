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
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Footer, Input, Label, Select, Static

from workbench.agent.config import AgentConfig, agent_config
from workbench.errors import UserError
from workbench.knowledge import list_packs
from workbench.session.log import read_session
from workbench.tasks import TARGETS, Catalogue, Task, Workload
from workbench.tui.drivers.base import Driver
from workbench.tui.drivers.live import Pace
from workbench.tui.runs import live_screen
from workbench.tui.screens.session import SessionScreen


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


# The run's limits, as `AgentConfig` fields (their defaults and checks are the config's) and labels.
LIMITS = [
    ("turns", "Turns"),
    ("cost_limit_usd", "Cost limit, USD"),
    ("wall_limit_s", "Wall limit, s"),
    ("target_speedup", "Target speedup"),
]
# A pack choice is the config's (pack, pack_variant) pair.
PackChoice = tuple[bool, str | None]


def _default_text(field: str) -> str:
    default = AgentConfig.model_fields[field].default
    return "" if default is None else f"{default:g}"


def pack_choices(target: str) -> list[tuple[str, PackChoice]]:
    """No pack, the target's pack, or the pack with one of its variants (`--no-pack`, `--pack-variant`)."""
    variants = [v for m in list_packs() if m.target == target for v in m.variants]
    return [
        ("no pack", (False, None)),
        (f"{target} pack", (True, None)),
        *((f"{target} pack + {v}", (True, v)) for v in variants),
    ]


def workload_label(workload: Workload) -> str:
    axes = ", ".join(f"{k}={v}" for k, v in workload.axes.items())
    return f"{axes or 'no axes'} · {workload.uuid[:8]}"


class StartRunScreen(ModalScreen[SessionScreen | None]):
    """Settings for a live run of one task, as `ptxwb run` takes them; Start checks them all first."""

    DEFAULT_CSS = """
    StartRunScreen { align: center middle; }
    StartRunScreen > VerticalScroll { width: 84; max-width: 100%; height: auto; max-height: 100%;
        border: thick $accent; background: $surface; padding: 0 1; }
    StartRunScreen Label { margin-top: 1; color: $text-muted; }
    StartRunScreen Horizontal { height: auto; }
    StartRunScreen Horizontal > Vertical { height: auto; width: 1fr; }
    StartRunScreen #error { display: none; margin-top: 1; color: $error; text-style: bold; }
    StartRunScreen #error.-shown { display: block; }
    StartRunScreen #buttons { margin-top: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, task: Task) -> None:
        super().__init__()
        self.run_task = task

    def compose(self) -> ComposeResult:
        task = self.run_task
        target = "hopper"  # `ptxwb run`'s default
        headline = task.workload().uuid
        workloads = [
            (workload_label(w) + (" ★" if w.uuid == headline else ""), w.uuid) for w in task.workloads
        ]
        with VerticalScroll() as box:
            box.border_title = f"Run {task.name}"
            yield Label("Model: a litellm model string, `human` (you write each turn) or `scripted:FILE`")
            yield Input("human", id="model")
            with Horizontal():
                with Vertical():
                    yield Label("Target")
                    yield Select([(t, t) for t in TARGETS], value=target, allow_blank=False, id="target")
                with Vertical():
                    yield Label("Executor")
                    yield Input("static", placeholder="static, local or ssh://host", id="executor")
                with Vertical():
                    yield Label("Pace")
                    yield Select(
                        [("step", "step"), ("auto", "auto")],
                        value="step",
                        allow_blank=False,
                        id="pace",
                        tooltip="step asks before each turn and each evaluation; auto runs on",
                    )
            with Horizontal():
                with Vertical():
                    yield Label("Workload (★ the headline)")
                    yield Select(workloads, value=headline, allow_blank=False, id="workload")
                with Vertical():
                    yield Label("Knowledge pack")
                    default: PackChoice = (
                        AgentConfig.model_fields["pack"].default,
                        AgentConfig.model_fields["pack_variant"].default,
                    )
                    yield Select(pack_choices(target), value=default, allow_blank=False, id="pack")
            with Horizontal():
                for field, label in LIMITS:
                    with Vertical():
                        yield Label(label)
                        kind = "integer" if field == "turns" else "number"
                        yield Input(_default_text(field), placeholder="none", type=kind, id=field)
            yield Static(id="error")
            with Horizontal(id="buttons"):
                yield Button("Start", variant="primary", id="start")
                yield Button("Cancel", id="cancel")

    @on(Select.Changed, "#target")
    def _target_changed(self, event: Select.Changed) -> None:
        # Variants differ by target: keep the pack on or off, drop a variant the new target lacks.
        pack = self.query_one("#pack", Select)
        kept: PackChoice = pack.value  # type: ignore[assignment]
        choices = pack_choices(str(event.value))
        pack.set_options(choices)
        pack.value = kept if kept in [value for _, value in choices] else (kept[0], None)

    def config(self) -> AgentConfig:
        """The form as an `AgentConfig`, checked as `ptxwb run` checks its options (a `UserError`)."""
        pack, variant = self.query_one("#pack", Select).value  # type: ignore[misc]
        values: dict[str, object] = {
            "workload": self.query_one("#workload", Select).value,
            "pack": pack,
            "pack_variant": variant,
        }
        for field, _ in LIMITS:
            text = self.query_one(f"#{field}", Input).value.strip()
            if text:  # an empty box keeps the config's default
                values[field] = text
        return agent_config(**values)

    @on(Button.Pressed, "#start")
    def start(self) -> None:
        pace: Pace = "auto" if self.query_one("#pace", Select).value == "auto" else "step"
        try:
            screen = live_screen(
                self.run_task.name,
                str(self.query_one("#target", Select).value),
                self.query_one("#model", Input).value.strip() or "human",
                self.query_one("#executor", Input).value.strip() or "static",
                self.config(),
                pace,
            )
        except UserError as exc:
            error = self.query_one("#error", Static)
            error.update(str(exc))
            error.add_class("-shown")
            error.scroll_visible()
            return
        self.dismiss(screen)

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
        self.tasks: dict[str, Task] = {}
        self.started: list[Driver] = []  # the runs started here: `ptxwb` reports one that failed

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
            self.tasks = catalogue.tasks
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
            self.app.push_screen(StartRunScreen(self.tasks[key]), self._start)

    @on(DataTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_open()

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
            self.started.append(screen.driver)
            self.app.push_screen(screen)
