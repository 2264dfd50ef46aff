"""What the screen shows, folded from session events: turns, their messages, candidate and verdict.

This is a view of a transcript, not agent state: it is rebuilt from events alone (a replay seeking
backwards folds the events up to that point again), and widgets only read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.evaluate.request import Progress
from workbench.evaluate.result import EvalResult
from workbench.session.events import Candidate, Control, Evaluation, Event, Message, SessionEnd, SessionStart
from workbench.session.listings import Listings


@dataclass
class TurnView:
    number: int
    messages: list[Message] = field(default_factory=list)
    candidate: Candidate | None = None
    evaluation: EvalResult | None = None
    listings: Listings | None = None  # the evaluation's PTX and SASS, when the session carries them
    controls: list[Control] = field(default_factory=list)
    progress: list[Progress] = field(default_factory=list)

    @property
    def speedup(self) -> float | None:
        return self.evaluation.stages.timing.speedup if self.evaluation else None


@dataclass
class SessionView:
    start: SessionStart | None = None
    preamble: list[Message] = field(default_factory=list)
    turns: dict[int, TurnView] = field(default_factory=dict)
    end: SessionEnd | None = None
    session_controls: list[Control] = field(default_factory=list)
    events: int = 0

    @classmethod
    def from_events(cls, events: list[Event]) -> SessionView:
        view = cls()
        for event in events:
            view.apply(event)
        return view

    def apply(self, event: Event) -> int | None:
        """Fold one event in; returns the turn it touched, if any."""
        self.events += 1
        if isinstance(event, SessionStart):
            self.start = event
            return None
        if isinstance(event, SessionEnd):
            self.end = event
            return None
        if event.turn is None:
            if isinstance(event, Message):
                self.preamble.append(event)
            elif isinstance(event, Control):
                self.session_controls.append(event)
            return None
        turn = self.turn(event.turn, create=True)
        if isinstance(event, Message):
            turn.messages.append(event)
        elif isinstance(event, Candidate):
            turn.candidate = event
            turn.evaluation = turn.listings = None
            turn.progress.clear()
        elif isinstance(event, Evaluation):
            turn.evaluation, turn.listings = event.result, event.listings
        elif isinstance(event, Control):
            turn.controls.append(event)
        return turn.number

    def add_progress(self, turn: int, progress: Progress) -> None:
        self.turn(turn, create=True).progress.append(progress)

    def turn(self, number: int, *, create: bool = False) -> TurnView:
        found = self.turns.get(number)
        if found is None:
            found = TurnView(number)
            if create:
                self.turns[number] = found
        return found

    @property
    def turn_numbers(self) -> list[int]:
        return sorted(self.turns)

    @property
    def latest_turn(self) -> int | None:
        return max(self.turns) if self.turns else None

    @property
    def max_turns(self) -> int | None:
        settings = self.start.settings if self.start else {}
        value = settings.get("max_turns") or settings.get("turns")
        return int(value) if isinstance(value, int) else None

    def previous_source(self, number: int) -> str | None:
        """The candidate of the closest earlier turn that has one (for the diff tab)."""
        for earlier in sorted((n for n in self.turns if n < number), reverse=True):
            candidate = self.turns[earlier].candidate
            if candidate is not None:
                return candidate.source
        return None

    def tokens(self) -> tuple[int, int]:
        prompt = completion = 0
        for message in self._all_messages():
            if message.usage:
                prompt += message.usage.prompt_tokens
                completion += message.usage.completion_tokens
        return prompt, completion

    def cost(self) -> float | None:
        costs = [m.cost_usd for m in self._all_messages() if m.cost_usd is not None]
        return sum(costs) if costs else None

    def _all_messages(self) -> list[Message]:
        messages = list(self.preamble)
        for number in self.turn_numbers:
            messages.extend(self.turns[number].messages)
        return messages
