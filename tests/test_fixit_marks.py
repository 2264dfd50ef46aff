"""Repair marks: a person's mark (or unmark) of two turns, a `repair_mark` event appended to the
session; the export follows the last mark of each pair; the rest of the workbench reads such files."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fixit_support import LADDER, shipped, write_session

from workbench.errors import UserError
from workbench.fixit.export import ExportOptions, export
from workbench.fixit.marks import mark_pair, marks_of, repair_mark
from workbench.session.events import RepairMark
from workbench.session.interop import export_trajectory, import_trajectory
from workbench.session.log import fork_session, read_session
from workbench.tui.model import SessionView

PTXWB = Path(sys.executable).parent / "ptxwb"
LADDER_TURNS = shipped(LADDER)
NO_GMMA, SLOW, FAST = (LADDER_TURNS.turns[n] for n in (1, 2, 3))


@pytest.fixture
def session(tmp_path: Path) -> Path:
    """Turn 1 lacks wgmma, turn 2 fixes it (0.548x), turn 3 is faster (0.897x), turn 4 fails again."""
    return write_session(tmp_path / "s.jsonl", LADDER_TURNS, [NO_GMMA, SLOW, FAST, NO_GMMA.variant("again")])


def pairs(session: Path, out: Path) -> list[tuple[int, int, str, bool]]:
    asyncio.run(export([session], out, ExportOptions()))
    rows = [json.loads(line)["metadata"] for line in out.read_text().splitlines()]
    return [(m["failed"]["turn"], m["fixed"]["turn"], m["origin"], m["marked"]) for m in rows]


def test_marks_add_and_take_out_pairs_and_the_last_mark_wins(tmp_path: Path, session: Path) -> None:
    assert pairs(session, tmp_path / "0.jsonl") == [(1, 2, "trajectory", False)]
    mark_pair(session, 1, 3, note="the faster fix teaches more")
    mark_pair(session, 2, 3)  # an improvement pair, kept though improvements were not asked for
    mark_pair(session, 1, 2, marked=False)
    assert pairs(session, tmp_path / "1.jsonl") == [(1, 3, "marked", True), (2, 3, "marked", True)]
    card = (tmp_path / "1.md").read_text()
    assert "1 pairs unmarked by a person" in card and "Pairs marked by a person: 2" in card
    mark_pair(session, 1, 2)
    assert pairs(session, tmp_path / "2.jsonl")[0] == (1, 2, "trajectory", True)

    events = read_session(session).events
    assert marks_of(events) == {(1, 3): True, (2, 3): True, (1, 2): True}
    [first, *_] = [e for e in events if isinstance(e, RepairMark)]
    assert (first.turn, first.by, first.note) == (3, "human", "the faster fix teaches more")


@pytest.mark.parametrize(
    ("failed", "fixed", "message"),
    [
        (2, 1, "must come before the fixed turn"),
        (1, 9, "turn 9 has no evaluated kernel (evaluated turns: [1, 2, 3, 4])"),
        (1, 4, "turn 4 did not pass (static_missing_family)"),
    ],
)
def test_a_pair_that_cannot_be_an_example_is_refused(
    session: Path, failed: int, fixed: int, message: str
) -> None:
    before = session.read_bytes()
    with pytest.raises(UserError, match=re.escape(message)):
        mark_pair(session, failed, fixed)
    assert session.read_bytes() == before


def test_a_cut_session_is_not_appended_to(session: Path) -> None:
    session.write_bytes(session.read_bytes() + b'{"type": "mess')
    with pytest.raises(UserError, match="ends in a cut line"):
        mark_pair(session, 1, 2)


def test_the_event_for_a_live_writer_and_the_cli(session: Path) -> None:
    # A view that holds the events (the TUI's) makes the event and appends it through its own writer.
    event = repair_mark(read_session(session).events, 2, 3, by="workbench")
    assert (event.failed_turn, event.fixed_turn, event.marked, event.by) == (2, 3, True, "workbench")
    done = subprocess.run(
        [str(PTXWB), "fixit", "mark", str(session), "--failed", "1", "--fixed", "3", "--unmark"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and "turns 1 -> 3 unmarked as a repair example" in done.stdout
    bad = subprocess.run(
        [str(PTXWB), "fixit", "mark", str(session), "--failed", "3", "--fixed", "4"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "did not pass" in bad.stderr


def test_a_marked_session_reads_forks_and_round_trips_everywhere(tmp_path: Path, session: Path) -> None:
    mark_pair(session, 1, 2)
    mark_pair(session, 1, 3)
    read = read_session(session)
    view = SessionView.from_events(read.events)  # the TUI's model of a session
    assert sorted(view.turns) == [1, 2, 3, 4]
    # A fork at turn 2 keeps the marks of the turns it keeps.
    fork = fork_session(session, 2, tmp_path / "fork.jsonl", "fork-1")
    assert marks_of(read_session(fork).events) == {(1, 2): True}
    # mini-swe-agent export and import keep them too.
    back = import_trajectory(export_trajectory(read, tmp_path / "s.traj.json"), tmp_path / "back.jsonl")
    assert marks_of(read_session(back).events) == {(1, 2): True, (1, 3): True}
    shown = subprocess.run(
        [str(PTXWB), "session", "show", str(session), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0 and json.loads(shown.stdout)["events"]["repair_mark"] == 2
