"""The dynamic tier in the worker: Nsight Compute around one call at the timed workload, started ahead
of time; its launches judged by `profile.py` and checked against the timed calls by `agreement.py`, and
where it took many instructions per FLOP, its answer's dependence on its wgmma by `negated_check.py`.
Standard library only, like the worker.
"""

from __future__ import annotations

import time
from typing import Any

from workbench.evaluate.gpu import profile
from workbench.evaluate.gpu.agreement import agreement, counters_against_timed, profiled_over_timed
from workbench.evaluate.gpu.isolation import describe_exit, first_useful_line
from workbench.evaluate.gpu.negated_check import check_negated
from workbench.evaluate.gpu.protocol import StageRecord, Status
from workbench.evaluate.gpu.session import Session
from workbench.evaluate.gpu.tool_process import ProfiledProcess


def run_dynamic(session: Session) -> StageRecord:
    base: dict[str, Any] = {"tool": None, "workload_axes": session.spec["axes"]}
    refused = _refusal(session)
    if refused is not None:
        return {**base, **refused}
    base["tool"] = f"ncu {session.worker.ncu_version()}"
    if session.worker.profiling_refused is not None:
        return {**base, "status": Status.infrastructure_error, "message": session.worker.profiling_refused}
    profiler = session.profiler
    assert profiler is not None
    went = profiler.go_once(session.autotuned)
    base["profiler_prepared"] = went.prepared
    base["profiler_warmed"] = went.warmed
    base["profiler_first_range_s"] = went.first_range_s
    base["profiler_go_ahead_s"] = round(time.perf_counter() - went.at, 3)  # given by the timing stage
    started = went.at
    limit_s = session.limits.dynamic_s
    if not profiler.wait(max(0.0, limit_s - (time.perf_counter() - started))):
        return {
            **base,
            "status": Status.timeout,
            "message": f"the profiled call did not finish within {limit_s:g} s",
        }
    waited_s = time.perf_counter() - started
    # Nothing of this candidate runs on the GPU any more: the held spares make their contexts while the
    # report is read (a context made during the replay slowed ncu by as much as it saved, on the H200).
    session.worker.release_spares()
    report = profiler.report()
    launches = profiler.call_launches(report)
    if profiler.returncode != 0 or (not launches and "==ERROR==" in report):
        return {**base, **_profiler_failed(profiler, report)}
    stage = profile.dynamic_stage(
        launches,
        session.spec.get("families") or {},
        session.spec.get("required_family", ""),
        session.spec.get("flops"),
        session.spec.get("target", ""),
        session.own,
        session.spec.get("min_bytes"),
        session.spec.get("mma_flops_per_thread"),
        session.spec.get("scores"),
    )
    stage["ncu_s"] = round(waited_s, 3)
    stage["message"] += f" [ncu finished {waited_s:.2f} s after the go signal]"
    if profiler.source_counters and launches:
        stage["source_counts"], problem = profiler.source_counts(session.own or set())
        if problem:
            stage["message"] += f" [no per-instruction counts: {problem}]"
    _check_against_timed(session, stage, launches)
    check_negated(session, stage)
    return {**base, **stage}


def go_early(session: Session) -> None:
    """The profiled call's go, given now where the dynamic tier will run it: by the timing stage once
    its sampling has closed, so ncu's range runs beside the trace's collection and the statistics,
    which hold nothing on the GPU, rather than after them."""
    if (
        "dynamic" in session.stages
        and session.profiler is not None
        and session.worker.profiling_refused is None
        and _refusal(session) is None
    ):
        session.profiler.go_once(session.autotuned)


def _refusal(session: Session) -> StageRecord | None:
    """Why the tier cannot run for this candidate on this host, or None."""
    if session.worker.ncu is None or session.device == "cpu":
        return {"status": Status.not_run, "message": "Nsight Compute (ncu) is not installed on this host"}
    if session.kernels is None:
        return {
            "status": Status.infrastructure_error,
            "message": "the candidate's kernel names are unknown (no SASS, no cuobjdump)",
        }
    if not session.kernels:
        return {
            "status": Status.dynamic_not_executed,
            "message": "the candidate's module defines no kernel: none of its own instructions ran",
        }
    return None


def _profiler_failed(profiler: ProfiledProcess, report: str) -> StageRecord:
    errors = [line for line in report.splitlines() if line.startswith("==ERROR==")]
    evidence = errors[0] if errors else first_useful_line(profiler.app_output())
    return {
        "status": Status.infrastructure_error if errors else Status.runtime_error,
        "message": f"the profiled call {describe_exit(profiler.returncode)}"
        + (f": {evidence}" if evidence else ""),
    }


def _check_against_timed(session: Session, stage: StageRecord, launches: list) -> None:
    """The profiled call's kernels against the timed calls' (a kernel that tells the profiled call apart)."""
    if session.timed_calls:
        stage["profiled_over_timed"] = profiled_over_timed(launches, session.timed_calls, session.own)
        disagreement = agreement(launches, session.timed_calls, session.own)
        if disagreement is not None:
            stage["status"], stage["message"] = Status.profile_mismatch, disagreement[0]
            return
        _check_counters(session, stage, launches)
    elif stage["status"] == Status.passed:
        stage["message"] += " (no timed calls to check the profiled kernels against)"


def _check_counters(session: Session, stage: StageRecord, launches: list) -> None:
    """Every timed call's sampled counters against the profiled call's own kernels' (a timed path that
    is not the proven one, however close in time); where either side has none, the message says why."""
    flops = float(session.spec.get("flops") or 0.0)
    verdict = counters_against_timed(launches, session.own, session.timed_counters, flops)
    if verdict.failed is not None and stage["status"] == Status.passed:
        stage["status"], stage["message"] = Status.profile_mismatch, verdict.failed
    elif verdict.failed is not None:  # the profiled call already failed on its own: its status says more
        stage["message"] += f" [{verdict.failed}]"
    else:
        stage["message"] += f" {verdict.note}"
