"""Sessions for the Fixit tests, made from the shipped sessions' real turns (H200 verdicts).

A turn here is the events of one recorded turn (answer, candidate, verdict, feedback). `variant` gives a
turn another source (a comment line appended, its hashes updated) so trajectories can differ; `static`
turns a GPU verdict into what the static executor reports for the same kernel.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from pathlib import Path

from workbench.evaluate.result import EvalResult, Stages, Status
from workbench.paths import sessions_dir
from workbench.session.events import Candidate, Evaluation, Event, Message, SessionEnd, SessionStart
from workbench.session.log import SessionWriter, read_session

CAUSAL = "mha_with_lse_d128_causal_fix_h200.jsonl"
LADDER = "gemm_n7168_k5120_ladder_h200.jsonl"


@dataclass(frozen=True)
class RecordedTurn:
    candidate: Candidate
    result: EvalResult
    answer: str

    def variant(self, tag: str) -> RecordedTurn:
        source = self.candidate.source + f"// variant {tag}\n"
        digest = hashlib.sha256(source.encode()).hexdigest()
        candidate = self.candidate.model_copy(update={"source": source, "sha256": digest})
        result = self.result.model_copy(update={"source_sha256": digest})
        return RecordedTurn(candidate, result, self.answer)

    def with_result(self, **changes: object) -> RecordedTurn:
        return RecordedTurn(self.candidate, self.result.model_copy(update=changes), self.answer)

    def static(self) -> RecordedTurn:
        """The verdict of the static executor: build and static as recorded, the GPU tiers not run."""
        stages = Stages(build=self.result.stages.build, static=self.result.stages.static)
        failing = [stage.status for stage in (stages.build, stages.static) if stage.status != Status.passed]
        status = failing[0] if failing else Status.not_run
        return self.with_result(executor="static", device=None, status=status, stages=stages)


@dataclass(frozen=True)
class Shipped:
    start: SessionStart
    preamble: list[Message]
    turns: dict[int, RecordedTurn]


def shipped(name: str) -> Shipped:
    read = read_session(sessions_dir() / name)
    preamble = [e for e in read.events if isinstance(e, Message) and e.turn is None]
    candidates = {e.turn: e for e in read.events if isinstance(e, Candidate)}
    answers = {e.turn: e.content for e in read.events if isinstance(e, Message) and e.role == "assistant"}
    turns = {
        e.turn: RecordedTurn(candidates[e.turn], e.result, answers[e.turn])
        for e in read.events
        if isinstance(e, Evaluation) and e.turn is not None
    }
    return Shipped(read.start, preamble, turns)


def write_session(
    path: Path, base: Shipped, turns: list[RecordedTurn], extra: list[Event] | None = None, **start: object
) -> Path:
    """A session of `turns` in order (numbered from 1) on `base`'s start and preamble."""
    header = base.start.model_copy(update={"session_id": uuid.uuid4().hex, **start})
    with SessionWriter(path, header) as writer:
        for message in base.preamble:
            writer.append(message)
        for number, turn in enumerate(turns, 1):
            writer.append(Message(turn=number, role="assistant", content=turn.answer, source="scripted"))
            writer.append(turn.candidate.model_copy(update={"turn": number}))
            writer.append(Evaluation(turn=number, result=turn.result))
            writer.append(
                Message(turn=number, role="user", content=f"Turn {number} verdict", source="workbench")
            )
        for event in extra or []:
            writer.append(event)
        writer.append(SessionEnd(turn=len(turns) or None, reason="turn_limit"))
    return path
