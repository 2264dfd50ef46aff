"""Marks: a person says two turns of a session are (or are not) a repair example; the marks are
`repair_mark` events appended to the session, and the last one of a pair wins."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from workbench.errors import UserError
from workbench.fixit.trajectory import evaluated_turns
from workbench.session.events import EVENT_ADAPTER, Event, RepairMark
from workbench.session.log import read_session
from workbench.session.portable_events import portable_event


def repair_mark(
    events: Sequence[Event],
    failed_turn: int,
    fixed_turn: int,
    *,
    marked: bool = True,
    by: Literal["human", "workbench"] = "human",
    note: str = "",
) -> RepairMark:
    """The mark event for two evaluated turns of these events; a pair that cannot be an example is bad
    input (an unmark is always allowed: it only takes a pair out)."""
    turns = {turn.number: turn for turn in evaluated_turns(events) if turn.number is not None}
    if failed_turn >= fixed_turn:
        raise UserError(f"the failed turn ({failed_turn}) must come before the fixed turn ({fixed_turn})")
    missing = [n for n in (failed_turn, fixed_turn) if n not in turns]
    if missing:
        raise UserError(
            f"turn {missing[0]} has no evaluated kernel (evaluated turns: {sorted(turns) or 'none'})"
        )
    failed, fixed = turns[failed_turn], turns[fixed_turn]
    if marked and fixed.proof is None:
        raise UserError(
            f"turn {fixed_turn} did not pass ({fixed.result.status}): a repair example's fixed kernel must pass"
        )
    if marked and not (failed.failed or failed.proof == "gpu"):
        raise UserError(
            f"turn {failed_turn} ({failed.result.status}) neither failed nor passed on a GPU: nothing to repair"
        )
    return RepairMark(
        turn=fixed_turn, failed_turn=failed_turn, fixed_turn=fixed_turn, marked=marked, by=by, note=note
    )


def marks_of(events: Sequence[Event]) -> dict[tuple[int, int], bool]:
    """(failed turn, fixed turn) -> marked, the last mark of each pair."""
    return {(e.failed_turn, e.fixed_turn): e.marked for e in events if isinstance(e, RepairMark)}


def mark_pair(
    path: Path, failed_turn: int, fixed_turn: int, *, marked: bool = True, note: str = ""
) -> RepairMark:
    """Append a person's mark (or unmark) of two turns to the session file, fsync'd; returns the event."""
    read = read_session(path)
    if read.dropped_bytes:
        raise UserError(f"{path}: ends in a cut line; a mark appended after it would not be read")
    mark = repair_mark(read.events, failed_turn, fixed_turn, marked=marked, note=note)
    line = EVENT_ADAPTER.dump_json(portable_event(mark)).decode("utf-8") + "\n"  # as SessionWriter would
    try:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise UserError(f"{path}: cannot write the mark ({exc.strerror})") from None
    return mark
