"""Does the candidate's answer depend on its tensor-core products? The negated build, run once.

The dynamic tier credits the tensor pipe with the task's FLOPs and counts what other math instructions
did; a decoy that answers by work no counter credits to the task (integer multiply-adds in fixed point,
products looked up in shared memory) passes both while its wgmma run for show. Such an answer takes many
instructions per FLOP, where a kernel that leaves the work to the tensor pipe takes few; from
`CHECK_FROM` on, the library built with every wgmma's A negated (`build/negated.py`) runs in a runner
of its own on a correctness trial's inputs at the timed workload, and the judge checks its output as any
trial's. Met within the task's tolerance, it is a `decoy`: its answer never depended on the products.
Wrong, or the call failing, shows the dependence.

A kernel that tests its own wgmma on values it knows and changes its answer when they come back negated
is not caught here. Standard library only, like the worker.
"""

from __future__ import annotations

from workbench.evaluate.gpu.call_seeds import call_seed
from workbench.evaluate.gpu.protocol import StageRecord, Status
from workbench.evaluate.gpu.session import Session
from workbench.evaluate.gpu.stage_failed import StageFailed

# Predicate-true thread instructions outside the required family, per task FLOP, from which the check
# runs. Measured on an H100 at 6ac1253 (benchmarks/results/2026-12-07_honest_gpu_cuda_6ac1253_h100.log):
# kernels fed by TMA and Triton's 0.008-0.02, ones that stage operands element by element 0.34-0.37. A
# fixed-point answer packing three products into each IMAD needs 1/6 of an IMAD per FLOP alone (0.17),
# more with its loads and unpacking: above this, so it is checked; the fast honest kernels are not.
CHECK_FROM = 0.03


def instructions_per_flop(stage: StageRecord, required_opcodes: list[str]) -> float | None:
    """Thread instructions the profiled call executed outside the required family, per task FLOP."""
    flops = stage.get("task_flops")
    if not flops:
        return None
    executed = stage.get("executed_opcodes") or {}
    return sum(n for op, n in executed.items() if op not in required_opcodes) / flops


def check_negated(session: Session, stage: StageRecord) -> None:
    """Where the profiled call passed and took many instructions per FLOP, run the negated library once and
    judge its answer: a `decoy` where it still meets the tolerance; the stage's message says what it showed."""
    families = session.spec.get("families") or {}
    ratio = instructions_per_flop(stage, families.get(session.spec.get("required_family", ""), []))
    stage["instructions_per_flop"] = ratio
    if stage.get("status") != Status.passed or ratio is None or ratio < CHECK_FROM:
        return
    library = session.spec.get("negated_library")
    if not library:
        why = session.spec.get("negated_note") or "no negated library was built"
        stage["message"] += (
            f"; {ratio:.2f} instructions per FLOP, and its answer's dependence on its wgmma not checked: {why}"
        )
        return
    answered = _run_negated(session, str(library))
    stage["negated_passed"] = answered is None
    if answered is None:
        stage["status"] = Status.decoy
        stage["message"] = (
            f"its answer does not depend on its wgmma: built again with every wgmma's A negated, it still "
            f"answered within the task's tolerance ({ratio:.2f} instructions per FLOP beside them: the "
            "answer comes from another path while the target's instructions run for show)"
        )
    else:
        stage["message"] += f"; its answer depends on its wgmma (negated, {answered})"


def _run_negated(session: Session, library: str) -> str | None:
    """One trial of the negated library in a runner of its own: None where its answer passed the judge's
    check, else what showed the dependence (its wrong output, or its failed call)."""
    runner = session.worker.take_runner(session.device)
    seed = call_seed(session.secret, "negated")
    try:
        ready = runner.receive(session.limits.start_s)
        if not ready.ok:
            return f"no answer: its runner did not start ({ready.exit_description})"
        loaded = session.ask_runner(
            {
                "cmd": "load",
                "library": library,
                "kernels": session.kernels,
                "spec": session.spec,
                "timing": False,
            },
            "loading the negated library",
            session.limits.start_s + session.call_s,
            runner,
        )
        exports = loaded["exports"]["same"]
        session.ask_runner({"cmd": "prepare", "set": "same", "seed": seed}, "preparing inputs", runner=runner)
        session.ask_judge({"cmd": "snapshot", "exports": exports, "seed": seed}, runner)
        session.ask_runner({"cmd": "call", "set": "same"}, "the negated call", runner=runner)
        trial = session.ask_judge({"cmd": "check", "exports": exports, "seed": seed, "fresh": False}, runner)
    except StageFailed as failed:
        return f"its call failed: {failed.stage.get('message', '')[:200]}"
    finally:
        runner.close()
    checked = trial["trial"]
    return None if checked.get("passed") else f"its answer was wrong: {checked.get('message', '')[:200]}"
