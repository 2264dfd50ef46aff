"""The workbench app: one Textual app whose first screen is a session (replay, author, live) or home."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.app import App
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.screen import Screen

from workbench.tui import keymap
from workbench.tui.drivers.base import Driver
from workbench.tui.screens.session import SessionScreen


class SessionCommands(Provider):
    """Every action of the session screen that is possible now, by name, in the command palette."""

    def _possible(self) -> list[tuple[Screen[object], keymap.Action, str]]:
        screen = self.screen
        if not isinstance(screen, SessionScreen):
            return []
        return [
            (screen, entry, f"{entry.title} ({keymap.key_label(entry.keys)})")
            for entry in keymap.for_mode(screen.driver.mode)
            if screen.check_action(entry.action.split("(")[0], ())
        ]

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for screen, entry, text in self._possible():
            score = max(matcher.match(text), matcher.match(entry.help))
            if score > 0:
                yield Hit(score, matcher.highlight(text), _runner(screen, entry.action), help=entry.help)

    async def discover(self) -> Hits:
        # Listed as soon as the palette opens, beside Textual's own commands.
        for screen, entry, text in self._possible():
            yield DiscoveryHit(text, _runner(screen, entry.action), help=entry.help)


def _runner(screen: Screen[object], action: str) -> Callable[[], object]:
    async def run() -> None:
        await screen.run_action(action)

    return run


class WorkbenchApp(App[None]):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses may live anywhere
    TITLE = "PTX Workbench"
    COMMANDS = App.COMMANDS | {SessionCommands}
    ENABLE_COMMAND_PALETTE = True

    def __init__(self, first: Callable[[], Screen[object]], *, theme: str | None = None) -> None:
        super().__init__()
        self._first = first
        if theme:
            self.theme = theme

    @classmethod
    def for_driver(cls, driver: Driver, *, theme: str | None = None) -> WorkbenchApp:
        return cls(lambda: SessionScreen(driver), theme=theme)

    def get_default_screen(self) -> Screen[object]:
        return self._first()
