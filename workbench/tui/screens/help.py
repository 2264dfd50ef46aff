"""The help screen: every key of the session screen, grouped, for the current mode."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from workbench.tui.keymap import for_mode, key_label

GROUP_TITLES = {
    "control": "Playback and the loop",
    "candidate": "Before an evaluation",
    "session": "Session",
    "view": "Looking around",
    "files": "Keeping things",
    "app": "App",
}


def keymap_table(mode: str) -> Table:
    table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 0))
    table.add_column(style="bold", min_width=10)
    table.add_column()
    for group, title in GROUP_TITLES.items():
        actions = [a for a in for_mode(mode) if a.group == group]
        if not actions:
            continue
        table.add_row(Text(title, style="bold underline"), "")
        for action in actions:
            table.add_row(key_label(action.keys), action.help)
        table.add_row("", "")
    table.add_row(Text("Everywhere", style="bold underline"), "")
    table.add_row("ctrl+p", "Command palette: every action by name, themes, screenshot")
    table.add_row("tab", "Move focus between panes")
    return table


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 90; max-width: 100%; height: auto; max-height: 90%;
        border: thick $accent; background: $surface; padding: 1 2;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode

    def compose(self) -> ComposeResult:
        with VerticalScroll() as scroll:
            scroll.border_title = f"Keys ({self.mode})"
            scroll.border_subtitle = "escape to close"
            yield Static(keymap_table(self.mode))
