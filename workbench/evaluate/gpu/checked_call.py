"""One checked call: inputs drawn from a seed, the judge's snapshot of them, the call, its trace's check
and the judge's check of its outputs. The correctness trials and the negated build's check both make
their calls through it, so neither skips a check the other makes. Standard library only, like the worker.
"""

from __future__ import annotations

from typing import Any, Literal

from workbench.evaluate.gpu.isolation import Child
from workbench.evaluate.gpu.protocol import Status
from workbench.evaluate.gpu.session import Session
from workbench.evaluate.gpu.stage_failed import StageFailed
from workbench.evaluate.gpu.trace_checks import Attributed, attribute, call_problem


def checked_call(
    session: Session,
    name: Literal["same", "fresh"],
    seed: int,
    label: str,
    *,
    exports: dict[str, Any] | None = None,
    runner: Child | None = None,
) -> tuple[dict[str, Any], Attributed]:
    """The call of the candidate's runner (or `runner`, whose buffers are `exports`) on `seed`'s inputs in
    set `name`: the judge's trial record (`judge.py`, status and message included) and the call's trace.
    A harness that changed its inputs, or a trace the call may not have, ends the stage."""
    exports = session.exports[name] if exports is None else exports
    session.ask_runner(
        {"cmd": "prepare", "set": name, "seed": seed}, f"{label}: preparing inputs", runner=runner
    )
    snap = session.ask_judge({"cmd": "snapshot", "exports": exports, "seed": seed}, runner)
    if not snap.get("ok"):
        raise StageFailed(
            {
                "status": Status.tampered,
                "message": f"{label}: input(s) {', '.join(snap.get('mismatched', []))} do not hold the "
                f"values seed {seed} draws: the harness that fills them was changed",
            }
        )
    called = session.ask_runner({"cmd": "call", "set": name}, f"{label} (seed {seed})", runner=runner)
    trace = attribute(called.get("trace") or {})
    problem = call_problem(trace, session.own)
    if problem is not None:
        raise StageFailed({"status": problem[0], "message": f"{label} (seed {seed}): {problem[1]}"})
    checked = session.ask_judge(
        {"cmd": "check", "exports": exports, "seed": seed, "fresh": name == "fresh"}, runner
    )
    return checked["trial"], trace
