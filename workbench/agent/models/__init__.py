"""Models the loop can ask: litellm (any provider), a person, a replayed session, a script."""

from __future__ import annotations

from pathlib import Path

from workbench.agent.models.base import (
    Author,
    ChatMessage,
    Model,
    ModelError,
    ModelExhausted,
    PersonStopped,
    Reply,
    RetryNotice,
)
from workbench.agent.models.human import HumanModel, HumanWriter
from workbench.agent.models.litellm_model import LitellmModel
from workbench.agent.models.recorded import ReplayModel, ScriptedModel, resumed
from workbench.errors import UserError


def make_model(
    spec: str,
    *,
    human: HumanWriter | None = None,
    api_base: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    retries: int = 4,
    backoff_s: float = 2.0,
) -> Model:
    """`human`, `replay:SESSION`, `scripted:FILE`, `litellm:MODEL`, or any other litellm model string."""
    spec = spec.strip()
    if not spec:
        raise UserError("empty model string; try e.g. `openai/gpt-5`, `human` or `scripted:FILE`")
    if spec == "human":
        if human is None:
            raise UserError(
                "the `human` model needs someone to write the turns (run it from the TUI or with stdin)"
            )
        return HumanModel(human)
    if spec.startswith("replay:"):
        return ReplayModel(Path(spec.removeprefix("replay:")))
    if spec.startswith("scripted:"):
        return ScriptedModel(Path(spec.removeprefix("scripted:")))
    name = spec.removeprefix("litellm:")
    model = LitellmModel(
        name,
        api_base=api_base,
        temperature=temperature,
        max_tokens=max_tokens,
        retries=retries,
        backoff_s=backoff_s,
    )
    # A missing key is bad input, said before any session file exists, not a session ended by the
    # first model call.
    problem = model.credentials_problem()
    if problem is not None:
        raise UserError(problem)
    return model


__all__ = [
    "Author",
    "ChatMessage",
    "HumanModel",
    "HumanWriter",
    "LitellmModel",
    "Model",
    "ModelError",
    "ModelExhausted",
    "PersonStopped",
    "ReplayModel",
    "Reply",
    "RetryNotice",
    "ScriptedModel",
    "make_model",
    "resumed",
]
