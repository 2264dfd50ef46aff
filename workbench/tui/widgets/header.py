"""The status header: task, target, model, turn n/N, the state pill, tokens and cost."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widget import Widget

from workbench.tui.model import SessionView

# state -> pill style
STATE_STYLES = {
    "idle": "reverse dim",
    "playing": "reverse green",
    "paused": "reverse yellow",
    "streaming": "reverse cyan",
    "awaiting approval": "reverse magenta",
    "evaluating": "reverse blue",
    "watching": "reverse green",
    "ended": "reverse dim",
    "error": "reverse red",
}


@dataclass
class HeaderFacts:
    """What the header needs beyond the session view: the app's state and mode."""

    state: str
    mode: str
    selected_turn: int | None
    speed: float | None = None
    hint: str = ""
    next_turn: int | None = None


def render_header(view: SessionView, facts: HeaderFacts, width: int | None = None) -> Text:
    """The two lines; the hint's parts (`a · b · c`) that fit in `width` whole, the others left out."""
    start = view.start
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(" PTX Workbench ", style="bold reverse")
    text.append(" ")
    if start is None:
        text.append("no session loaded", style="dim")
        return text
    text.append(start.task, style="bold")
    text.append(f" · {start.target} · ", style="dim")
    text.append(start.model)
    if start.parent_session:
        text.append(f" · fork of {start.parent_session[:8]}@{start.fork_turn}", style="dim")
    text.append("\n ")
    pill = facts.state + (
        f" ×{facts.speed:g}" if facts.speed and facts.state in ("playing", "paused") else ""
    )
    text.append(f" {pill} ", style=STATE_STYLES.get(facts.state, "reverse"))
    text.append(f" {facts.mode}", style="dim")
    latest = max(view.latest_turn or 0, facts.next_turn or 0)
    limit = view.max_turns
    shown = facts.selected_turn if facts.selected_turn is not None else latest
    text.append("  turn ")
    text.append(f"{shown}", style="bold")
    text.append(f"/{limit if limit else latest}")
    if facts.selected_turn is not None and facts.selected_turn != latest:
        text.append(f" (latest {latest})", style="dim")
    prompt, completion = view.tokens()
    if prompt or completion:
        text.append(f"  tokens {prompt:,}↑ {completion:,}↓")
    cost = view.cost()
    if cost is not None:
        text.append(f"  ${cost:.4f}")
    if view.end is not None:
        text.append(f"  ended: {view.end.reason.replace('_', ' ')}", style="dim")
    if facts.hint:
        room = (width or len(facts.hint) + 1_000) - len(text.plain.split("\n")[-1]) - len("  — ")
        kept: list[str] = []
        for part in facts.hint.split(" · "):
            if len(" · ".join([*kept, part])) > room:
                break
            kept.append(part)
        if kept:
            text.append(f"  — {' · '.join(kept)}", style="italic")
    return text


class SessionHeader(Widget):
    """Two fixed lines: updating them repaints the header alone, never the screen's layout."""

    DEFAULT_CSS = """
    SessionHeader { height: 2; background: $panel; color: $text; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: tuple[SessionView, HeaderFacts] | None = None

    def render(self) -> Text:
        if self._shown is None:
            return Text(" PTX Workbench ", style="bold reverse")
        return render_header(*self._shown, width=self.size.width)  # what fits depends on the width

    def show(self, view: SessionView, facts: HeaderFacts) -> None:
        self._shown = (view, facts)
        self.refresh()
