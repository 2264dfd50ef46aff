"""How many turns each run gave its trajectories, and the turn limits T a report uses by default.

A sweep's budget is its spec's `turns`; imported data has no spec, so its budget is the last turn any
of the run's trajectories reached. T defaults to 1 and the budget the runs share; where runs differ,
the smallest, so that every run shown is measured at every T.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from workbench.bench.folder import SweepFolder
from workbench.bench.records import TrajectoryRecord


def observed_budgets(records: Iterable[TrajectoryRecord]) -> dict[str, int]:
    """Each run's budget as its data shows it: the last turn any of its trajectories reached."""
    budgets: dict[str, int] = {}
    for record in records:
        last = max((row.turn for row in record.rows), default=1)
        budgets[record.key.run] = max(budgets.get(record.key.run, 1), last)
    return budgets


def run_budgets(roots: Iterable[Path], records: Iterable[TrajectoryRecord]) -> dict[str, int]:
    """Every run's budget: the sweeps' specs where there is one, the data's otherwise."""
    budgets = observed_budgets(records)
    for root in roots:
        spec = SweepFolder(root).spec()
        if spec is not None:
            budgets[spec.name] = spec.turns
    return budgets


def default_limits(budgets: dict[str, int]) -> list[int]:
    """1 and the smallest budget of the runs (just 1 for one-turn runs)."""
    smallest = min(budgets.values(), default=1)
    return sorted({1, smallest})


def limits_note(budgets: dict[str, int], limits: list[int]) -> str | None:
    """A line where the runs' budgets differ or a T exceeds one of them; None where all is plain."""
    values = sorted(set(budgets.values()))
    if len(values) <= 1 and all(limit <= min(values, default=limits[-1]) for limit in limits):
        return None
    counts = {turns: sum(v == turns for v in budgets.values()) for turns in values}
    spread = ", ".join(f"{_plural(turns, 'turn')}: {_plural(runs, 'run')}" for turns, runs in counts.items())
    short = [run for run, turns in budgets.items() if turns < limits[-1]]
    beyond = f"; T = {limits[-1]} is not measured for {len(short)} of them" if short else ""
    return f"the runs differ in turn budget ({spread}){beyond}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
