"""Counts of a Fixit dataset (`ptxwb fixit stats`) and its dataset card (Markdown, Hugging Face style)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel

from workbench.fixit.rows import Format, MessagesRow
from workbench.fixit.text import render

GROUPS = ("split", "kind", "category", "task", "target", "origin", "verified")


class Counts(BaseModel):
    rows: int
    sessions: int
    with_reasoning: int
    marked: int
    groups: dict[str, dict[str, int]]  # by split, kind, category, task, target, origin, verified
    devices: dict[str, int]
    evaluators: dict[str, int]  # the workbench version that judged each fixed kernel
    repair_teachers: dict[str, int]
    reasoning_teachers: dict[str, int]
    mean_prompt_chars: float
    mean_answer_chars: float

    def sections(self) -> list[tuple[str, dict[str, int]]]:
        """(title, value -> rows) for every grouping that has rows, in the order shown."""
        extra = [
            ("device", self.devices),
            ("judged by workbench", self.evaluators),
            ("repair teacher", self.repair_teachers),
            ("reasoning teacher", self.reasoning_teachers),
        ]
        return [(title, tally) for title, tally in [*self.groups.items(), *extra] if tally]


def _tally(values: Sequence[str]) -> dict[str, int]:
    return dict(Counter(value for value in values if value).most_common())


def counts(rows: Sequence[MessagesRow]) -> Counts:
    meta = [row.metadata for row in rows]
    total = max(len(rows), 1)
    return Counts(
        rows=len(rows),
        sessions=len({m.session_id for m in meta}),
        with_reasoning=sum(1 for m in meta if m.reasoning),
        marked=sum(1 for m in meta if m.marked),
        groups={group: _tally([str(getattr(m, group)) for m in meta]) for group in GROUPS},
        devices=_tally([m.fixed.device for m in meta]),
        evaluators=_tally([m.fixed.evaluator.workbench for m in meta]),
        repair_teachers=_tally([m.teachers.repair for m in meta]),
        reasoning_teachers=_tally([m.teachers.reasoning for m in meta]),
        mean_prompt_chars=sum(sum(len(x.content) for x in r.prompt) for r in rows) / total,
        mean_answer_chars=sum(len(r.messages[-1].content) for r in rows) / total,
    )


_FORMS = {
    "messages": '`{"messages": [system, user, assistant], "metadata": {…}}`',
    "prompt-completion": '`{"prompt": [system, user], "completion": [assistant], "metadata": {…}}`',
}
_HF_SPLIT = {"train": "train", "eval": "test"}


def card(files: dict[str, str], rows: Sequence[MessagesRow], fmt: Format, made: list[str]) -> str:
    """`files`: split -> file name (never a path); `made`: lines on how the rows were made."""
    tally = counts(rows)
    table = ["| by | value | rows |", "|---|---|---:|"]
    for title, values in tally.sections():
        table.extend(f"| {title} | {value} | {count} |" for value, count in values.items())
    return (
        render(
            "card.md",
            data_files="\n".join(f"  - split: {_HF_SPLIT[s]}\n    path: {name}" for s, name in files.items()),
            loader=", ".join(f'"{_HF_SPLIT[s]}": "{name}"' for s, name in files.items()),
            rows=tally.rows,
            sessions=tally.sessions,
            form=_FORMS[fmt],
            with_reasoning=tally.with_reasoning,
            marked=tally.marked,
            gpu=tally.groups["verified"].get("gpu", 0),
            static=tally.groups["verified"].get("static", 0),
            table="\n".join(table),
            made="\n".join(f"- {line}" for line in made),
        )
        + "\n"
    )
