"""Pairs of turns of one trajectory: a failure and the pass that fixed it, or a pass and a faster one.

A person's marks (session events) add pairs the rules would not find, or take found ones out.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Literal

from workbench.fixit.categories import IMPROVEMENT, category
from workbench.fixit.trajectory import Trajectory, Turn
from workbench.session.events import RepairMark

Kind = Literal["repair", "improvement"]
Failures = Literal["all", "last"]
FAILURES: tuple[Failures, ...] = ("all", "last")
Origin = Literal["trajectory", "teacher", "marked"]


@dataclass(frozen=True)
class Pair:
    trajectory: Trajectory
    failed: Turn
    fixed: Turn
    kind: Kind
    origin: Origin
    marked: bool = False
    teacher: str | None = None  # the repair teacher that wrote `fixed`
    teacher_try: int | None = None

    @property
    def category(self) -> str:
        return IMPROVEMENT if self.kind == "improvement" else category(self.failed.result.status)

    @property
    def key(self) -> tuple[str, str]:
        """What dedup compares: the two sources."""
        return self.failed.sha256, self.fixed.sha256


@dataclass(frozen=True)
class MineOptions:
    failures: Failures = "all"  # every failure before a fix, or the last one only
    improvements: bool = False
    min_gain: float = 0.02  # an improvement is at least this much faster (relative speedup)


@dataclass
class Mined:
    pairs: list[Pair] = field(default_factory=list)
    unfixed: list[tuple[Trajectory, Turn]] = field(default_factory=list)  # for the repair teacher
    notes: Counter[str] = field(default_factory=Counter)


TurnPair = tuple[int | None, int | None]


def _repairs(trajectory: Trajectory, options: MineOptions) -> tuple[dict[TurnPair, Pair], list[Turn]]:
    found: dict[TurnPair, Pair] = {}
    pending: list[Turn] = []
    for turn in trajectory.turns:
        if turn.proof is not None:
            for failed in pending[-1:] if options.failures == "last" else pending:
                found[(failed.number, turn.number)] = Pair(trajectory, failed, turn, "repair", "trajectory")
            pending = []
        elif turn.failed:
            pending.append(turn)
    return found, pending[-1:] if options.failures == "last" else pending


def _improvements(trajectory: Trajectory, min_gain: float) -> dict[TurnPair, Pair]:
    timed = [(t, t.result.speedup) for t in trajectory.turns if t.proof == "gpu" and t.result.speedup]
    found: dict[TurnPair, Pair] = {}
    for index, (slower, speedup) in enumerate(timed):
        faster = next((t for t, s in timed[index + 1 :] if s > speedup * (1 + min_gain)), None)
        if faster is not None:
            found[(slower.number, faster.number)] = Pair(
                trajectory, slower, faster, "improvement", "trajectory"
            )
    return found


def _apply_marks(trajectory: Trajectory, found: dict[TurnPair, Pair], notes: Counter[str]) -> None:
    latest: dict[TurnPair, RepairMark] = {(m.failed_turn, m.fixed_turn): m for m in trajectory.marks}
    for key, mark in latest.items():
        if not mark.marked:
            if found.pop(key, None) is not None:
                notes["pairs unmarked by a person"] += 1
            continue
        if key in found:
            found[key] = replace(found[key], marked=True)
            continue
        failed, fixed = trajectory.turn(mark.failed_turn), trajectory.turn(mark.fixed_turn)
        if (
            failed is None
            or fixed is None
            or fixed.proof is None
            or not (failed.failed or failed.proof == "gpu")
        ):
            notes[
                "marks skipped (the later turn did not pass, or the earlier is neither failed nor passed)"
            ] += 1
            continue
        kind: Kind = "repair" if failed.failed else "improvement"
        found[key] = Pair(trajectory, failed, fixed, kind, "marked", marked=True)


def mine(trajectories: list[Trajectory], options: MineOptions) -> Mined:
    mined = Mined()
    for trajectory in trajectories:
        found, unfixed = _repairs(trajectory, options)
        if options.improvements:
            found.update(_improvements(trajectory, options.min_gain))
        _apply_marks(trajectory, found, mined.notes)
        mined.pairs.extend(found[key] for key in sorted(found, key=lambda k: (k[0] or 0, k[1] or 0)))
        mined.unfixed.extend((trajectory, turn) for turn in unfixed)
    return mined


def dedup(pairs: list[Pair]) -> tuple[list[Pair], int]:
    """The first pair of each (failed source, fixed source); and how many repeats were dropped."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for pair in pairs:
        if pair.key not in seen:
            seen.add(pair.key)
            kept.append(pair)
    return kept, len(pairs) - len(kept)
