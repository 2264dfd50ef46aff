"""The correctness stage in the worker: trials at the same addresses, one at fresh addresses, each call's
inputs snapshotted and its outputs judged by the judge, and memcheck's finding at the smallest workload
as the gate beside them. Standard library only, like the worker.
"""

from __future__ import annotations

import time
from typing import Literal

from workbench.evaluate.gpu.call_seeds import call_seed
from workbench.evaluate.gpu.checked_call import checked_call
from workbench.evaluate.gpu.protocol import StageRecord, Status
from workbench.evaluate.gpu.sanitizer import memcheck_message, nothing_found
from workbench.evaluate.gpu.session import Session
from workbench.evaluate.gpu.stage_failed import StageFailed


def run_correctness(session: Session, trials: int) -> StageRecord:
    stage: StageRecord = {
        "status": Status.passed,
        "message": "",
        "atol": float(session.spec.get("atol", 1e-2)),
        "rtol": float(session.spec.get("rtol", 1e-2)),
        "trials": [],
    }
    if session.sanitizer is not None:
        session.sanitizer.go(session.autotuned)  # memcheck's call runs beside the trials
        stage["memcheck_ready"] = session.sanitizer.has_context()
    worst = [0.0, 0.0]  # the largest abs and rel errors over every trial
    try:
        for number in range(trials + 1):
            _trial(session, stage, number, fresh=number == trials, worst=worst)
    except StageFailed as failed:
        stage.update(failed.stage)
    waited = time.perf_counter()
    gate = _gate(session, stage["status"])
    if session.sanitizer is not None:
        stage["memcheck_wait_s"] = round(time.perf_counter() - waited, 4)
    if gate is not None:
        if stage["status"] == Status.passed:
            stage["status"], stage["message"] = Status.runtime_error, gate
        else:
            stage["message"] += f" | {gate}"
    elif stage["status"] == Status.passed:
        stage["message"] = (
            f"{trials} trials + 1 at fresh addresses passed; max abs error {worst[0]:.3g}, max rel error "
            f"{worst[1]:.3g} (where abs > atol)"
        )
        if session.sanitizer is not None:
            stage["message"] += "; memcheck clean at the smallest workload"
    return stage


def _trial(session: Session, stage: StageRecord, number: int, fresh: bool, worst: list[float]) -> None:
    """One trial: fresh inputs, the judge's snapshot, the call, its trace's check and the judge's check."""
    name: Literal["same", "fresh"] = "fresh" if fresh else "same"
    seed = call_seed(session.secret, name, number)
    label = "the fresh-address trial" if fresh else f"trial {number + 1}"
    trial, trace = checked_call(session, name, seed, label)
    # The launch order a later hang is read against (a timed call has no launch names).
    session.last_order = [
        k.name for w in trace.labelled("call") for k in sorted(w.kernels, key=lambda k: k.start)
    ]
    status, message = trial.pop("status"), trial.pop("message")
    stage["trials"].append(trial)
    for check in trial["outputs"].values():
        worst[0] = max(worst[0], check.get("max_abs_error") or 0.0)
        worst[1] = max(worst[1], check.get("max_rel_error") or 0.0)
    if status != Status.passed:
        raise StageFailed({"status": status, "message": f"{label} (seed {seed}): {message}"})


def _gate(session: Session, status: str) -> str | None:
    """memcheck's finding for the call at the smallest workload, or None. With the gate off, it runs
    now for a call that crashed or hung, to explain it."""
    tool = session.sanitizer
    if (
        tool is None
        and status in (Status.runtime_error, Status.timeout)
        and session.worker.sanitizer_tool
        and session.device != "cpu"
    ):
        tool = session.sanitizer = session.worker.take_sanitizer()
        tool.submit(session.library, session.smallest_spec)
        tool.go(session.autotuned)
    if tool is None:
        return None
    # Memcheck gets its full time where it decides (a pass) or explains (a crash). A hang hangs under
    # memcheck too (it has run beside the call all along: one more second), and any other failure is
    # already a verdict: there it gets no more than a call.
    limits: dict[str, float] = {
        Status.passed: session.limits.sanitize_s,
        Status.runtime_error: session.limits.sanitize_s,
        Status.timeout: 1.0,
    }
    limit = limits.get(status, session.call_s)  # a str key finds its Status member
    if not tool.wait(limit):
        return None if status != Status.passed else f"memcheck gave no answer within {limit:g} s (not judged)"
    found = memcheck_message(tool.report(), session.source, session.smallest_spec["axes"])
    if found is None and status == Status.runtime_error:
        return _at_the_failing_workload(session)
    return found


def _at_the_failing_workload(session: Session) -> str | None:
    """A call that crashed where memcheck at the smallest workload saw nothing: memcheck once more, at the
    workload that failed and on the first trial's inputs, within the gate's own limit, so the message names
    the kernel, line, thread, block and address wherever the fault is."""
    axes = session.spec["axes"]
    if axes == session.smallest_spec["axes"] or not session.worker.sanitizer_tool:
        return None
    spec = {**session.spec, "seed": call_seed(session.secret, "same", 0)}
    tool = session.worker.take_sanitizer()
    try:
        tool.submit(session.library, spec)
        tool.go(session.autotuned)
        limit = session.limits.sanitize_s
        if not tool.wait(limit):
            return (
                f"memcheck at the failing workload gave no answer within {limit:g} s: the limit cut it short"
            )
        found = memcheck_message(tool.report(), session.source, axes, where="the failing workload")
        return found or nothing_found(axes, tool.returncode, tool.app_output())
    finally:
        tool.close()
