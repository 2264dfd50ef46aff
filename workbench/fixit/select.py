"""Which rows go where: a train/eval split by task (no task in both), and balanced sampling."""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from statistics import median

from workbench.errors import UserError
from workbench.fixit.rows import MessagesRow


def held_out_tasks(tasks: set[str], named: Sequence[str], fraction: float, seed: int) -> set[str]:
    """The tasks held out: those named, then more (in an order fixed by `seed`) up to `fraction` of all."""
    unknown = sorted(set(named) - tasks)
    if unknown:
        raise UserError(
            f"--eval-tasks: no pair has task {', '.join(unknown)} (tasks: {', '.join(sorted(tasks)) or 'none'})"
        )
    if not 0 <= fraction < 1:
        raise UserError(f"--eval-fraction must be at least 0 and below 1, not {fraction:g}")
    chosen = set(named)
    wanted = math.ceil(fraction * len(tasks))
    ordered = sorted(tasks - chosen, key=lambda task: hashlib.sha256(f"{seed}:{task}".encode()).hexdigest())
    chosen.update(ordered[: max(0, wanted - len(chosen))])
    if tasks and chosen == tasks:
        raise UserError(f"the split holds out every task ({len(tasks)}): none is left to train on")
    return chosen


def balance(rows: list[MessagesRow], per_group: int | None, seed: int) -> tuple[list[MessagesRow], int]:
    """At most `per_group` rows (default: the median group's size) of each (task, category), sampled
    with `seed`; the rows keep their order. Returns the rows kept and how many were left out."""
    groups: dict[tuple[str, str], list[int]] = {}
    for index, row in enumerate(rows):
        groups.setdefault((row.metadata.task, row.metadata.category), []).append(index)
    if not groups:
        return rows, 0
    cap = per_group or math.ceil(median(len(members) for members in groups.values()))
    rng = random.Random(seed)
    kept: set[int] = set()
    for key in sorted(groups):
        members = groups[key]
        kept.update(members if len(members) <= cap else rng.sample(members, cap))
    return [row for index, row in enumerate(rows) if index in kept], len(rows) - len(kept)
