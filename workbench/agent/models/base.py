"""The model interface the loop talks to: one call per turn, text streamed through a callback."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from workbench.session.events import Usage

Author = Literal["model", "human", "scripted", "replay"]


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class Reply(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    content: str
    usage: Usage | None = None
    cost_usd: float | None = None
    latency_s: float | None = None


class RetryNotice(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    attempt: int
    delay_s: float
    error: str


OnDelta = Callable[[str], None]
OnRetry = Callable[[RetryNotice], None]


class ModelError(Exception):
    """The model could not answer (after any retries). The message is safe to record: no secrets."""


class ModelExhausted(ModelError):
    """A replay or scripted model has served every message it holds."""


class PersonStopped(Exception):
    """The person writing the turns chose to stop."""


class Model(Protocol):
    name: str
    """What the session start records as `model`: a litellm string, `human`, `replay:…`, `scripted:…`."""
    author: Author

    def settings(self) -> dict[str, object]:
        """Non-secret settings worth recording in the session (api base, temperature, retries)."""
        ...

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        on_delta: OnDelta | None = None,
        on_retry: OnRetry | None = None,
    ) -> Reply: ...
