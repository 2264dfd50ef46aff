"""Models that serve answers someone already wrote: `scripted:FILE` and `replay:SESSION`."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from pydantic import TypeAdapter, ValidationError

from workbench.agent.models.base import Author, ChatMessage, Model, ModelExhausted, OnDelta, OnRetry, Reply
from workbench.errors import UserError
from workbench.jsonfile import read_json
from workbench.session.events import Event, Message
from workbench.session.log import read_session


class _Recorded:
    author: Author

    def __init__(self, name: str, replies: list[Reply]) -> None:
        self.name = name
        self._replies = replies
        self._served = 0

    def settings(self) -> dict[str, object]:
        return {"messages": len(self._replies)}

    def resumed(self, kept: Sequence[Event]) -> Self:
        """This model for a fork that keeps `kept`: it serves the answer after those the kept turns used."""
        used = sum(
            1 for e in kept if isinstance(e, Message) and e.role == "assistant" and e.source == self.author
        )
        resumed = copy.copy(self)
        resumed._served = used
        return resumed

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        on_delta: OnDelta | None = None,
        on_retry: OnRetry | None = None,
    ) -> Reply:
        if self._served >= len(self._replies):
            raise ModelExhausted(f"{self.name}: all {len(self._replies)} recorded answers were served")
        reply = self._replies[self._served]
        self._served += 1
        if on_delta is not None:
            on_delta(reply.content)
        return reply


class ScriptedModel(_Recorded):
    """`scripted:FILE`: a JSON list of assistant messages (strings), served in order. For tests and demos."""

    author: Author = "scripted"

    def __init__(self, path: Path) -> None:
        data = read_json(path)
        try:
            texts = TypeAdapter(list[str]).validate_python(data)
        except ValidationError:
            raise UserError(f"{path}: expected a JSON list of strings (the assistant messages)") from None
        if not texts:
            raise UserError(f"{path}: the script holds no messages")
        super().__init__(f"scripted:{path}", [Reply(content=t) for t in texts])


class ReplayModel(_Recorded):
    """`replay:SESSION`: a recorded session's assistant messages, in order, exactly as recorded."""

    author: Author = "replay"

    def __init__(self, path: Path) -> None:
        read = read_session(path)
        answers = [e for e in read.events if isinstance(e, Message) and e.role == "assistant"]
        if not answers:
            raise UserError(f"{path}: the session holds no assistant messages to replay")
        # The text and the tokens as recorded; a replay costs nothing and takes no time.
        replies = [Reply(content=m.content, usage=m.usage) for m in answers]
        super().__init__(f"replay:{path}", replies)


def resumed(model: Model, kept: Sequence[Event]) -> Model:
    """The model a fork that keeps `kept` goes on with: a script or a replay from where those turns left it.

    A fork at turn 1 of a scripted run continues with the script's second answer, however far the
    parent went; any other model needs no position.
    """
    return model.resumed(kept) if isinstance(model, _Recorded) else model
