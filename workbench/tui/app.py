"""The workbench app: one Textual app whose first screen is a session (replay, author, live) or home."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from textual.app import App
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.screen import Screen

from workbench.tui import keymap
from workbench.tui.drivers.base import Driver
from workbench.tui.screens.home import HomeScreen
from workbench.tui.screens.session import SessionScreen

# (title, help, what it runs) for one entry of the command palette.
Command = tuple[str, str, Callable[[], object]]


class WorkbenchCommands(Provider):
    """The palette: the screen's own actions that are possible now, then home, the themes and (off a
    session screen, whose own Quit asks first while a run goes) quit. Textual's defaults are left out:
    its Keys, Maximize and Screenshot are the screen's help, zoom and screenshot, and its Quit does not ask.
    """

    def _commands(self) -> list[Command]:
        screen = self.screen
        app = self.app
        assert isinstance(app, WorkbenchApp)
        commands: list[Command] = []
        if isinstance(screen, SessionScreen):
            commands += [
                (f"{entry.title} ({keymap.key_label(entry.keys)})", entry.help, _runner(screen, entry.action))
                for entry in keymap.for_mode(screen.driver.mode)
                if screen.check_action(entry.action.split("(")[0], ())
            ]
        if not isinstance(screen, HomeScreen):
            commands.append(("Home", "The home screen: the tasks and the recent sessions", app.action_home))
        commands.append(("Theme", "Change the colour theme", app.action_change_theme))
        if not isinstance(screen, SessionScreen):
            commands.append(("Quit (ctrl+q)", "Quit the workbench", app.action_quit))
        return commands

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, run in self._commands():
            score = max(matcher.match(title), matcher.match(help_text))
            if score > 0:
                yield Hit(score, matcher.highlight(title), run, help=help_text)

    async def discover(self) -> Hits:
        # Listed as soon as the palette opens, in this order.
        for title, help_text, run in self._commands():
            yield DiscoveryHit(title, run, help=help_text)


def _runner(screen: Screen[Any], action: str) -> Callable[[], object]:
    async def run() -> None:
        await screen.run_action(action)

    return run


class WorkbenchApp(App[None]):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses may live anywhere
    TITLE = "PTX Workbench"
    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = {WorkbenchCommands}
    ENABLE_COMMAND_PALETTE = True

    # The first screen's stack is a mode of its own, so going home from it can end it (a stack's
    # bottom screen cannot be popped or switched away).
    DEFAULT_MODE: ClassVar[str] = "workbench"

    def __init__(self, first: Callable[[], Screen[Any]], *, theme: str | None = None) -> None:
        super().__init__()
        self.add_mode("workbench", first)
        # The live runs started in this app (from home): the command reports one whose session failed.
        self.started: list[Driver] = []
        if theme:
            self.theme = theme

    @classmethod
    def for_driver(cls, driver: Driver, *, theme: str | None = None) -> WorkbenchApp:
        return cls(lambda: SessionScreen(driver), theme=theme)

    def _live_run_screen(self) -> SessionScreen | None:
        """The topmost session screen whose live run still goes (under a dialog, perhaps)."""
        for screen in reversed(self.screen_stack):
            if isinstance(screen, SessionScreen) and screen.run_going:
                return screen
        return None

    async def action_quit(self) -> None:
        """ctrl+q and the palette's Quit: a live run still going asks first, as `q` does."""
        running = self._live_run_screen()
        if running is None:
            self.exit()
        else:
            running.leave("Quitting", self.exit)

    def action_home(self) -> None:
        """Back to the home screen (made when this app opened on a session); a live run asks first."""
        running = self._live_run_screen()
        if running is None:
            self.go_home()
        else:
            running.leave("Leaving", self.go_home)

    def go_home(self) -> None:
        home = next((s for s in self.screen_stack if isinstance(s, HomeScreen)), None)
        if home is None:
            self.run_worker(self._home_instead(), name="home", group="home", exclusive=True)
            return
        while self.screen is not home:
            self.pop_screen()

    async def _home_instead(self) -> None:
        """The home screen in place of the stack this app opened on, whose screens end (unmounted)."""
        left = self.current_mode
        self.add_mode("home", HomeScreen.default)
        await self.switch_mode("home")
        await self.remove_mode(left)
