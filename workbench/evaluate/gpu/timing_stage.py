"""The timing stage in the worker: rounds of the candidate and its baselines, in alternating order, each
call timed from outside the runner and every timed call of the candidate judged; the statistics are
`timing.py`'s. Standard library only, like the worker.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable
from typing import Any

from workbench.evaluate.gpu.agreement import SampledCalls
from workbench.evaluate.gpu.call_counters import window_for
from workbench.evaluate.gpu.call_seeds import call_seed
from workbench.evaluate.gpu.child_protocol import CountersOpenCommand
from workbench.evaluate.gpu.dynamic_stage import go_early
from workbench.evaluate.gpu.part_clock import PartClock
from workbench.evaluate.gpu.protocol import StageRecord, Status
from workbench.evaluate.gpu.session import Session
from workbench.evaluate.gpu.stage_failed import StageFailed
from workbench.evaluate.gpu.timing import timed_iterations, timing_stage
from workbench.evaluate.gpu.trace_checks import attribute

MAX_ITERATIONS = 400
RECORDED_CALLS = 3  # checked timed calls kept in the verdict when all passed
# Every kept call waits this long after its flush: an idle GPU speeds the next call once the flush's
# write-back has drained (the headline GEMM's cuBLAS call 0.941x after 20 us idle, 0.935x after 50 us,
# 0.934x after 200 us and 1 ms on one H100 at 474de3c; 0.936x after 200 us but 0.951x after 1 ms on
# another at 2ddbc51). So every entrant's calls follow the same idle; the sampler of a counted call is
# started before its prepare, so it adds no wait of its own. The idle also keeps the prepare's GPU work
# out of a counted call's bracket, which is widened by a sampling interval (50 us).
IDLE_S = 200e-6


class TimedRounds:
    """The calls of one timing stage: who is timed, each call's wall time, the seeds drawn so far."""

    def __init__(self, session: Session, baselines: list[str], empty_call: bool) -> None:
        self.session = session
        self.names = {str(i): name for i, name in enumerate(baselines)}
        # The empty call sits beside the candidate's in every round, whichever way the round runs.
        self.entrants = ["candidate", *(["empty"] if empty_call else []), *self.names]
        self.walls: dict[str, list[float]] = {entrant: [] for entrant in self.entrants}
        self.calls = 0
        self.rounds = 0  # warm-up rounds
        self.checks_s = 0.0  # the judge's checks of the timed calls' outputs, in all
        # Each kept candidate call's hardware counters, sampled by the judge around it (when `counting`).
        self.counting = False
        self.counts_why = ""
        # The stage's first prepare and call of the candidate: it sizes the sampler's buffer.
        self.first_ms = 0.0
        self.counters_s = 0.0  # the judge's requests around the counted calls (the settle included)
        self.check_parts: dict[str, float] = {}  # the same by the judge's own parts (its PartClock)
        # The judge's own parts over the counted calls (CallCounters'): its decode and evaluation ran beside
        # the calls after each, off counters_s (what is left of them is waited in the round's check).
        self.counter_parts: dict[str, float] = {}
        self.counted_own_s: list[float] = []  # each counted call's prepare and call, in call order
        # Kept calls' seconds between the prepare's answer and the call, summed by entrant.
        self.gaps: dict[str, float] = {}
        # Kept calls' prepares (asked to answered) by entrant, and the runner's own parts of them.
        self.prepares: dict[str, float] = {}
        self.prepare_parts: dict[str, float] = {}

    def call(self, entrant: str, keep: bool) -> int:
        """One call of `entrant`, prepared off the clock and timed around the runner's answer: its seed."""
        session = self.session
        seed = call_seed(session.secret, "timed", self.calls)
        self.calls += 1
        counted = keep and self.counting and entrant == "candidate"
        if counted:
            # Started before the prepare: its start is not a wait between the flush and the call.
            opened = time.perf_counter()
            session.ask_judge({"cmd": "counters_start"})
            self.counters_s += time.perf_counter() - opened
        preparing = time.perf_counter()
        armed = session.ask_runner(
            {"cmd": "timing_prepare", "entrant": entrant, "seed": seed}, "timing: preparing a call"
        )
        prepared = time.perf_counter()  # the runner has flushed L2 and synchronised: the GPU idles from here
        if keep:
            self.prepares[entrant] = self.prepares.get(entrant, 0.0) + prepared - preparing
            for part, seconds in (armed.get("parts_s") or {}).items():
                self.prepare_parts[part] = self.prepare_parts.get(part, 0.0) + float(seconds)
            _idle_until(prepared + IDLE_S)
        began = time.perf_counter()
        began_ns = time.time_ns()  # the call's bracket, in the clock of the sampler's timestamps
        session.ask_runner(
            {"cmd": "timing_call", "entrant": entrant}, f"timed call of {self.names.get(entrant, entrant)}"
        )
        ended_ns = time.time_ns()
        answered = time.perf_counter()
        wall_ms = (answered - began) * 1e3
        if entrant == "candidate" and not self.first_ms:
            self.first_ms = (answered - preparing) * 1e3  # a counted window holds the prepare too
        if counted:
            self.counted_own_s.append(answered - preparing)
            stopped = time.perf_counter()
            # Its samples are read beside what follows.
            session.ask_judge({"cmd": "counters_stop", "began_ns": began_ns, "ended_ns": ended_ns})
            self.counters_s += time.perf_counter() - stopped
        if keep:
            self.walls[entrant].append(wall_ms)
            # Every entrant's wait between its flush and its call, summed: each kept call waits out
            # IDLE_S, so the sums say whether the entrants' idle was the same.
            self.gaps[entrant] = self.gaps.get(entrant, 0.0) + began - prepared
        return seed

    def counted_calls(self, closed: dict[str, Any], window_s: float) -> SampledCalls:
        """The judge's counts of every counted call, read as the sampling closed (its parts kept here)."""
        self.counter_parts = closed["parts_s"]
        why = self.counts_why or closed["why"]
        return SampledCalls(closed["counts"], why, closed["outgrown"], window_s, self.counted_own_s)

    def round(self, number: int, keep: bool) -> int:
        """Every entrant once, the order reversed every other round: the candidate's seed."""
        order = self.entrants if number % 2 == 0 else self.entrants[::-1]
        seeds = {entrant: self.call(entrant, keep) for entrant in order}
        return seeds["candidate"]

    def warm_up(self, warmup: int) -> float:
        """At least `warmup` rounds, an even number, for at least the pace's warm-up: seconds per round
        (of those run here)."""
        started, before = time.perf_counter(), self.rounds
        while (
            self.rounds < warmup
            or self.rounds % 2
            or time.perf_counter() - started < self.session.pace["warmup_s"]
        ):
            self.round(self.rounds, keep=False)
            self.rounds += 1
        return (time.perf_counter() - started) / max(1, self.rounds - before)

    def timed(self, count: int) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """`count` kept rounds, every candidate call's outputs judged: the trials and the first wrong one."""
        session = self.session
        checked: list[dict[str, Any]] = []
        bad: dict[str, Any] | None = None
        for number in range(count):
            seed = self.round(self.rounds + number, keep=True)
            began = time.perf_counter()
            reply = session.ask_judge(
                {"cmd": "check_timed", "exports": session.exports["same"], "seed": seed}
            )
            self.checks_s += time.perf_counter() - began
            for part, seconds in (reply.get("parts_s") or {}).items():
                self.check_parts[part] = self.check_parts.get(part, 0.0) + seconds
            trial = reply["trial"]
            trial["timed_call"] = number + 1
            checked.append(trial)
            if bad is None and trial["status"] != Status.passed:
                bad = trial
        return checked, bad


def _idle_until(deadline: float) -> None:
    """Wait until `deadline` (perf_counter seconds) has passed: sleep for most of it, spin the rest,
    since a sleep this short may overshoot by more than itself."""
    while (left := deadline - time.perf_counter()) > 0:
        if left > 100e-6:
            time.sleep(left - 80e-6)


def run_timing(session: Session, warmup: int, iterations: int) -> StageRecord:
    clock = PartClock()
    try:
        started = session.ask_runner({"cmd": "timing_start"}, "timing")
        rounds = TimedRounds(session, started.get("baselines") or [], bool(started.get("empty_call")))
        # The first round's call of the candidate sizes the sampler's hardware buffer: CUPTI's set-up
        # (71-313 ms by size on an H100, 94a280e) then runs in the judge beside the rest of the warm-up,
        # which asks nothing of the judge.
        rounds.round(0, keep=False)
        rounds.rounds = 1
        window_s = window_for(rounds.first_ms)
        opening_counters: CountersOpenCommand = {"cmd": "counters_open", "window_s": window_s}
        # An ncu first range still in flight (back to back, this candidate's, asked at the last one's
        # profiled call: about 1.5 s) may run beside the warm-up, which is not timed, as it does beside
        # the correctness trials; not beside the sampling, which needs the same monitors (a range beside
        # a PM-sampled loop never ended, f151dbe), nor beside its set-up (CUPTI's configure then fails
        # with ERROR_HARDWARE_BUSY, fa2679d's probe). So the set-up waits for it, after the warm-up.
        opening = None if session.profiler_warming() else session.ask_judge_beside(opening_counters)
        try:
            per_round = rounds.warm_up(warmup)
            clock.mark("warm_up")
            session.await_profiler_warm()  # what the warm-up did not cover
            clock.mark("profiler_warm")
            if opening is None:
                opening = session.ask_judge_beside(opening_counters)
            session.ask_runner({"cmd": "timing_start"}, "timing")  # the warm-up's records are not kept
        except StageFailed:
            if opening is not None:
                _close_counters(session, opening)
            raise
        count = timed_iterations(iterations, per_round, session.pace["timed_s"], MAX_ITERATIONS)
        opened = opening()
        if not opened["ok"] and session.device != "cpu":
            # Not set up beside the warm-up: once more alone, as before it was moved there.
            opened = session.ask_judge(opening_counters)
        rounds.counting, rounds.counts_why = bool(opened["ok"]), opened["why"]
        clock.mark("counters_open")
        try:
            # Every timed call's outputs are judged (against the reference on that call's inputs): a
            # kernel wrong on any share of its calls fails, not only when a sample happens to hit one.
            checked, bad = rounds.timed(count)
        except BaseException:
            # The monitors are Nsight Compute's again before the dynamic tier.
            with contextlib.suppress(StageFailed):
                session.ask_judge({"cmd": "counters_close"})
            raise
        clock.mark("timed_rounds")
        # Once the sampling has closed (CUPTI's disable, 43-79 ms by buffer size on an H100), the monitors
        # are Nsight Compute's again: the dynamic tier's profiled call starts then, beside the trace's
        # collection and the statistics (nothing is timed after the rounds, and neither uses the GPU).
        closed = session.ask_judge({"cmd": "counters_close"})
        clock.mark("counters_close")
        go_early(session)
        ended = session.ask_runner({"cmd": "timing_end"}, "timing: collecting the trace", session.call_s + 60)
        clock.mark("collect")
        trace = attribute(ended.get("trace") or {})
        stage = timing_stage(
            trace, rounds.walls, rounds.names, session.spec, session.own, session.device_name
        )
        clock.mark("statistics")
        session.timed_counters = rounds.counted_calls(closed, window_s)
    except StageFailed as failed:
        return {**failed.stage, "method": session.trace_method}
    parts = clock.rounded()
    parts["checks"] = round(rounds.checks_s, 4)  # within timed_rounds
    parts["counters"] = round(rounds.counters_s, 4)  # within timed_rounds too
    parts.update({f"checks.{part}": round(seconds, 4) for part, seconds in rounds.check_parts.items()})
    parts.update({f"counters.{part}": round(seconds, 4) for part, seconds in rounds.counter_parts.items()})
    parts.update({f"gap.{entrant}": round(seconds, 6) for entrant, seconds in rounds.gaps.items()})  # us
    # Where a round's time goes beyond its calls: each entrant's prepares, the runner's parts of them
    # (all entrants), and the runner's parts of the trace's collection.
    parts.update({f"prepare.{entrant}": round(seconds, 4) for entrant, seconds in rounds.prepares.items()})
    parts.update(
        {f"prepare_parts.{part}": round(seconds, 4) for part, seconds in rounds.prepare_parts.items()}
    )
    parts.update(
        {
            f"collect.{part}": round(float(seconds), 4)
            for part, seconds in (ended.get("parts_s") or {}).items()
        }
    )
    parts.update({f"call.{entrant}": round(sum(walls) / 1e3, 4) for entrant, walls in rounds.walls.items()})
    stage.update(
        warmup=rounds.rounds,
        l2_flush_bytes=ended.get("l2_flush_bytes"),
        settings_set_aside=ended.get("settings_set_aside") or [],
        parts_s=parts,
    )
    _record_checked(stage, checked, bad)
    session.timed_calls = [window.kernels for window in trace.labelled("call:candidate")]
    for note in session.notes:
        if stage.get("message"):
            stage["message"] += f" [{note}]"
    return stage


def _close_counters(session: Session, opening: Callable[[], dict[str, Any]]) -> None:
    """After a warm-up that failed: the judge's answer read (its channel stays in step) and any sampling
    it opened closed, so the monitors are Nsight Compute's for the dynamic tier."""
    with contextlib.suppress(StageFailed):
        opening()
        session.ask_judge({"cmd": "counters_close"})


def _record_checked(stage: StageRecord, checked: list[dict[str, Any]], bad: dict[str, Any] | None) -> None:
    """The record keeps the failing call, else three drawn at random: the count says all were read."""
    kept = (
        [bad]
        if bad is not None
        else secrets.SystemRandom().sample(checked, min(RECORDED_CALLS, len(checked)))
    )
    stage["checked_calls"] = [
        {key: trial[key] for key in ("seed", "passed", "fresh_addresses", "outputs")} for trial in kept
    ]
    count = stage["calls_checked"] = len(checked)
    if bad is not None and stage["status"] == Status.passed:
        wrong = sum(trial["status"] != Status.passed for trial in checked)
        stage["status"] = bad["status"]
        stage["message"] = (
            f"timed call {bad['timed_call']} of {count} (seed {bad['seed']}): {bad['message']}; {wrong} of the "
            f"{count} timed calls were wrong: the kernel answers differently when it is timed"
        )
