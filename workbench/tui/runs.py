"""Build a live session screen from run settings (the home screen's "start a run")."""

from __future__ import annotations

from workbench.agent.config import AgentConfig
from workbench.agent.loop import MiniPTXAgent
from workbench.agent.models import make_model
from workbench.evaluate.executors import make_executor
from workbench.paths import new_session_path
from workbench.tui.drivers.live import LiveDriver, Pace, TuiHuman
from workbench.tui.preflight import refuse_without_gpu
from workbench.tui.screens.session import SessionScreen


def live_screen(
    task: str, target: str, model: str, executor: str, config: AgentConfig, pace: Pace
) -> SessionScreen:
    """A session screen driving a new agent run; bad settings raise `UserError` before anything starts."""
    refuse_without_gpu(executor)
    human = TuiHuman() if model == "human" else None
    agent = MiniPTXAgent(
        task=task,
        target=target,
        model=make_model(model, human=human),
        executor=make_executor(executor),
        out=new_session_path(task, target),
        config=config,
    )
    driver = LiveDriver(agent, pace=pace, human=human)
    # The prompts and the session file, made now: a workload or pack the run cannot use, or a file
    # that cannot be written, is refused in the form instead of ending the run on the screen.
    driver.open()
    return SessionScreen(driver)
