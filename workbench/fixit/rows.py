"""Rows of a Fixit dataset: chat messages (TRL, axolotl, Hugging Face datasets) plus provenance metadata.

The prompt holds the task, the failed kernel and its feedback; the last, assistant, message holds the
reasoning (when there is one) and then the fixed kernel in one ```cuda block. The metadata says where
the row came from, closely enough to rebuild it: session, turns, sources' hashes, evaluator version,
executor and GPU, teacher models.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workbench.agent.models.base import ChatMessage
from workbench.agent.prompts import target_values
from workbench.errors import UserError
from workbench.evaluate.render import feedback_text
from workbench.evaluate.result import EvalResult
from workbench.fixit.hygiene import Host, public_executor, public_model, scrub
from workbench.fixit.pairs import Kind, Origin, Pair
from workbench.fixit.text import code_block, render
from workbench.fixit.trajectory import Trajectory, Turn
from workbench.jsonfile import read_text
from workbench.tasks import Target, get_target, resolve_task

Format = Literal["messages", "prompt-completion"]
FORMATS: tuple[Format, ...] = ("messages", "prompt-completion")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# No field is ever null: Arrow (Hugging Face datasets) types a column by its first rows or its first
# split, and a column null there cannot take a string later. Absent is "" or 0, as each field says.


class Evaluator(_Model):
    workbench: str = Field(description="the workbench version that judged it; '' if not recorded")
    result_schema: int
    toolchain: str = Field(default="", description="nvcc's version line; '' if nothing was built")


class Verdict(_Model):
    turn: int = Field(description="the session turn; 0 for a teacher's fix")
    status: str
    sha256: str = Field(description="of the kernel source, exactly as judged")
    origin: str = Field(description="model, edited, override (a person), or teacher")
    executor: str
    device: str = Field(description="the GPU; '' if no GPU tier ran")
    speedup: float = Field(description="over the baseline; 0 if not timed (or not correct)")
    evaluator: Evaluator


class Teachers(_Model):
    repair: str = ""
    repair_try: int = Field(default=0, description="which answer of the repair teacher passed; 0: none")
    reasoning: str = ""


class Metadata(_Model):
    id: str
    kind: Kind
    category: str
    task: str
    target: str
    workload: str = Field(description="the workload's uuid; '' if not recorded")
    split: Literal["train", "eval"] = "train"
    session: str = Field(description="the session file, relative to the folder it was read from")
    session_id: str
    agent_model: str
    origin: Origin
    marked: bool = Field(description="a person marked the pair as a repair example")
    verified: Literal["gpu", "static"] = Field(description="every tier on a GPU, or build + static only")
    failed: Verdict
    fixed: Verdict
    teachers: Teachers = Field(default_factory=Teachers)
    reasoning: str = Field(default="", description="the reasoning teacher's, also in the answer; '' if none")


class MessagesRow(_Model):
    messages: list[ChatMessage]
    metadata: Metadata

    @property
    def prompt(self) -> list[ChatMessage]:
        return self.messages[:-1]

    @property
    def fixed_block(self) -> str:
        """The assistant message without its reasoning: the fixed kernel's code block, byte for byte."""
        content = self.messages[-1].content
        return content.removeprefix(_reasoning_prefix(self.metadata.reasoning))

    def with_reasoning(self, reasoning: str, model: str) -> MessagesRow:
        answer = ChatMessage(role="assistant", content=_reasoning_prefix(reasoning) + self.fixed_block)
        metadata = self.metadata.model_copy(
            update={
                "reasoning": reasoning,
                "teachers": self.metadata.teachers.model_copy(update={"reasoning": public_model(model)}),
            }
        )
        return MessagesRow(messages=[*self.prompt, answer], metadata=metadata)

    def dump(self, fmt: Format) -> str:
        if fmt == "messages":
            return self.model_dump_json()
        return PromptCompletionRow(
            prompt=self.prompt, completion=self.messages[-1:], metadata=self.metadata
        ).model_dump_json()


class PromptCompletionRow(_Model):
    """TRL's conversational prompt-completion form of the same row."""

    prompt: list[ChatMessage]
    completion: list[ChatMessage] = Field(min_length=1, max_length=1)
    metadata: Metadata


def _reasoning_prefix(reasoning: str) -> str:
    return f"{reasoning}\n\n" if reasoning else ""


def _evaluator(result: EvalResult, workbench_version: str | None) -> Evaluator:
    return Evaluator(
        workbench=workbench_version or "",
        result_schema=result.schema_version,
        toolchain=result.stages.build.toolchain or "",
    )


def verdict(turn: Turn, workbench_version: str | None) -> Verdict:
    result = turn.result
    return Verdict(
        turn=turn.number or 0,
        status=str(result.status),
        sha256=turn.sha256,
        origin=turn.origin,
        executor=public_executor(result.executor),
        device=result.device or "",
        speedup=result.speedup or 0.0,
        evaluator=_evaluator(result, workbench_version),
    )


def task_prompt(trajectory: Trajectory, task: str, host: Host) -> str:
    """The task as the agent read it (a session without it: its name and target)."""
    text = trajectory.task_prompt or f"# Task `{task}` on {trajectory.start.target}"
    return scrub(text, host)


@cache
def judged_target(task: str, target: str) -> Target:
    """`target` as `task` is judged on it (the family it requires there); a task this catalogue cannot
    resolve (a definition file left on another machine) is named by the target's own family."""
    try:
        return resolve_task(task).target(target)
    except UserError:
        return get_target(target)


def prompt_messages(trajectory: Trajectory, failed: Turn, ask: str, host: Host) -> list[ChatMessage]:
    """What a repair (or a repair teacher) is asked: the task, the kernel and its verdict."""
    target = judged_target(failed.result.task, trajectory.start.target)
    user = render(
        "pair.md",
        task=task_prompt(trajectory, failed.result.task, host),
        kernel=code_block(failed.source),
        feedback=scrub(feedback_text(failed.result), host),
        ask=ask,
    )
    return [
        ChatMessage(role="system", content=render("system.md", **target_values(target))),
        ChatMessage(role="user", content=user),
    ]


def ask_for(pair_kind: Kind, failed: Turn) -> str:
    if pair_kind == "improvement":
        return render("ask_improvement.md", speedup=f"{failed.result.speedup or 0:.3f}")
    return render("ask_repair.md")


def row_id(pair: Pair) -> str:
    parts = [pair.trajectory.start.session_id, str(pair.failed.number), str(pair.fixed.number), *pair.key]
    return hashlib.sha256(":".join(parts).encode()).hexdigest()[:16]


def build_row(pair: Pair, host: Host, workbench_version: str) -> MessagesRow:
    trajectory = pair.trajectory
    session_version = trajectory.start.versions.get("workbench")
    # A teacher's fix was judged by this workbench; the session's turns by the one that recorded them.
    fixed_version = workbench_version if pair.origin == "teacher" else session_version
    prompt = prompt_messages(trajectory, pair.failed, ask_for(pair.kind, pair.failed), host)
    metadata = Metadata(
        id=row_id(pair),
        kind=pair.kind,
        category=pair.category,
        task=pair.failed.result.task,
        target=trajectory.start.target,
        workload=pair.failed.result.workload_uuid or "",
        session=trajectory.file.name,
        session_id=trajectory.start.session_id,
        agent_model=public_model(trajectory.start.model),
        origin=pair.origin,
        marked=pair.marked,
        verified="gpu" if pair.fixed.proof == "gpu" else "static",
        failed=verdict(pair.failed, session_version),
        fixed=verdict(pair.fixed, fixed_version),
        teachers=Teachers(
            repair=public_model(pair.teacher) if pair.teacher else "", repair_try=pair.teacher_try or 0
        ),
    )
    answer = ChatMessage(role="assistant", content=code_block(pair.fixed.source))
    return MessagesRow(messages=[*prompt, answer], metadata=metadata)


def _row(data: object) -> tuple[MessagesRow, Format]:
    if isinstance(data, dict) and "prompt" in data:
        other = PromptCompletionRow.model_validate(data)
        row = MessagesRow(messages=[*other.prompt, *other.completion], metadata=other.metadata)
        return row, "prompt-completion"
    return MessagesRow.model_validate(data), "messages"


def read_rows(path: Path) -> Iterator[tuple[MessagesRow, Format]]:
    """Each row of a Fixit file, in either form; a line that is neither is bad input, said with its number."""
    for number, line in enumerate(read_text(path, "Fixit JSONL file").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row, fmt = _row(json.loads(line))
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{number}: not JSON ({exc.msg})") from None
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"]) or "row"
            raise UserError(f"{path}:{number}: not a Fixit row ({where}: {error['msg']})") from None
        last = row.messages[-1] if row.messages else None
        if last is None or last.role != "assistant":
            raise UserError(f"{path}:{number}: the last message is not the assistant's")
        if not last.content.startswith(_reasoning_prefix(row.metadata.reasoning)):
            raise UserError(f"{path}:{number}: the assistant message does not begin with metadata.reasoning")
        yield row, fmt
