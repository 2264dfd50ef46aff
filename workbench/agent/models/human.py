"""`human`: a person writes each turn's answer, through a callback the CLI or the TUI supplies."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

from workbench.agent.models.base import Author, ChatMessage, OnDelta, OnRetry, PersonStopped, Reply

HumanWriter = Callable[[Sequence[ChatMessage]], Awaitable[str | None]]
"""Shown the conversation so far (the last message is the latest feedback); returns the answer, or None to stop."""


class HumanModel:
    name = "human"
    author: Author = "human"

    def __init__(self, write: HumanWriter) -> None:
        self._write = write

    def settings(self) -> dict[str, object]:
        return {}

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        on_delta: OnDelta | None = None,
        on_retry: OnRetry | None = None,
    ) -> Reply:
        began = time.monotonic()
        text = await self._write(messages)
        if text is None:
            raise PersonStopped("the person ended the session")
        if on_delta is not None:
            on_delta(text)
        return Reply(content=text, latency_s=time.monotonic() - began)
