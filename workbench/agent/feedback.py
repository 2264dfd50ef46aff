"""The user messages the loop sends back after each turn.

The verdict itself is `workbench.evaluate.render.feedback_text` (the one agent-facing rendering of an
`EvalResult`); this module adds what the loop knows around it: who changed the source, that a
static-only run cannot meet the speedup target, the turns left, and the no-code and skip messages.
"""

from __future__ import annotations

from workbench.agent.config import AgentConfig
from workbench.agent.prompts import render
from workbench.evaluate.render import feedback_text
from workbench.evaluate.result import EvalResult
from workbench.session.events import Candidate
from workbench.session.hostpaths import portable_result

_CHANGED = {"edited": "edited your kernel", "override": "replaced your kernel with their own"}
# The file the model writes and the fence it goes in, per language.
FILE = {"cuda": ".cu", "triton": "kernel.py"}
FENCE = {"cuda": "cuda", "triton": "python"}


def _turns_left(turn: int, config: AgentConfig) -> str:
    left = max(config.turns - turn, 0)
    return (
        render("turns_left.md", turns_left=left, turns=config.turns) if left else "That was the last turn.\n"
    )


def for_result(result: EvalResult, turn: int, config: AgentConfig, candidate: Candidate) -> str:
    parts: list[str] = []
    if candidate.origin in _CHANGED:
        parts.append(
            render(
                "changed_by_person.md",
                what=_CHANGED[candidate.origin],
                fence=FENCE[config.language],
                source=candidate.source.rstrip(),
            )
        )
    # The model is told no host path (the nvcc line's folders, the build cache): nor is the session.
    parts.append(f"Turn {turn} verdict:\n{feedback_text(portable_result(result))}\n")
    if result.all_ran_passed and result.stages.timing.speedup is None:
        parts.append(
            render("no_speedup.md", executor=result.executor, target_speedup=f"{config.target_speedup:g}")
        )
    parts.append(_turns_left(turn, config))
    return "\n".join(parts)


def no_code(turn: int, config: AgentConfig) -> str:
    return render(
        "no_code.md",
        turn=turn,
        turns_left=max(config.turns - turn, 0),
        file=FILE[config.language],
        fence=FENCE[config.language],
    )


def skipped(turn: int, config: AgentConfig) -> str:
    left = max(config.turns - turn, 0)
    after = f"Write the next version. {left} turns left." if left else "That was the last turn."
    return render("skipped.md", turn=turn, next=after)
