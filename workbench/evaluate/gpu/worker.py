"""The GPU worker: `python -m workbench.evaluate.gpu.worker`, JSON lines on stdin/stdout.

One worker serves many candidates. Per candidate it drives four processes and judges from what they
hand back, so nothing that decides a verdict runs where the candidate runs:
- the runner (`runner.py`, the candidate's process): loads the candidate in a sandbox, calls it when
  told, hands back raw records; a fresh one per candidate, in its own process group;
- the judge (`judge.py`, kept across candidates): copies inputs and outputs out of the runner while the
  runner is stopped, runs the reference after the call and compares;
- Nsight Compute around one call at the timed workload (the dynamic tier), started ahead of time;
- compute-sanitizer's memcheck around one call at the smallest workload (the gate beside correctness),
  started ahead of time.
Trace attribution, timing statistics, the profile's agreement with the timed calls and every status
are made here (`trace_checks.py`, `timing.py`, `agreement.py`).

Requests (one JSON object per line; replies echo `id`):
- `{"op": "hello"}` -> `{"type": "hello", "protocol": 2, "host", "python", "gpus": [...], "ncu": path|null}`
- `{"op": "begin", "library", "kernels", "spec", "stages", "timeouts", "sanitize"}` -> `{"type": "begun", "ok", ...}`
- `{"op": "stage", "stage": "correctness"|"timing"|"dynamic", "trials"?, "warmup"?, "iterations"?}`
  -> `{"type": "stage", "stage", "result": {...}}` (the stage in `EvalResult`'s JSON shape)
- `{"op": "end"}` -> `{"type": "ended"}`
- `{"op": "evaluate", "library", "kernels", "spec", "stages", ...}` -> progress events
  `{"type": "progress", "stage", "state", "status"?, "message"?}` then `{"type": "result", "stages", "device"}`
- `{"op": "shutdown"}`

The GPU path uses only the standard library here (torch lives in the children), so a bare GPU host
with torch, apache-tvm-ffi and cupti-python can serve it. An ssh executor's GPU host builds with
`python -m workbench.evaluate.remote_build`, a process of its own, not through the worker.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

from workbench.evaluate.gpu import sandbox
from workbench.evaluate.gpu.agreement import agreement, profiled_over_timed
from workbench.evaluate.gpu.call_seeds import call_seed, new_secret
from workbench.evaluate.gpu.isolation import HOLD_ENV, Child, Reply, describe_exit, first_useful_line
from workbench.evaluate.gpu.kernel_names import module_kernels
from workbench.evaluate.gpu.profile import dynamic_stage, parse_raw_csv
from workbench.evaluate.gpu.sanitizer import memcheck_message
from workbench.evaluate.gpu.timing import timed_iterations, timing_stage
from workbench.evaluate.gpu.tool_process import ProfiledProcess, SanitizedProcess
from workbench.evaluate.gpu.trace_checks import attribute, call_problem

PROTOCOL = 2
# The order the GPU tiers run in: timing before the dynamic tier, whose proof is checked against the
# timed calls' kernels. A failed correctness stops both; the others do not stop each other.
GPU_STAGES = ("correctness", "timing", "dynamic")
DEFAULT_TIMEOUTS = {
    "start_s": 180.0,  # a runner, the judge or a tool process getting ready
    "call_floor_s": 10.0,  # one call of the candidate may take at least this long ...
    "call_factor": 200.0,  # ... and this many times the baseline's time
    "dynamic_s": 300.0,  # the profiled call under Nsight Compute
    "sanitize_s": 120.0,  # the call under memcheck
}
WARMUP_S = 0.25  # timed rounds after at least this long of warm-up (the card settles into its clocks)
TIMED_S = 0.3  # at least `iterations` timed rounds, more while they fit in this long
MAX_ITERATIONS = 400
RECORDED_CALLS = 3  # checked timed calls kept in the verdict when all passed


def find_tool_path(name: str) -> str | None:
    from workbench.evaluate.gpu.toolchain import find_tool

    path = find_tool(name)
    return str(path) if path else None


def list_gpus() -> list[str]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "-L"], check=False, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.startswith("GPU ")]


def child_argv() -> list[str]:
    return [sys.executable, "-m", "workbench.evaluate.gpu.candidate_entry"]


def judge_argv() -> list[str]:
    return [sys.executable, "-m", "workbench.evaluate.gpu.judge"]


def worker_argv() -> list[str]:
    return [sys.executable, "-m", "workbench.evaluate.gpu.worker"]


def profiling_refusal(sandboxed: bool, landlock: int) -> str | None:
    """Why this host's dynamic tier cannot be trusted, or None: where the sandbox runs, the process ncu
    profiles may write only where Landlock lets it, and without Landlock it would write anywhere (the
    tool's report among it)."""
    if sandboxed and landlock < 1:
        return (
            "not run on this host: its kernel has no Landlock (Linux 5.13 or later, Landlock enabled), so "
            "the files the profiled process may write cannot be confined and the profile would prove nothing"
        )
    return None


def _failure(status: str, what: str, reply: Reply) -> dict:
    """A stage dict for a child that gave no reply: timed out, crashed, exited, or forged its reply."""
    if reply.forged:
        return {
            "status": "tampered",
            "message": f"{what}: a line that does not answer the request came back on the harness's channel: "
            "the candidate wrote to it",
        }
    if reply.timed_out:
        message = f"{what}: no answer within the time limit; the candidate's process group was killed"
    else:
        message = f"{what}: the candidate's process {reply.exit_description}"
    if reply.evidence:
        message += f" ({reply.evidence})"
    return {"status": "timeout" if reply.timed_out else status, "message": message}


class _PhaseClock:
    """Wall time of consecutive phases outside the stages (where a warm evaluation's seconds go)."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._last = time.perf_counter()

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[name] = round(now - self._last, 4)
        self._last = now


class StageFailed(Exception):
    """A stage ends early with this stage dict."""

    def __init__(self, stage: dict) -> None:
        super().__init__(stage.get("message", ""))
        self.stage = stage


class Session:
    """The GPU tiers of one candidate: its runner, the shared judge, its tool processes."""

    def __init__(self, worker: Worker, request: dict) -> None:
        self.worker = worker
        self.library = request["library"]
        # Every call's inputs from this evaluation's secret (a request's `seed` replays one): the
        # workload's public seed would let a kernel tell the profiled call or a trial by its values.
        self.secret = int(request["seed"]) if request.get("seed") is not None else new_secret()
        self.spec = {**request["spec"], "seed": call_seed(self.secret, "setup")}
        self.device = self.spec.get("device", "cuda")
        kernels = request.get("kernels")
        if kernels is None:
            kernels = module_kernels(self.library, request.get("sass_path"))
        self.kernels: list[str] | None = None if kernels is None else list(kernels)
        self.own = None if self.kernels is None else set(self.kernels)
        self.stages = list(request.get("stages") or GPU_STAGES)
        self.timeouts = {**DEFAULT_TIMEOUTS, **(request.get("timeouts") or {})}
        self.sanitize = bool(request.get("sanitize", True)) and self.device != "cpu"
        self.pace = {"warmup_s": WARMUP_S, "timed_s": TIMED_S, **(request.get("pace") or {})}
        self.runner: Child | None = None
        self.failed: dict | None = None
        self.device_name: str | None = None
        self.trace_method: str | None = None
        self.exports: dict = {}
        self.notes: list[str] = []
        self.call_s = self.timeouts["call_floor_s"]
        self.profiler: ProfiledProcess | None = None
        self.sanitizer: SanitizedProcess | None = None
        self.timed_calls: list[list] | None = None
        self.autotuned: dict | None = None  # a Triton candidate's autotuners' choices, for the tools
        self.source = self._source()

    def _source(self) -> str | None:
        """The candidate's source beside its library in the build cache, to quote its faulting line."""
        library = Path(self.library)
        path = library if library.suffix == ".py" else library.with_name("kernel.cu")
        try:
            return path.read_text(errors="replace")
        except OSError:
            return None

    @property
    def smallest_spec(self) -> dict:
        smallest = self.spec.get("smallest") or {}
        return {
            **self.spec,
            "axes": smallest.get("axes") or self.spec["axes"],
            "flops": smallest.get("flops"),
            "seed": call_seed(self.secret, "memcheck"),
        }

    # ------------------------------------------------------------------ start

    def begin(self) -> dict:
        worker = self.worker
        clock = _PhaseClock()
        self.runner = worker.take_runner(self.device)
        if "dynamic" in self.stages and self.kernels and worker.can_profile and self.device != "cpu":
            # The profiled process loads the candidate and makes the timed workload's inputs meanwhile.
            self.profiler = worker.take_profiler(
                self.spec.get("target", ""),
                self.spec.get("required_family", ""),
                bool(self.spec.get("source_counters")),
            )
            self.profiler.submit(self.library, {**self.spec, "seed": call_seed(self.secret, "profile")})
        if self.sanitize and "correctness" in self.stages and worker.sanitizer_tool:
            self.sanitizer = worker.take_sanitizer()
            self.sanitizer.submit(self.library, self.smallest_spec)
        clock.mark("spawn")
        ready = self.runner.receive(self.timeouts["start_s"])
        clock.mark("runner_ready")
        if not ready.ok:
            return self._begin_failed(
                "infrastructure_error",
                f"the GPU child did not start: {ready.exit_description}"
                + (f" ({ready.evidence})" if ready.evidence else ""),
            )
        hello = ready.data or {}  # ok: the runner's hello
        self.device_name = hello.get("device")
        self.trace_method = hello.get("trace")
        if hello.get("trace_note"):
            self.notes.append(hello["trace_note"])
        judged = worker.judge_request(
            self.device, {"cmd": "setup", "spec": self.spec}, self.timeouts["start_s"]
        )
        if judged.get("error"):
            return self._begin_failed("infrastructure_error", f"the judge: {judged['error']}")
        clock.mark("judge_setup")
        timed = worker.judge_request(self.device, {"cmd": "baseline_ms"}, self.timeouts["start_s"])
        baseline_ms = float(timed.get("ms") or 0.0)
        clock.mark("baseline")
        if "call_s" in self.timeouts:
            self.call_s = float(self.timeouts["call_s"])
        else:
            self.call_s = max(self.timeouts["call_floor_s"], self.timeouts["call_factor"] * baseline_ms / 1e3)
        loaded = self.runner.request(
            {
                "cmd": "load",
                "library": self.library,
                "kernels": self.kernels,
                "spec": self.spec,
                "timing": "timing" in self.stages,
            },
            self.timeouts["start_s"] + self.call_s,
        )
        answer = loaded.data or {}
        if not loaded.ok or loaded.forged:
            self.failed = _failure("runtime_error", "loading the library", loaded)
        elif answer.get("failed"):
            self.failed = {
                "status": "runtime_error",
                "message": f"loading the library: {answer['failed']}",
            }
        else:
            self.exports = answer["exports"]
            self.notes += answer.get("notes") or []
            self.autotuned = answer.get("autotuned")
        clock.mark("load")
        return {
            "ok": self.failed is None,
            "phases_s": clock.phases,
            "device": self.device_name,
            "trace": self.trace_method,
            "call_limit_s": self.call_s,
            "seed": self.secret,
            **(self.failed or {}),
        }

    def _begin_failed(self, status: str, message: str) -> dict:
        self.failed = {"status": status, "message": message}
        return {"ok": False, **self.failed}

    # ------------------------------------------------------------------ helpers

    def _runner(self, message: dict, what: str, timeout_s: float | None = None) -> dict:
        """A runner request whose failure ends the stage; its reply's data."""
        assert self.runner is not None
        reply = self.runner.request(message, timeout_s or self.call_s)
        if not reply.ok or reply.forged:
            raise StageFailed(_failure("runtime_error", what, reply))
        data = reply.data or {}
        if data.get("failed"):
            raise StageFailed({"status": "runtime_error", "message": f"{what}: {data['failed']}"})
        if data.get("error"):
            raise StageFailed({"status": "infrastructure_error", "message": f"{what}: {data['error']}"})
        if data.get("changed"):
            raise StageFailed(
                {
                    "status": "tampered",
                    "message": f"{what}: the harness in the candidate's process changed during the call "
                    f"({', '.join(data['changed'][:3])})",
                }
            )
        return data

    def _judge(self, message: dict) -> dict:
        """A judge request made while the runner is stopped, so nothing in it runs while the judge reads."""
        assert self.runner is not None
        self.runner.pause()
        try:
            reply = self.worker.judge_request(
                self.device, message, self.timeouts["start_s"] + 10 * self.call_s
            )
        finally:
            self.runner.resume()
        if reply.get("unreadable"):
            raise StageFailed(
                {"status": "tampered", "message": f"the candidate's buffers: {reply['unreadable']}"}
            )
        if reply.get("error"):
            raise StageFailed({"status": "infrastructure_error", "message": f"the judge: {reply['error']}"})
        return reply

    # ------------------------------------------------------------------ stages

    def stage(self, name: str, request: dict) -> dict:
        started = time.perf_counter()
        if self.failed is not None:
            result = dict(self.failed)
        elif name == "correctness":
            result = self._correctness(int(request.get("trials", 3)))
        elif name == "timing":
            result = self._timing(int(request.get("warmup", 10)), int(request.get("iterations", 50)))
        elif name == "dynamic":
            # This runner is done with: the next candidate's runner, ncu run and memcheck run start now,
            # while ncu replays this one's kernels, and make their CUDA contexts only once this candidate
            # ends (a context made during the replay slowed ncu by as much as it saved, on the H200).
            self.worker.warm_spare(self.device, held=True)
            result = self._dynamic()
        else:
            result = {"status": "infrastructure_error", "message": f"unknown stage {name!r}"}
        result.setdefault("duration_s", time.perf_counter() - started)
        return result

    def _correctness(self, trials: int) -> dict:
        stage: dict = {
            "status": "passed",
            "message": "",
            "atol": float(self.spec.get("atol", 1e-2)),
            "rtol": float(self.spec.get("rtol", 1e-2)),
            "trials": [],
        }
        if self.sanitizer is not None:
            self.sanitizer.go(self.autotuned)  # memcheck's call runs beside the trials
        worst_abs = worst_rel = 0.0
        try:
            for number in range(trials + 1):
                fresh = number == trials
                name = "fresh" if fresh else "same"
                seed = call_seed(self.secret, name, number)
                label = "the fresh-address trial" if fresh else f"trial {number + 1}"
                self._runner({"cmd": "prepare", "set": name, "seed": seed}, f"{label}: preparing inputs")
                snap = self._judge({"cmd": "snapshot", "exports": self.exports[name], "seed": seed})
                if not snap.get("ok"):
                    raise StageFailed(
                        {
                            "status": "tampered",
                            "message": f"{label}: input(s) {', '.join(snap.get('mismatched', []))} do not hold the "
                            f"values seed {seed} draws: the harness that fills them was changed",
                        }
                    )
                called = self._runner({"cmd": "call", "set": name}, f"{label} (seed {seed})")
                problem = call_problem(attribute(called.get("trace") or {}), self.own)
                if problem is not None:
                    raise StageFailed(
                        {"status": problem[0], "message": f"{label} (seed {seed}): {problem[1]}"}
                    )
                trial = self._judge(
                    {"cmd": "check", "exports": self.exports[name], "seed": seed, "fresh": fresh}
                )["trial"]
                status, message = trial.pop("status"), trial.pop("message")
                stage["trials"].append(trial)
                for check in trial["outputs"].values():
                    worst_abs = max(worst_abs, check.get("max_abs_error") or 0.0)
                    worst_rel = max(worst_rel, check.get("max_rel_error") or 0.0)
                if status != "passed":
                    raise StageFailed({"status": status, "message": f"{label} (seed {seed}): {message}"})
        except StageFailed as failed:
            stage.update(failed.stage)
        gate = self._gate(stage["status"])
        if gate is not None:
            if stage["status"] == "passed":
                stage["status"], stage["message"] = "runtime_error", gate
            else:
                stage["message"] += f" | {gate}"
        elif stage["status"] == "passed":
            stage["message"] = (
                f"{trials} trials + 1 at fresh addresses passed; max abs error {worst_abs:.3g}, max rel error "
                f"{worst_rel:.3g} (where abs > atol)"
            )
            if self.sanitizer is not None:
                stage["message"] += "; memcheck clean at the smallest workload"
        return stage

    def _gate(self, status: str) -> str | None:
        """memcheck's finding for the call at the smallest workload, or None. With the gate off, it runs
        now for a call that crashed or hung, to explain it."""
        tool = self.sanitizer
        if (
            tool is None
            and status in ("runtime_error", "timeout")
            and self.worker.sanitizer_tool
            and self.device != "cpu"
        ):
            tool = self.sanitizer = self.worker.take_sanitizer()
            tool.submit(self.library, self.smallest_spec)
            tool.go(self.autotuned)
        if tool is None:
            return None
        # Memcheck gets its full time where it decides (a pass) or explains (a crash). A hang hangs under
        # memcheck too (it has run beside the call all along: one more second), and any other failure is
        # already a verdict: there it gets no more than a call.
        limits = {
            "passed": self.timeouts["sanitize_s"],
            "runtime_error": self.timeouts["sanitize_s"],
            "timeout": 1.0,
        }
        limit = limits.get(status, self.call_s)
        if not tool.wait(limit):
            return None if status != "passed" else f"memcheck gave no answer within {limit:g} s (not judged)"
        return memcheck_message(tool.report(), self.source, self.smallest_spec["axes"])

    def _timing(self, warmup: int, iterations: int) -> dict:
        entrants: list[str] = ["candidate"]
        try:
            started = self._runner({"cmd": "tstart"}, "timing")
            names = {str(i): name for i, name in enumerate(started.get("baselines") or [])}
            entrants += list(names)
            walls: dict[str, list[float]] = {e: [] for e in entrants}
            calls = 0

            def one_call(entrant: str, keep: bool) -> int:
                nonlocal calls
                seed = call_seed(self.secret, "timed", calls)
                calls += 1
                self._runner({"cmd": "tprep", "entrant": entrant, "seed": seed}, "timing: preparing a call")
                began = time.perf_counter()
                self._runner(
                    {"cmd": "tgo", "entrant": entrant}, f"timed call of {names.get(entrant, entrant)}"
                )
                wall_ms = (time.perf_counter() - began) * 1e3
                if keep:
                    walls[entrant].append(wall_ms)
                return seed

            def one_round(number: int, keep: bool) -> int:
                order = entrants if number % 2 == 0 else entrants[::-1]
                seeds = {entrant: one_call(entrant, keep) for entrant in order}
                return seeds["candidate"]

            rounds = 0
            warm_started = time.perf_counter()
            while rounds < warmup or rounds % 2 or time.perf_counter() - warm_started < self.pace["warmup_s"]:
                one_round(rounds, keep=False)
                rounds += 1
            per_round = (time.perf_counter() - warm_started) / rounds
            count = timed_iterations(iterations, per_round, self.pace["timed_s"], MAX_ITERATIONS)
            self._runner({"cmd": "tstart"}, "timing")  # the warm-up's records are not kept
            # Every timed call's outputs are judged (against the reference on that call's inputs): a kernel
            # wrong on any share of its calls fails, not only when a sample happens to hit one.
            checked: list[dict] = []
            bad: dict | None = None
            for number in range(count):
                seed = one_round(rounds + number, keep=True)
                reply = self._judge({"cmd": "check_timed", "exports": self.exports["same"], "seed": seed})
                trial = reply["trial"]
                trial["timed_call"] = number + 1
                checked.append(trial)
                if bad is None and trial["status"] != "passed":
                    bad = trial
            ended = self._runner({"cmd": "tend"}, "timing: collecting the trace", self.call_s + 60)
        except StageFailed as failed:
            return {**failed.stage, "method": self.trace_method}
        trace = attribute(ended.get("trace") or {})
        stage = timing_stage(trace, walls, names, self.spec, self.own, self.device_name)
        stage.update(warmup=rounds, l2_flush_bytes=ended.get("l2_flush_bytes"))
        # The record keeps the failing call, else three drawn at random: the count says all were read.
        kept = (
            [bad]
            if bad is not None
            else secrets.SystemRandom().sample(checked, min(RECORDED_CALLS, len(checked)))
        )
        stage["checked_calls"] = [
            {key: trial[key] for key in ("seed", "passed", "fresh_addresses", "outputs")} for trial in kept
        ]
        stage["calls_checked"] = len(checked)
        if bad is not None and stage["status"] == "passed":
            wrong = sum(trial["status"] != "passed" for trial in checked)
            stage["status"] = bad["status"]
            stage["message"] = (
                f"timed call {bad['timed_call']} of {count} (seed {bad['seed']}): {bad['message']}; {wrong} of the "
                f"{count} timed calls were wrong: the kernel answers differently when it is timed"
            )
        self.timed_calls = [window.kernels for window in trace.labelled("call:candidate")]
        for note in self.notes:
            if stage.get("message"):
                stage["message"] += f" [{note}]"
        return stage

    def _dynamic(self) -> dict:
        base = {"tool": None, "workload_axes": self.spec["axes"]}
        if self.worker.ncu is None or self.device == "cpu":
            return {
                **base,
                "status": "not_run",
                "message": "Nsight Compute (ncu) is not installed on this host",
            }
        if self.kernels is None:
            return {
                **base,
                "status": "infrastructure_error",
                "message": "the candidate's kernel names are unknown (no SASS, no cuobjdump)",
            }
        if not self.kernels:
            return {
                **base,
                "status": "dynamic_not_executed",
                "message": "the candidate's module defines no kernel: none of its own instructions ran",
            }
        base["tool"] = f"ncu {self.worker.ncu_version()}"
        if self.worker.profiling_refused is not None:
            return {**base, "status": "infrastructure_error", "message": self.worker.profiling_refused}
        profiler = self.profiler
        assert profiler is not None
        profiler.go(self.autotuned)
        started = time.perf_counter()
        if not profiler.wait(self.timeouts["dynamic_s"]):
            return {
                **base,
                "status": "timeout",
                "message": f"the profiled call did not finish within {self.timeouts['dynamic_s']:g} s",
            }
        waited_s = time.perf_counter() - started
        report = profiler.report()
        launches = parse_raw_csv(report)
        if profiler.returncode != 0 or (not launches and "==ERROR==" in report):
            errors = [line for line in report.splitlines() if line.startswith("==ERROR==")]
            evidence = errors[0] if errors else first_useful_line(profiler.app_output())
            status = "infrastructure_error" if errors else "runtime_error"
            return {
                **base,
                "status": status,
                "message": f"the profiled call {describe_exit(profiler.returncode)}"
                + (f": {evidence}" if evidence else ""),
            }
        stage = dynamic_stage(
            launches,
            self.spec.get("families") or {},
            self.spec.get("required_family", ""),
            self.spec.get("flops"),
            self.spec.get("target", ""),
            self.own,
        )
        stage["message"] += f" [ncu finished {waited_s:.1f} s after the go signal]"
        if profiler.source_counters and launches:
            stage["source_counts"], problem = profiler.source_counts(self.own or set())
            if problem:
                stage["message"] += f" [no per-instruction counts: {problem}]"
        if self.timed_calls:
            stage["profiled_over_timed"] = profiled_over_timed(launches, self.timed_calls, self.own)
            disagreement = agreement(launches, self.timed_calls, self.own)
            if disagreement is not None:
                stage["status"], stage["message"] = "profile_mismatch", disagreement[0]
        elif stage["status"] == "passed":
            stage["message"] += " (no timed calls to check the profiled kernels against)"
        return {**base, **stage}

    def end(self) -> None:
        if self.runner is not None:
            # Killed, not asked to exit: it holds nothing worth a graceful shutdown.
            self.runner.close()
        self.worker.judge_request(self.device, {"cmd": "release"}, 60)
        for tool in (self.profiler, self.sanitizer):
            if tool is not None:
                tool.close()


class Worker:
    """Serves requests; keeps the judge and one spare of each candidate process warm."""

    def __init__(self, out) -> None:
        self.out = out
        self.session: Session | None = None
        self.spare: tuple[str, Child] | None = None
        self.spare_held = False  # the spare runner waits for `start` before touching the GPU
        self.judges: dict[str, Child] = {}
        self.spare_profiler: ProfiledProcess | None = None
        self.spare_sanitizer: SanitizedProcess | None = None
        self.target: str | None = None  # the last candidate's: the next is most likely the same
        self.required = ""  # the family its task required, likewise
        self.source_counters = False  # as the last candidate asked, likewise
        self.device = "cuda"
        self.ncu = find_tool_path("ncu")
        self.profiling_refused = profiling_refusal(sandbox.available(), sandbox.landlock_abi())
        self.sanitizer_tool = find_tool_path("compute-sanitizer")
        self._ncu_version: str | None = None

    @property
    def can_profile(self) -> bool:
        return self.ncu is not None and self.profiling_refused is None

    def ncu_version(self) -> str:
        if self._ncu_version is None:
            from workbench.evaluate.gpu.toolchain import tool_version

            self._ncu_version = tool_version("ncu") or "unknown"
        return self._ncu_version

    def take_runner(self, device: str) -> Child:
        self._release_spare()
        spare, self.spare = self.spare, None
        if spare is not None and spare[0] == device and spare[1].alive():
            return spare[1]
        if spare is not None:
            spare[1].close()
        return Child(child_argv(), env={"PTXWB_DEVICE": device})

    def judge_request(self, device: str, message: dict, timeout_s: float) -> dict:
        """A request to this device's judge (started on first use, restarted if it died)."""
        judge = self.judges.get(device)
        if judge is None or not judge.alive():
            judge = Child(judge_argv(), env={"PTXWB_DEVICE": device})
            ready = judge.receive(DEFAULT_TIMEOUTS["start_s"])
            if not ready.ok:
                judge.close()
                return {
                    "error": f"the judge did not start: {ready.exit_description} {ready.evidence}".strip()
                }
            self.judges[device] = judge
        reply = judge.request(message, timeout_s)
        if not reply.ok:
            judge.close()
            self.judges.pop(device, None)
            return {
                "error": f"the judge {reply.exit_description or 'gave no answer'} {reply.evidence}".strip()
            }
        return reply.data or {}

    def take_profiler(
        self, target: str, required: str = "", source_counters: bool = False
    ) -> ProfiledProcess:
        """The spare ncu run when it was started for this target, required family (its metrics) and
        these sections and is still waiting, else a new one."""
        self.target, self.required, self.source_counters = target, required, source_counters
        profiler, self.spare_profiler = self.spare_profiler, None
        if profiler is not None and (
            (profiler.target, profiler.required, profiler.source_counters)
            != (target, required, source_counters)
            or not profiler.alive()
        ):
            profiler.close()
            profiler = None
        assert self.ncu is not None
        return profiler or ProfiledProcess(self.ncu, target, child_argv(), required, source_counters)

    def take_sanitizer(self) -> SanitizedProcess:
        sanitizer, self.spare_sanitizer = self.spare_sanitizer, None
        if sanitizer is not None and not sanitizer.alive():
            sanitizer.close()
            sanitizer = None
        assert self.sanitizer_tool is not None
        return sanitizer or SanitizedProcess(self.sanitizer_tool, child_argv())

    def warm_spare(self, device: str, held: bool = False) -> None:
        """Start the next candidate's processes now, so their start-up is off the clock: its runner, its
        ncu run for the last target and required family, its memcheck run. `held` ones go as far as they
        can without the GPU (the tools' own start, their children's and the runner's imports) and wait to
        be released."""
        if not held:
            self._release_spare()
        if self.spare is None:
            env = {"PTXWB_DEVICE": device, **({HOLD_ENV: "1"} if held else {})}
            self.spare, self.spare_held = (device, Child(child_argv(), env=env)), held
        if device == "cpu":
            return
        if self.spare_profiler is None and self.can_profile and self.ncu is not None and self.target:
            self.spare_profiler = ProfiledProcess(
                self.ncu, self.target, child_argv(), self.required, self.source_counters, held=held
            )
        if self.spare_sanitizer is None and self.sanitizer_tool:
            self.spare_sanitizer = SanitizedProcess(self.sanitizer_tool, child_argv(), held=held)

    def _release_spare(self) -> None:
        """Held spares may make their CUDA contexts now."""
        if self.spare is not None and self.spare_held:
            self.spare[1].send({"cmd": "start"})
        self.spare_held = False
        for tool in (self.spare_profiler, self.spare_sanitizer):
            if tool is not None:
                tool.start()

    def reply(self, request: dict, message: dict) -> None:
        if "id" in request:
            message = {"id": request["id"], **message}
        self.out.write(json.dumps(message) + "\n")
        self.out.flush()

    def handle(self, request: dict) -> bool:
        """Serve one request; False to stop."""
        op = request.get("op")
        if op == "hello":
            self.reply(
                request,
                {
                    "type": "hello",
                    "protocol": PROTOCOL,
                    "host": platform.node(),
                    "python": sys.version.split()[0],
                    "gpus": list_gpus(),
                    "ncu": self.ncu,
                    "sanitizer": self.sanitizer_tool,
                },
            )
        elif op == "begin":
            self._end_session(warm=False)
            self.session = Session(self, request)
            self.reply(request, {"type": "begun", **self.session.begin()})
        elif op == "stage":
            if self.session is None:
                self.reply(request, {"type": "error", "message": "no candidate begun"})
            else:
                result = self.session.stage(request["stage"], request)
                self.reply(request, {"type": "stage", "stage": request["stage"], "result": result})
        elif op == "end":
            self._end_session(warm=bool(request.get("warm", True)))
            self.reply(request, {"type": "ended"})
        elif op == "evaluate":
            self._evaluate(request)
        elif op == "shutdown":
            self.close()
            self.reply(request, {"type": "bye"})
            return False
        else:
            self.reply(request, {"type": "error", "message": f"unknown op {op!r}"})
        return True

    def _end_session(self, warm: bool) -> None:
        if self.session is not None:
            device = self.session.device
            self.session.end()
            self.session = None
            if warm:
                self.warm_spare(device)

    def _evaluate(self, request: dict) -> None:
        """All requested GPU stages of one library in one request, with progress events."""
        self._end_session(warm=False)
        session = self.session = Session(self, request)
        begun = session.begin()
        stages: dict[str, dict] = {}
        for name in [s for s in GPU_STAGES if s in session.stages]:
            self.reply(request, {"type": "progress", "stage": name, "state": "started"})
            result = session.stage(name, request)
            stages[name] = result
            self.reply(
                request,
                {
                    "type": "progress",
                    "stage": name,
                    "state": "finished",
                    "status": result.get("status"),
                    "message": result.get("message", ""),
                },
            )
            if name == "correctness" and result.get("status") not in ("passed", "not_run"):
                break  # a failed correctness stops timing and the dynamic tier
        self._end_session(warm=bool(request.get("warm", True)))
        self.reply(
            request,
            {
                "type": "result",
                "stages": stages,
                "device": begun.get("device"),
                "trace": begun.get("trace"),
                "phases_s": begun.get("phases_s"),
                "seed": begun.get("seed"),
            },
        )

    def close(self) -> None:
        self._end_session(warm=False)
        if self.spare is not None:
            self.spare[1].close()
            self.spare = None
        for judge in self.judges.values():
            judge.close()
        self.judges.clear()
        for tool in (self.spare_profiler, self.spare_sanitizer):
            if tool is not None:
                tool.close()
        self.spare_profiler = self.spare_sanitizer = None


def main() -> None:
    # A candidate's process may not open this one's pipes (its replies) or memory through /proc.
    sandbox.not_dumpable()
    # Replies own the real stdout; anything else that writes to fd 1 (a library, a tool) goes to stderr.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    worker = Worker(out)
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                request = json.loads(line)
            except json.JSONDecodeError as exc:
                worker.reply({}, {"type": "error", "message": f"malformed request: {exc.msg}"})
                continue
            try:
                if not worker.handle(request):
                    break
            except Exception as exc:  # noqa: BLE001 - a worker bug answers the request, the worker lives on
                worker.reply(request, {"type": "error", "message": f"{type(exc).__name__}: {exc}"})
    finally:
        worker.close()


if __name__ == "__main__":
    main()
