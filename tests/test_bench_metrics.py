"""The cell metrics on hand-made trajectories, every expected value worked out by hand."""

from __future__ import annotations

import math

import pytest

from workbench.bench.metrics import cell_metrics, compute
from workbench.bench.records import TrajectoryRecord, TurnRow
from workbench.bench.spec import TrajectoryKey

CELL = ("run", "model", "hopper", "gemm", "default")


def row(turn: int, status: str, *, correct: bool = False, sass: bool = False, static: bool | None = False,
        speedup: float | None = None) -> TurnRow:  # fmt: skip
    return TurnRow(turn=turn, status=status, correct=correct, sass_verified=sass, static_passed=static,
                   speedup=speedup, prompt_tokens=100, completion_tokens=10, cost_usd=0.01)  # fmt: skip


def trajectory(name: str, rows: list[TurnRow], finished: bool = True) -> TrajectoryRecord:
    return TrajectoryRecord(TrajectoryKey(*CELL, name), finished, "turn_limit" if finished else None, rows)


def cell() -> list[TrajectoryRecord]:
    return [
        # A: fails to build, then correct without the family (0.5×), then fully verified (1.2×).
        trajectory("a", [row(1, "compile_error"),
                         row(2, "dynamic_not_executed", correct=True, static=True, speedup=0.5),
                         row(3, "passed", correct=True, sass=True, static=True, speedup=1.2)]),
        # B: verified at once, 0.9×.
        trajectory("b", [row(1, "passed", correct=True, sass=True, static=True, speedup=0.9)]),
        # C: never correct; its last status is one this code does not know.
        trajectory("c", [row(1, "incorrect_numerical", static=True), row(2, "runtime_error"),
                         row(3, "some_new_status", speedup=3.0)]),
        # D: cut short by a crash: not counted, reported as unfinished.
        trajectory("d", [row(1, "passed", correct=True, sass=True, static=True, speedup=5.0)], finished=False),
    ]  # fmt: skip


def test_turn_limit_one() -> None:
    m = cell_metrics(CELL, cell(), 1)
    assert (m.n_trajectories, m.n_unfinished) == (3, 1)
    assert (m.correct, m.sass_verified, m.static_passed) == (1, 1, 2)  # B; B; B and C
    assert m.correct_rate == pytest.approx(1 / 3)
    assert m.best_speedup == pytest.approx(0.9)
    assert m.geomean_speedup == pytest.approx(0.9) and m.n_timed == 1
    assert m.fast_p == {"0": pytest.approx(1 / 3), "0.5": pytest.approx(1 / 3), "0.8": pytest.approx(1 / 3),
                        "1": 0.0}  # fmt: skip
    assert m.pass_at_k == {"1": pytest.approx(1 / 3)}  # k = 5, 10 exceed n = 3
    assert m.failure_mix == {"compile_error": 1, "incorrect_numerical": 1}
    assert m.turns_evaluated == 3


def test_turn_limit_two_counts_a_correct_turn_without_the_family() -> None:
    m = cell_metrics(CELL, cell(), 2)
    assert (m.correct, m.sass_verified) == (2, 1)  # A's turn 2 is correct but not verified
    assert m.best_speedup == pytest.approx(0.9)
    assert m.geomean_speedup == pytest.approx(math.sqrt(0.5 * 0.9))
    assert m.fast_p["0.5"] == pytest.approx(2 / 3) and m.fast_p["0.8"] == pytest.approx(1 / 3)


def test_turn_limit_three_and_the_spend_per_correct_trajectory() -> None:
    m = cell_metrics(CELL, cell(), 3)
    assert (m.correct, m.sass_verified, m.static_passed) == (2, 2, 3)
    # The incorrect turn's 3.0 is no speedup: only correct turns count.
    assert m.best_speedup == pytest.approx(1.2)
    assert m.geomean_speedup == pytest.approx(math.sqrt(1.2 * 0.9))
    low, high = m.geomean_speedup_ci  # type: ignore[misc]
    assert 0.9 <= low <= m.geomean_speedup <= high <= 1.2
    assert m.fast_p["1"] == pytest.approx(1 / 3) and m.fast_p["0.8"] == pytest.approx(2 / 3)
    assert m.failure_mix == {"compile_error": 1, "dynamic_not_executed": 1, "incorrect_numerical": 1,
                             "runtime_error": 1, "some_new_status": 1}  # fmt: skip
    assert m.turns_evaluated == 7
    assert m.tokens == 7 * 110 and m.tokens_per_correct == pytest.approx(385)
    assert m.cost_usd == pytest.approx(0.07) and m.cost_per_correct == pytest.approx(0.035)
    assert m.correct_ci == (pytest.approx(0.2077, abs=5e-4), pytest.approx(0.9385, abs=5e-4))


def test_unknown_static_tier_and_empty_cells() -> None:
    imported = [trajectory("x", [row(1, "passed", correct=True, sass=True, static=None, speedup=1.0)])]
    m = cell_metrics(CELL, imported, 8)
    assert m.static_passed is None and m.static_passed_rate is None and m.static_passed_ci is None
    assert m.correct == 1 and m.pass_at_k == {"1": 1.0}
    only_unfinished = cell_metrics(CELL, [trajectory("y", [], finished=False)], 8)
    assert only_unfinished.n_trajectories == 0 and only_unfinished.correct_rate is None
    assert only_unfinished.best_speedup is None and only_unfinished.fast_p["0"] is None


def test_compute_gives_one_cell_per_limit_and_a_stable_bootstrap() -> None:
    other = ("run", "model-b", "hopper", "gemm", "default")
    records = [
        *cell(),
        TrajectoryRecord(TrajectoryKey(*other, "z"), True, "turn_limit", [row(1, "compile_error")]),
    ]
    cells = compute(records, (1, 3))
    assert [(c.model, c.turn_limit) for c in cells] == [
        ("model", 1),
        ("model", 3),
        ("model-b", 1),
        ("model-b", 3),
    ]
    # The interval depends on the cell alone, not on what else is reported beside it.
    alone = compute(cell(), (3,))[0]
    assert alone.geomean_speedup_ci == cells[1].geomean_speedup_ci
