"""What a live view of a sweep shows: each cell's progress and numbers, each trajectory's state.

Read from the session files as they are (synced into the store), so it works while `ptxwb bench run`
writes them from another process.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workbench.bench.folder import SweepFolder
from workbench.bench.metrics import Cell, best_speedup, cell_metrics, group_cells
from workbench.bench.records import TrajectoryRecord


@dataclass(frozen=True)
class CellState:
    cell: Cell
    planned: int
    finished: int
    running: int
    correct: int | None  # None: correctness was never measured in this cell (a static sweep)
    sass_verified: int | None
    static_passed: int | None
    best_speedup: float | None


@dataclass(frozen=True)
class TrajectoryState:
    trajectory: str
    state: str  # finished, running (or cut short), pending
    end_reason: str | None
    statuses: list[str]
    best_speedup: float | None
    session: Path | None


def _limit(folder: SweepFolder, records: list[TrajectoryRecord]) -> int:
    spec = folder.spec()
    if spec is not None:
        return spec.turns
    return max((row.turn for r in records for row in r.rows), default=1)


def grid(folder: SweepFolder) -> tuple[list[CellState], int]:
    """Every cell, planned ones included, with its numbers at T = the sweep's turn limit."""
    records = folder.records()
    limit = _limit(folder, records)
    planned: dict[Cell, int] = {}
    for item in folder.planned():
        planned[item.key.cell] = planned.get(item.key.cell, 0) + 1
    cells = group_cells(records)
    states = []
    for cell in sorted(set(planned) | set(cells)):
        group = cells.get(cell, [])
        metrics = cell_metrics(cell, group, limit)
        states.append(
            CellState(
                cell=cell,
                planned=planned.get(cell, len(group)),
                finished=metrics.n_trajectories,
                running=metrics.n_unfinished,
                correct=metrics.correct,
                sass_verified=metrics.sass_verified,
                static_passed=metrics.static_passed,
                best_speedup=metrics.best_speedup,
            )
        )
    return states, limit


def trajectories(folder: SweepFolder, cell: Cell) -> list[TrajectoryState]:
    """The cell's trajectories: recorded ones from the store, planned ones not begun as pending."""
    found = {r.key.trajectory: r for r in folder.records() if r.key.cell == cell}
    names = [p.key.trajectory for p in folder.planned() if p.key.cell == cell]
    out = []
    for name in dict.fromkeys([*names, *sorted(found)]):
        record = found.get(name)
        if record is None:
            out.append(TrajectoryState(name, "pending", None, [], None, None))
            continue
        session = folder.root / record.session_path if record.session_path else None
        out.append(
            TrajectoryState(
                trajectory=name,
                state="finished" if record.finished else "running",
                end_reason=record.end_reason,
                statuses=[row.status for row in record.rows],
                best_speedup=best_speedup(record.rows),
                session=session if session is not None and session.is_file() else None,
            )
        )
    return out
