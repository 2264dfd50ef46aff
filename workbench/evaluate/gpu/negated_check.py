"""Does the candidate's answer depend on its tensor-core products? The negated build, run once.

The dynamic tier credits the tensor pipe with the task's FLOPs and counts what other math instructions
did; a decoy that answers by work no counter credits to the task (integer multiply-adds in fixed point,
products looked up in shared memory) passes both while its wgmma run for show. Such an answer takes many
instructions per FLOP, where a kernel that leaves the work to the tensor pipe takes few; from
`CHECK_FROM` on, the library built with every wgmma's A negated (`build/negated.py`) runs in a runner
of its own on a correctness trial's inputs at the timed workload, and the judge checks its output as any
trial's, beside the candidate's own call on the same inputs. Where no output's error moved by a quarter
of the answer (`SHOWN_FROM`), it is a `decoy`: its answer never depended on the products. An output
moved, or the call failing, shows the dependence.

A kernel whose products were written so that they could not all be negated (`negated_hidden`) is a
`decoy` from `CHECK_FROM` on: its dependence on them cannot be shown. A kernel that tests its own wgmma on
values it knows and changes its answer when they come back negated is not caught here. Standard library
only, like the worker.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from workbench.evaluate.gpu.call_seeds import call_seed
from workbench.evaluate.gpu.checked_call import checked_call
from workbench.evaluate.gpu.protocol import StageRecord, Status
from workbench.evaluate.gpu.session import Session
from workbench.evaluate.gpu.stage_failed import StageFailed
from workbench.evaluate.gpu.triton_runtime import SOURCE_NAME

# Predicate-true thread instructions outside the required family, per task FLOP, from which the check
# runs. Measured on an H100 at 6ac1253 (benchmarks/results/2026-12-07_honest_gpu_cuda_6ac1253_h100.log):
# kernels fed by TMA and Triton's 0.008-0.02, ones that stage operands element by element 0.34-0.37
# (0.33-0.36 at e37a79a, where the fixed-point decoy of tests/gpu/hostile took 2.34). A fixed-point
# answer packing three products into each IMAD needs 1/6 of an IMAD per FLOP alone (0.17), more with its
# loads and unpacking: above this, so it is checked; the fast honest kernels are not.
CHECK_FROM = 0.03
# An output whose error, as a share of the answer's root mean square, grows by this much under the
# negation shows the dependence. Negating A flips a GEMM's sign (an error share of 2.0: every honest
# kernel checked on an H100 at e37a79a went from 0 to 2) and an attention forward's softmax weights (about
# 1.3 on O with N(0, 1) scores, estimated, not measured); a kernel whose answer never saw its wgmma moves
# by 0. The task's own check is no measure here: FP8 attention's O tolerance (atol 0.1) is
# wider than its answer's spread (about 0.03 over 4096 keys), so a wrong O may pass it.
SHOWN_FROM = 0.25


def instructions_per_flop(stage: StageRecord, required_opcodes: list[str]) -> float | None:
    """Thread instructions the profiled call executed outside the required family, per task FLOP."""
    flops = stage.get("task_flops")
    if not flops:
        return None
    executed = stage.get("executed_opcodes") or {}
    return sum(n for op, n in executed.items() if op not in required_opcodes) / flops


def without_twin(spec: dict[str, Any], ratio: float, message: str) -> StageRecord:
    """The stage's status and message where the check is due and no negated library was made: a `decoy`
    where the candidate's own writing kept its products from being negated (no proof, and no honest
    kernel needs it), else a pass that says what was not checked and why."""
    why = spec.get("negated_note") or "no negated library was built"
    if spec.get("negated_hidden"):
        return {
            "status": Status.decoy,
            "message": f"its answer's dependence on its wgmma cannot be checked ({ratio:.2f} instructions "
            f"per FLOP beside them): {why}",
        }
    return {
        "message": f"{message}; {ratio:.2f} instructions per FLOP, and its answer's dependence on its "
        f"wgmma not checked: {why}"
    }


def check_negated(session: Session, stage: StageRecord) -> None:
    """Where the profiled call passed and took many instructions per FLOP, run the negated library and the
    candidate's own on the same inputs: a `decoy` where no output moved by `SHOWN_FROM` of its answer; the
    stage's message says what it showed."""
    families = session.spec.get("families") or {}
    ratio = instructions_per_flop(stage, families.get(session.spec.get("required_family", ""), []))
    stage["instructions_per_flop"] = ratio
    # Only where the tensor pipe's share was judged: a memory-bound family's work is not its products.
    judged = stage.get("status") == Status.passed and stage.get("tensor_share") is not None
    if not judged or ratio is None or ratio < CHECK_FROM:
        return
    library = session.spec.get("negated_library")
    if not library:
        stage.update(without_twin(session.spec, ratio, stage["message"]))
        return
    started = time.perf_counter()
    seed = call_seed(session.secret, "negated")
    what = f"the call beside the negated build's (seed {seed})"
    try:
        own, _ = checked_call(session, "same", seed, what)
        if not own["passed"]:
            raise StageFailed({"status": own["status"], "message": f"{what}: {own['message']}"})
    except StageFailed as failed:
        stage["status"], stage["message"] = failed.stage["status"], failed.stage.get("message", "")
        return
    moved = _run_negated(session, str(library), seed, _shares(own))
    stage["negated_passed"] = moved is None
    took = f"{time.perf_counter() - started:.2f} s"
    if moved is None:
        stage["status"] = Status.decoy
        stage["message"] = (
            f"its answer does not depend on its wgmma: built again with every wgmma's A negated, on the same "
            f"inputs no output moved by {SHOWN_FROM:.0%} of its answer's root mean square ({ratio:.2f} "
            "instructions per FLOP beside them: the answer comes from another path while the target's "
            f"instructions run for show; checked in {took})"
        )
    else:
        stage["message"] += f"; its answer depends on its wgmma (negated, {moved}; checked in {took})"


def _shares(trial: dict[str, Any]) -> dict[str, float]:
    """Each output's error share (`correctness._rms_share`) in a trial record."""
    return {name: check.get("rms_error_share") or 0.0 for name, check in trial["outputs"].items()}


def _run_negated(session: Session, library: str, seed: int, own: dict[str, float]) -> str | None:
    """The negated library's call on `seed`'s inputs in a runner of its own: None where no output's error
    share grew by `SHOWN_FROM` over the candidate's own (`own`), else what showed the dependence."""
    spec = session.spec
    if spec.get("triton_entry"):
        # A Triton candidate's twin is a build entry of its own, its runtime cache made beside the original's.
        spec = {**spec, "triton_entry": library}
        library = str(Path(library) / SOURCE_NAME)
    runner = session.worker.take_runner(session.device)
    try:
        ready = runner.receive(session.limits.start_s)
        if not ready.ok:
            return f"not run: its runner did not start ({ready.exit_description})"
        loaded = session.ask_runner(
            {
                "cmd": "load",
                "library": library,
                "kernels": session.kernels,
                "spec": spec,
                "timing": False,
            },
            "loading the negated library",
            session.limits.start_s + session.call_s,
            runner,
        )
        trial, _ = checked_call(
            session, "same", seed, "the negated call", exports=loaded["exports"]["same"], runner=runner
        )
        negated = _shares(trial)
    except StageFailed as failed:
        return f"its call failed: {failed.stage.get('message', '')[:200]}"
    finally:
        runner.close()
    grown = {name: negated.get(name, 0.0) - share for name, share in own.items()}
    name, most = max(grown.items(), key=lambda item: item[1])
    if most < SHOWN_FROM:
        return None
    return f"output {name}'s error {own[name]:.2g} -> {negated[name]:.2g} of its root mean square"
