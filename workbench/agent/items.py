"""Live loop items that are shown but not saved: streamed text, evaluation progress, model retries.

The loop yields these between the session events it saves (`workbench.session.events`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from workbench.evaluate.request import Progress
from workbench.session.events import Event


class _Live(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    turn: int


class TextDelta(_Live):
    """A piece of the model's answer as it streams in (the whole answer follows as a `Message`)."""

    kind: Literal["text_delta"] = "text_delta"
    text: str


class EvalProgress(_Live):
    """A stage of the turn's evaluation starting or finishing."""

    kind: Literal["eval_progress"] = "eval_progress"
    progress: Progress


class ModelRetry(_Live):
    """The model call failed with a transient error and is retried; text streamed so far is void."""

    kind: Literal["model_retry"] = "model_retry"
    attempt: int
    delay_s: float
    error: str


LiveItem = TextDelta | EvalProgress | ModelRetry
LoopItem = Event | LiveItem
