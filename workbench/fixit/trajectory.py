"""Sessions as trajectories: the evaluated turns of each, found in files or in a sweep folder.

A sweep folder is read through its session files alone (found recursively; the sweep's own results
store is not needed), so any folder of sessions is a sweep.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import UserError
from workbench.evaluate.result import EvalResult, Status
from workbench.fixit.categories import NOT_FAILURES
from workbench.session.events import Candidate, Evaluation, Event, Message, RepairMark, SessionStart
from workbench.session.log import read_session

STATIC = "static"


@dataclass(frozen=True)
class SessionFile:
    path: Path
    name: str  # what a row calls it: relative to the folder it was found in, or the file's own name


@dataclass(frozen=True)
class Turn:
    """One evaluated turn: the source the evaluator judged and its verdict (no number: a teacher's fix)."""

    number: int | None
    source: str
    origin: str
    result: EvalResult

    @property
    def sha256(self) -> str:
        return self.result.source_sha256

    @property
    def proof(self) -> str | None:
        """`gpu`: every tier passed on a GPU executor; `static`: build and static passed on the static
        executor (not a pass, kept only when asked for); None: no pass."""
        return proof(self.result)

    @property
    def failed(self) -> bool:
        return self.result.status not in NOT_FAILURES


def proof(result: EvalResult) -> str | None:
    if result.status == Status.passed and result.executor != STATIC:
        return "gpu"
    if result.status == Status.not_run and result.executor == STATIC and result.static_passed:
        return STATIC
    return None


@dataclass(frozen=True)
class Trajectory:
    file: SessionFile
    start: SessionStart
    task_prompt: str | None
    turns: tuple[Turn, ...]
    marks: tuple[RepairMark, ...]

    def turn(self, number: int) -> Turn | None:
        return next((t for t in self.turns if t.number == number), None)


def evaluated_turns(events: Sequence[Event]) -> list[Turn]:
    """Each evaluation with the candidate it judged (the latest one of its turn), in session order."""
    candidates: dict[int, Candidate] = {}
    turns: dict[int, Turn] = {}
    for event in events:
        if isinstance(event, Candidate) and event.turn is not None:
            candidates[event.turn] = event
        elif isinstance(event, Evaluation) and event.turn is not None:
            candidate = candidates.get(event.turn)
            if candidate is not None and candidate.sha256 == event.result.source_sha256:
                turns[event.turn] = Turn(event.turn, candidate.source, candidate.origin, event.result)
    return [turns[number] for number in sorted(turns)]


def load(file: SessionFile) -> Trajectory:
    read = read_session(file.path)
    # The first user message is the task as the agent read it.
    task_prompt = next(
        (e.content for e in read.events if isinstance(e, Message) and e.role == "user" and e.turn is None),
        None,
    )
    marks = tuple(e for e in read.events if isinstance(e, RepairMark))
    return Trajectory(file, read.start, task_prompt, tuple(evaluated_turns(read.events)), marks)


def _is_session(path: Path) -> bool:
    """Whether the file's first line is a session start (a sweep folder holds other JSON lines too)."""
    try:
        with path.open("rb") as handle:
            first = json.loads(handle.readline() or b"null")
    except (OSError, ValueError):
        return False
    return isinstance(first, dict) and first.get("type") == "session_start"


def find_sessions(paths: Sequence[Path]) -> tuple[list[SessionFile], int]:
    """The session files named, and those found under the folders named; and how many other .jsonl
    files the folders held. A file named that is no session is bad input."""
    if not paths:
        raise UserError("name at least one session file or sweep folder")
    found: list[SessionFile] = []
    skipped = 0
    for path in paths:
        if path.is_dir():
            for inner in sorted(path.rglob("*.jsonl")):
                if inner.is_file() and _is_session(inner):
                    found.append(SessionFile(inner, inner.relative_to(path).as_posix()))
                else:
                    skipped += 1
        elif not path.exists():
            raise UserError(f"{path}: no such file or folder")
        elif not _is_session(path):
            raise UserError(f"{path}: not a session file (no session_start line)")
        else:
            found.append(SessionFile(path, path.name))
    if not found:  # an empty dataset from a mistyped folder would look like a finished export
        others = f" ({skipped} other .jsonl files)" if skipped else ""
        raise UserError(f"no session files in {', '.join(str(p) for p in paths)}{others}")
    return found, skipped
