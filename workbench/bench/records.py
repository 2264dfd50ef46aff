"""What the store holds: one `TurnRow` per turn, one `TrajectoryRecord` per trajectory.

Rows are read from a session file (`from_session`); the session stays the source of truth. Statuses
are kept as text: a status this code does not know is still a failure of its tier, never an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from workbench.bench.spec import TrajectoryKey
from workbench.evaluate.result import EvalResult
from workbench.session.events import Candidate, Control, Evaluation, Message, SessionEnd
from workbench.session.log import SessionRead

NO_CODE = "no_code"  # the answer held no kernel to evaluate
SKIPPED = "skipped"
INTERRUPTED = "stopped_by_person"  # a sweep has no person: such an end is a killed or cancelled run


@dataclass(frozen=True)
class TurnRow:
    turn: int
    status: str
    correct: bool
    sass_verified: bool
    static_passed: bool | None
    """None where it is not known (PTXBench's data has no static tier)."""
    speedup: float | None = None
    tiers: dict[str, str] = field(default_factory=dict)
    tensor_share: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    latency_s: float | None = None
    source_sha256: str | None = None

    @property
    def tokens(self) -> int | None:
        if self.prompt_tokens is None and self.completion_tokens is None:
            return None
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)


@dataclass(frozen=True)
class TrajectoryRecord:
    key: TrajectoryKey
    finished: bool
    end_reason: str | None
    rows: list[TurnRow]
    source: str = "sweep"  # or "ptxbench"
    session_path: str | None = None


def ended(read: SessionRead) -> SessionEnd | None:
    """The session's end, or None for one cut short (killed) or interrupted (cancelled)."""
    end = read.events[-1] if read.events else None
    if not isinstance(end, SessionEnd) or end.reason == INTERRUPTED:
        return None
    return end


def row_from_result(turn: int, result: EvalResult, answer: Message | None) -> TurnRow:
    stages = result.stages
    return TurnRow(
        turn=turn,
        status=str(result.status.value),
        correct=result.correct,
        sass_verified=result.sass_verified,
        static_passed=result.static_passed,
        speedup=result.speedup,
        tiers={name: str(stage.status.value) for name, stage in stages.in_order()},
        tensor_share=stages.dynamic.tensor_share,
        source_sha256=result.source_sha256,
        **_usage(answer),
    )


class _Usage(TypedDict, total=False):
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    latency_s: float | None


def _usage(answer: Message | None) -> _Usage:
    if answer is None:
        return {}
    usage = answer.usage
    return {
        "prompt_tokens": usage.prompt_tokens if usage else None,
        "completion_tokens": usage.completion_tokens if usage else None,
        "cost_usd": answer.cost_usd,
        "latency_s": answer.latency_s,
    }


def rows_from_session(read: SessionRead) -> list[TurnRow]:
    """One row per turn that got an answer: its verdict, or `no_code` / `skipped`."""
    answers: dict[int, Message] = {}
    verdicts: dict[int, EvalResult] = {}
    skipped: set[int] = set()
    candidates: set[int] = set()
    for event in read.events:
        if event.turn is None:
            continue
        if isinstance(event, Message) and event.role == "assistant":
            answers[event.turn] = event
        elif isinstance(event, Evaluation):
            verdicts[event.turn] = event.result
        elif isinstance(event, Candidate):
            candidates.add(event.turn)
        elif isinstance(event, Control) and event.action == "skip":
            skipped.add(event.turn)
    rows: list[TurnRow] = []
    for turn in sorted(set(answers) | set(verdicts)):
        answer = answers.get(turn)
        if turn in verdicts:
            rows.append(row_from_result(turn, verdicts[turn], answer))
        elif turn in candidates:
            continue  # evaluated when the file was cut: the turn is not over
        else:
            status = SKIPPED if turn in skipped else NO_CODE
            rows.append(
                TurnRow(
                    turn=turn,
                    status=status,
                    correct=False,
                    sass_verified=False,
                    static_passed=False,
                    **_usage(answer),
                )
            )
    return rows


def from_session(key: TrajectoryKey, read: SessionRead, session_path: str) -> TrajectoryRecord:
    end = ended(read)
    return TrajectoryRecord(
        key=key,
        finished=end is not None,
        end_reason=end.reason if end else None,
        rows=rows_from_session(read),
        session_path=session_path,
    )
