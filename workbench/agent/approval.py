"""What a person (or the default) decides about each turn: the `Approver` the loop asks."""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, model_validator

DecisionAction = Literal["run", "edit", "replace", "skip", "stop"]


class Decision(BaseModel):
    """The verdict on a candidate before it is evaluated.

    `run` evaluates the model's source as is; `edit` evaluates the person's edit of it (the session keeps
    both); `replace` evaluates the person's own source; `skip` evaluates nothing this turn; `stop` ends
    the session.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: DecisionAction
    source: str | None = None
    note: str = ""
    by: Literal["human", "workbench"] = "human"

    @model_validator(mode="after")
    def _source_iff_changed(self) -> Decision:
        needs_source = self.action in ("edit", "replace")
        if needs_source and not (self.source and self.source.strip()):
            raise ValueError(f"a {self.action!r} decision needs the new source")
        if not needs_source and self.source is not None:
            raise ValueError(f"a {self.action!r} decision takes no source")
        return self

    @classmethod
    def run(cls, by: Literal["human", "workbench"] = "human") -> Decision:
        return cls(action="run", by=by)

    @classmethod
    def edit(cls, source: str, note: str = "") -> Decision:
        return cls(action="edit", source=source, note=note)

    @classmethod
    def replace(cls, source: str, note: str = "") -> Decision:
        return cls(action="replace", source=source, note=note)

    @classmethod
    def skip(cls, note: str = "") -> Decision:
        return cls(action="skip", note=note)

    @classmethod
    def stop(cls, note: str = "") -> Decision:
        return cls(action="stop", note=note)


class Approver(Protocol):
    """Asked by the loop at the two points where a person may step in."""

    async def before_turn(self, turn: int) -> bool:
        """Called before the model is asked for turn `turn`; a UI may wait here (pause/step). False stops."""
        ...

    async def review(self, turn: int, source: str) -> Decision:
        """Called with the extracted candidate before it is evaluated."""
        ...


class RunEverything:
    """The default approver: never pauses, evaluates every candidate as the model wrote it."""

    async def before_turn(self, turn: int) -> bool:
        return True

    async def review(self, turn: int, source: str) -> Decision:
        return Decision.run(by="workbench")
