"""Entry points other commands call to open the workbench on a live agent session."""

from __future__ import annotations

from workbench.agent.loop import MiniPTXAgent
from workbench.errors import UserError
from workbench.session.events import SessionEnd
from workbench.tui.app import WorkbenchApp
from workbench.tui.drivers.live import LiveDriver, Pace, TuiHuman


def run_live(
    agent: MiniPTXAgent, *, pace: Pace = "auto", human: TuiHuman | None = None, theme: str | None = None
) -> SessionEnd | None:
    """Show `agent`'s session live in the TUI, as its approver; returns how the session ended.

    Raises `UserError` for settings the prompts cannot use and for a session file that cannot be written.

    For the `human` model, build it with `make_model("human", human=TuiHuman())` and pass the same
    `TuiHuman` here: the screen opens the editor whenever it is the person's turn.
    """
    driver = LiveDriver(agent, pace=pace, human=human)
    app = WorkbenchApp.for_driver(driver, theme=theme)
    # The prompts and the session file, made before the screen opens: bad settings or an output
    # that cannot be written are one line (a `UserError`), and so is a write that fails later.
    driver.open()
    app.run()
    if driver.failure is not None:
        raise UserError(driver.failure)
    return driver.end
