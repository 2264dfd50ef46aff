"""The paper's table: per target, one row per model (and variant) of each source, one column per task.

Each cell holds correct@1 / correct@T / SASS@T / best speedup@T. The runs of one source, model, variant,
target and task merge into one cell: their finished trajectories are pooled (n is the sum of the runs'
n) and every metric is computed again over the pool, so a rate is the pooled count over the pooled n and
the best speedup is the best of any run. Its turn budget is the smallest of the runs'.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from workbench.bench.formatting import NOT_MEASURED, count_text, percent, speedup
from workbench.bench.labels import model_labels, source_label
from workbench.bench.metrics import CellMetrics, cell_metrics
from workbench.bench.records import TrajectoryRecord

PLAIN_VARIANTS = ("default", "paper")  # the variant a sweep without variants has, and imported data's


@dataclass(frozen=True)
class PivotRow:
    source: str
    model: str
    """The model as a report names it (`labels.model_label`)."""
    variant: str

    @property
    def label(self) -> str:
        return self.model if self.variant in PLAIN_VARIANTS else f"{self.model} · {self.variant}"

    @property
    def source_label(self) -> str:
        return source_label(self.source)


@dataclass(frozen=True)
class PivotCell:
    row: PivotRow
    target: str
    task: str
    runs: tuple[str, ...]
    first: CellMetrics
    last: CellMetrics

    @staticmethod
    def metrics_for(first: int, last: int) -> list[tuple[str, str, str]]:
        """(header, "first" or "last", field) of each number a cell shows; one correct@ when T is 1."""
        shown = [(f"correct@{first}", "first", "correct")]
        if last != first:
            shown.append((f"correct@{last}", "last", "correct"))
        return [*shown, (f"SASS@{last}", "last", "sass_verified"), (f"best×@{last}", "last", "best_speedup")]

    def metrics(self) -> list[tuple[str, CellMetrics, str]]:
        """(header, metrics, field) of each number this cell shows."""
        shown = [
            (header, getattr(self, which), name)
            for header, which, name in self.metrics_for(self.first.turn_limit, self.last.turn_limit)
        ]
        if self.last.correct is None and self.last.static_passed is not None:
            last = self.last.turn_limit  # all a machine without a GPU knows
            shown.append((f"static@{last}", self.last, "static_passed"))
        return shown

    def texts(self, intervals: bool = False) -> list[tuple[str, str]]:
        """(header, text) of each number; every report renders these same strings."""
        return [(header, metric_text(m, name, intervals)) for header, m, name in self.metrics()]

    def line(self, intervals: bool = False) -> str:
        """The cell on one line (terminal, Markdown): the numbers joined by ` / `."""
        return " / ".join(text for _, text in self.texts(intervals))

    def as_dict(self) -> dict[str, object]:
        return {
            "source": self.row.source,
            "label": self.row.label,
            "model": self.row.model,
            "variant": self.row.variant,
            "target": self.target,
            "task": self.task,
            "runs": list(self.runs),
            "first": self.first.as_dict(),
            "last": self.last.as_dict(),
            "texts": dict(self.texts()),
        }


def metric_text(cell: CellMetrics, name: str, intervals: bool = False) -> str:
    """`75%` (or `9/12 75% [47–91]` with intervals), `0.83×`; "not measured" where the tier never ran,
    "–" where nothing could be (no trajectory finished; no correct kernel to time)."""
    if name == "best_speedup":
        if cell.correct is None:
            return NOT_MEASURED
        return speedup(cell.best_speedup)
    value: int | None = getattr(cell, name)
    if value is None:
        return NOT_MEASURED
    if cell.n_trajectories == 0:
        return "–"
    if intervals:
        return count_text(value, cell.n_trajectories, getattr(cell, f"{name}_ci"))
    return percent(value / cell.n_trajectories)


@dataclass(frozen=True)
class TargetPivot:
    target: str
    tasks: list[str]
    rows: list[PivotRow]
    cells: dict[tuple[PivotRow, str], PivotCell]


@dataclass(frozen=True)
class Pivot:
    first: int
    last: int
    targets: list[TargetPivot]

    def cells(self) -> list[PivotCell]:
        return [cell for target in self.targets for cell in target.cells.values()]

    def as_dicts(self) -> list[dict[str, object]]:
        return [cell.as_dict() for cell in self.cells()]


def _natural(text: str) -> list[object]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _merged(
    row: PivotRow, target: str, task: str, group: list[TrajectoryRecord], limits: tuple[int, int],
    budgets: Mapping[str, int],
) -> PivotCell:  # fmt: skip
    runs = tuple(sorted({r.key.run for r in group}, key=_natural))
    known = [budgets[run] for run in runs if run in budgets]
    budget = min(known) if len(known) == len(runs) and known else None
    key = (" + ".join(runs), row.model, target, task, row.variant)
    first, last = (cell_metrics(key, group, limit, budget) for limit in limits)
    return PivotCell(row, target, task, runs, first, last)


def pivot(
    records: Sequence[TrajectoryRecord], first: int, last: int, budgets: Mapping[str, int] | None = None
) -> Pivot:
    """The table per target: rows by source (this workbench's first), then model and variant; tasks by
    name, those at least half the rows have first."""
    groups: dict[tuple[PivotRow, str, str], list[TrajectoryRecord]] = {}
    labels = model_labels(r.key.model for r in records)
    for record in records:
        key = record.key
        row = PivotRow(record.source, labels[key.model], key.variant)
        groups.setdefault((row, key.target, key.task), []).append(record)
    targets = []
    for target in sorted({t for _, t, _ in groups}):
        here = {(row, task): group for (row, t, task), group in groups.items() if t == target}
        coverage = Counter(task for _, task in here)
        rows_here = len({row for row, _ in here})
        tasks = sorted(coverage, key=lambda task: (2 * coverage[task] < rows_here, _natural(task)))
        rows = sorted(
            {row for row, _ in here}, key=lambda r: (r.source != "sweep", r.source, _natural(r.label))
        )
        cells = {
            (row, task): _merged(row, target, task, group, (first, last), budgets or {})
            for (row, task), group in here.items()
        }
        targets.append(TargetPivot(target, tasks, rows, cells))
    return Pivot(first, last, targets)
