"""The benchmark's numbers per cell (run × model × target × task × variant) and turn limit T.

The paper's three, as PTXBench's code computes them (its turns count from 0 and it keeps turns < T;
ours count from 1, so turns <= T):
- correct@T: trajectories with at least one correct turn among their first T;
- SASS-verified@T: the same, the correct turn's required family proven executed;
- best speedup@T: the largest speedup of a correct turn among the first T of any trajectory
  (None where no correct turn was timed; PTXBench writes 0 there).
Beyond the paper: static_passed@T, fast_p, the geometric-mean speedup over correct trajectories with
a bootstrap interval, the unbiased pass@k, Wilson intervals, the failure mix, tokens and cost per
correct trajectory. Only finished trajectories count; unfinished ones are reported as such.

Only what was measured: a trajectory's correct@T is known when one of its first T turns was correct,
or when every one of them was judged by the correctness tier or failed to build (a kernel that does
not build is not correct on any machine). A cell's count is None ("not measured") unless every
trajectory's answer is known, and for every T beyond the turn budget its runs gave their trajectories:
a static sweep, which never runs the GPU tiers, measures no correct@T, never 0 %.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from workbench.bench.records import TrajectoryRecord, TurnRow
from workbench.bench.stats import bootstrap_geomean, geomean, pass_at_k, wilson

DEFAULT_TURNS = (1, 4, 8)
FAST_P = (0.0, 0.5, 0.8, 1.0)
PASS_K = (1, 5, 10)
Cell = tuple[str, str, str, str, str]


@dataclass(frozen=True)
class CellMetrics:
    run: str
    model: str
    target: str
    task: str
    variant: str
    source: str
    turn_limit: int
    n_trajectories: int
    n_unfinished: int
    correct: int | None
    correct_rate: float | None
    correct_ci: tuple[float, float] | None
    sass_verified: int | None
    sass_verified_rate: float | None
    sass_verified_ci: tuple[float, float] | None
    static_passed: int | None
    static_passed_rate: float | None
    static_passed_ci: tuple[float, float] | None
    best_speedup: float | None
    geomean_speedup: float | None
    geomean_speedup_ci: tuple[float, float] | None
    n_timed: int
    fast_p: dict[str, float | None]
    pass_at_k: dict[str, float]
    turns_evaluated: int
    turn_budget: int | None = None
    """The most turns its runs gave a trajectory (a sweep's `turns`; imported data: its longest)."""
    failure_mix: dict[str, int] = field(default_factory=dict)
    tokens: int | None = None
    cost_usd: float | None = None
    tokens_per_correct: float | None = None
    cost_per_correct: float | None = None

    @property
    def cell(self) -> Cell:
        return (self.run, self.model, self.target, self.task, self.variant)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _first(rows: Sequence[TurnRow], limit: int) -> list[TurnRow]:
    return [row for row in rows if row.turn <= limit]


UNMEASURED = frozenset({"not_run", "infrastructure_error"})  # a tier that gave no answer


def _ran(row: TurnRow, tier: str) -> bool:
    """Whether the tier answered for this turn. Rows without tiers (imported, or no kernel) are answered:
    PTXBench ran every GPU tier, and a turn without a kernel is not correct anywhere."""
    return not row.tiers or row.tiers.get(tier, "not_run") not in UNMEASURED


def _build_failed(row: TurnRow) -> bool:
    return row.tiers.get("build", "not_run") not in UNMEASURED | {"passed"}


def correctness_known(row: TurnRow) -> bool:
    return row.correct or _ran(row, "correctness") or _build_failed(row)


def sass_known(row: TurnRow) -> bool:
    """SASS-verified is correct and the family proven executed: known once either answer is in."""
    return row.sass_verified or (correctness_known(row) and (not row.correct or _ran(row, "dynamic")))


def answered(rows: Sequence[TurnRow], hit: str, known: Callable[[TurnRow], bool]) -> bool | None:
    """Whether some row has `hit`; None where no row has it and some row's answer is unknown."""
    if any(getattr(r, hit) for r in rows):
        return True
    return False if all(known(r) for r in rows) else None


def _count(answers: Sequence[bool | None]) -> int | None:
    return None if None in answers else sum(bool(a) for a in answers)


def best_speedup(rows: Iterable[TurnRow]) -> float | None:
    """The largest speedup of a correct turn (a speedup is only recorded for a correct, timed turn)."""
    timed = [row.speedup for row in rows if row.correct and row.speedup is not None]
    return max(timed) if timed else None


def _rate(count: int | None, n: int) -> tuple[float | None, tuple[float, float] | None]:
    if count is None or n == 0:
        return None, None
    return count / n, wilson(count, n)


def _seed(cell: Cell, limit: int) -> int:
    """A bootstrap seed of the cell itself, so an interval does not depend on what else is reported."""
    digest = hashlib.sha256("\0".join([*cell, str(limit)]).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _sum(values: list[float | int | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def cell_metrics(
    cell: Cell, trajectories: Sequence[TrajectoryRecord], limit: int, budget: int | None = None
) -> CellMetrics:
    """The cell's metrics at T = `limit`; past `budget` (the turns its runs allowed) nothing is measured."""
    finished = [t for t in trajectories if t.finished]
    n = len(finished)
    firsts = [_first(t.rows, limit) for t in finished]
    beyond = budget is not None and limit > budget
    correct = None if beyond else _count([answered(rows, "correct", correctness_known) for rows in firsts])
    sass = None if beyond else _count([answered(rows, "sass_verified", sass_known) for rows in firsts])
    every_row = [r for rows in firsts for r in rows]
    static_known = all(r.static_passed is not None for r in every_row)
    static = sum(any(bool(r.static_passed) for r in rows) for rows in firsts) if static_known else None
    # No correctness measured, no speedup either: an empty list would read as "none was correct".
    bests = (
        [b for b in (best_speedup(rows) for rows in firsts) if b is not None] if correct is not None else []
    )
    fast = {f"{p:g}": (sum(b >= p for b in bests) / n if n and correct is not None else None) for p in FAST_P}
    failures = Counter(r.status for r in every_row if r.status != "passed")
    tokens = _sum([r.tokens for r in every_row])
    cost = _sum([r.cost_usd for r in every_row])
    correct_rate, correct_ci = _rate(correct, n)
    sass_rate, sass_ci = _rate(sass, n)
    static_rate, static_ci = _rate(static, n)
    sources = {t.source for t in trajectories}
    return CellMetrics(
        run=cell[0],
        model=cell[1],
        target=cell[2],
        task=cell[3],
        variant=cell[4],
        source=sources.pop() if len(sources) == 1 else "mixed",
        turn_limit=limit,
        n_trajectories=n,
        n_unfinished=len(trajectories) - n,
        correct=correct,
        correct_rate=correct_rate,
        correct_ci=correct_ci,
        sass_verified=sass,
        sass_verified_rate=sass_rate,
        sass_verified_ci=sass_ci,
        static_passed=static,
        static_passed_rate=static_rate,
        static_passed_ci=static_ci,
        best_speedup=max(bests) if bests else None,
        geomean_speedup=geomean(bests),
        geomean_speedup_ci=bootstrap_geomean(bests, _seed(cell, limit)),
        n_timed=len(bests),
        fast_p=fast,
        pass_at_k={str(k): pass_at_k(n, correct, k) for k in PASS_K if k <= n and correct is not None},
        turns_evaluated=len(every_row),
        turn_budget=budget,
        failure_mix=dict(sorted(failures.items())),
        tokens=int(tokens) if tokens is not None else None,
        cost_usd=cost,
        tokens_per_correct=tokens / correct if tokens is not None and correct else None,
        cost_per_correct=cost / correct if cost is not None and correct else None,
    )


def group_cells(records: Iterable[TrajectoryRecord]) -> dict[Cell, list[TrajectoryRecord]]:
    cells: dict[Cell, list[TrajectoryRecord]] = {}
    for record in records:
        cells.setdefault(record.key.cell, []).append(record)
    return cells


def compute(
    records: Iterable[TrajectoryRecord],
    turn_limits: Sequence[int] = DEFAULT_TURNS,
    budgets: Mapping[str, int] | None = None,
) -> list[CellMetrics]:
    """One `CellMetrics` per cell and turn limit, cells in key order, limits as given; `budgets` are the
    runs' turn budgets (a run not named there has none: every T is reported)."""
    cells = group_cells(records)
    known = budgets or {}
    return [
        cell_metrics(cell, cells[cell], limit, known.get(cell[0]))
        for cell in sorted(cells)
        for limit in turn_limits
    ]
