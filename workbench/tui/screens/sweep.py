"""The sweep screen (`ptxwb bench view DIR`): the grid of cells filling in live; enter on a cell lists
its trajectories, enter on a trajectory replays its session.
"""

from __future__ import annotations

from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from workbench.bench.folder import SweepFolder
from workbench.bench.live import CellState, TrajectoryState, grid, trajectories
from workbench.bench.metrics import Cell
from workbench.errors import UserError
from workbench.session.log import read_session
from workbench.tui.screens.session import SessionScreen

REFRESH_S = 1.0


def _speedup(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}×"


def _of(count: int | None, n: int) -> str:
    return "n/a" if count is None else f"{count}/{n}"


class _Table(Screen[None]):
    """A screen of one refreshed table; subclasses say what it holds and what enter opens."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open", show=True),
        Binding("r", "refresh", "Refresh"),
        Binding("escape", "back", "Back"),
        Binding("q", "app.quit", "Quit"),
    ]
    DEFAULT_CSS = """
    _Table #title { height: auto; padding: 0 1; background: $panel; }
    _Table DataTable { height: 1fr; }
    """
    COLUMNS: ClassVar[tuple[str, ...]] = ()

    def __init__(self, folder: SweepFolder) -> None:
        super().__init__()
        self.folder = folder

    def compose(self) -> ComposeResult:
        yield Static(id="title")
        yield DataTable(id="table", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(*self.COLUMNS)
        self.action_refresh()
        self.set_interval(REFRESH_S, self.action_refresh)

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()

    def _fill(self, rows: list[tuple[str, list[str]]], title: str) -> None:
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        table.clear()
        for key, cells in rows:
            table.add_row(*cells, key=key)
        if rows:
            table.move_cursor(row=min(cursor, len(rows) - 1))
        self.query_one("#title", Static).update(title)

    def _selected(self) -> str | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    @on(DataTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_open()

    def action_refresh(self) -> object:  # subclasses run it as a worker (it returns the Worker)
        raise NotImplementedError

    def action_open(self) -> None:
        raise NotImplementedError


class SweepScreen(_Table):
    COLUMNS = ("model", "target", "task", "variant", "done", "running", "correct", "SASS", "static", "best")

    def __init__(self, folder: SweepFolder) -> None:
        super().__init__(folder)
        self.cells: dict[str, Cell] = {}

    @work(name="sweep-grid", group="sweep-grid", exclusive=True, thread=True)
    def action_refresh(self) -> None:
        try:
            states, limit = grid(self.folder)
        except UserError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error")
            return
        self.app.call_from_thread(self._show, states, limit)

    def _show(self, states: list[CellState], limit: int) -> None:
        self.cells = {"\0".join(s.cell): s.cell for s in states}
        rows = [
            (
                "\0".join(s.cell),
                [
                    s.cell[1],
                    s.cell[2],
                    s.cell[3],
                    s.cell[4],
                    f"{s.finished}/{s.planned}",
                    str(s.running),
                    _of(s.correct, s.finished),
                    _of(s.sass_verified, s.finished),
                    _of(s.static_passed, s.finished),
                    _speedup(s.best_speedup),
                ],
            )
            for s in states
        ]
        done = sum(s.finished for s in states)
        planned = sum(s.planned for s in states)
        self._fill(
            rows, f"sweep {self.folder.root} · {done}/{planned} trajectories done · numbers at T = {limit}"
        )

    def action_open(self) -> None:
        key = self._selected()
        if key is not None and key in self.cells:
            self.app.push_screen(CellScreen(self.folder, self.cells[key]))


class CellScreen(_Table):
    COLUMNS = ("trajectory", "state", "end", "turns", "best")

    def __init__(self, folder: SweepFolder, cell: Cell) -> None:
        super().__init__(folder)
        self.cell = cell
        self.states: dict[str, TrajectoryState] = {}

    @work(name="sweep-cell", group="sweep-cell", exclusive=True, thread=True)
    def action_refresh(self) -> None:
        try:
            states = trajectories(self.folder, self.cell)
        except UserError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error")
            return
        self.app.call_from_thread(self._show, states)

    def _show(self, states: list[TrajectoryState]) -> None:
        self.states = {s.trajectory: s for s in states}
        rows = [
            (
                s.trajectory,
                [
                    s.trajectory,
                    s.state,
                    s.end_reason or "",
                    " ".join(s.statuses) or "–",
                    _speedup(s.best_speedup),
                ],
            )
            for s in states
        ]
        run, model, target, task, variant = self.cell
        self._fill(rows, f"{model} · {target} · {task} · {variant} ({run}) · enter replays a trajectory")

    def action_open(self) -> None:
        from workbench.tui.drivers.replay import ReplayDriver

        key = self._selected()
        state = self.states.get(key or "")
        if state is None or state.session is None:
            self.notify("no session file for this trajectory yet", severity="warning")
            return
        try:
            read = read_session(state.session)
        except UserError as exc:
            self.notify(str(exc), severity="error")
            return
        self.app.push_screen(SessionScreen(ReplayDriver(read, speed=4.0)))
