"""One candidate's GPU tiers in the worker: its runner, the shared judge, its tool processes.

`begin` starts or takes the candidate's processes, sets up the judge and loads the candidate; `stage` runs
one tier (`correctness_stage.py`, `timing_stage.py`, `dynamic_stage.py`); `end` closes what is the
candidate's. Every message to the runner and the judge goes through `ask_runner` and `ask_judge` (or
`ask_judge_beside`, for one that reads nothing of the candidate and may run while the runner goes on),
which check it and its answer against `protocol.py` and turn a failed answer into the stage's status.
Standard library only, like the worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, cast

from workbench.evaluate.gpu.agreement import SampledCalls
from workbench.evaluate.gpu.call_seeds import call_seed, new_secret
from workbench.evaluate.gpu.child_protocol import (
    JudgeCommand,
    RunnerCommand,
    RunnerReady,
    decode_judge,
    decode_runner,
    encode_runner,
)
from workbench.evaluate.gpu.hang import stuck_kernel
from workbench.evaluate.gpu.isolation import Child, Reply
from workbench.evaluate.gpu.kernel_names import module_kernels, own_kernels
from workbench.evaluate.gpu.protocol import (
    GPU_STAGES,
    TIMED_S,
    WARMUP_S,
    BeginRequest,
    EvaluateRequest,
    ProtocolError,
    StageRecord,
    Status,
    TimeLimits,
)
from workbench.evaluate.gpu.stage_failed import StageFailed, failure
from workbench.evaluate.gpu.tool_process import ProfiledProcess, SanitizedProcess, await_warm


class WorkerServices(Protocol):
    """What a session uses of the worker that serves it (the worker is one; tests may serve another)."""

    ncu: str | None
    sanitizer_tool: str | None
    profiling_refused: str | None

    @property
    def can_profile(self) -> bool: ...

    def ncu_version(self) -> str: ...

    def take_runner(self, device: str) -> Child: ...

    def take_profiler(
        self, target: str, required: str = "", source_counters: bool = False
    ) -> ProfiledProcess: ...

    def take_sanitizer(self) -> SanitizedProcess: ...

    def judge_request(self, device: str, message: JudgeCommand, timeout_s: float) -> dict[str, Any]: ...

    def judge_beside(self, device: str, message: JudgeCommand) -> Callable[[float], dict[str, Any]]: ...

    def warm_spare(self, device: str, held: bool = False) -> None: ...

    def release_spares(self) -> None: ...

    def next_profiler(self) -> ProfiledProcess | None: ...

    def gpu_uuid(self, device: str) -> str: ...

    def hold_gpu(self, uuid: str = "") -> str: ...


# How long a timing stage waits for an ncu run's first range to end (it takes ~1.3 s on the H200 once the
# process has its context; a spare still importing takes its imports' remaining seconds more).
WARM_WAIT_S = 10.0

# The profiled call is call 2 to PROFILED_POSITIONS + 1 of its process, drawn from the secret: the runner's
# timed calls are its calls 15 to 65 or so, so a kernel that keys on its call count cannot run the target's
# path only where the profiler might be without running it on the timed calls too.
PROFILED_POSITIONS = 64


def calls_before_profiled(secret: int) -> int:
    """How many unprofiled calls the profiled process makes first: 1 to PROFILED_POSITIONS."""
    return 1 + call_seed(secret, "profile_position") % PROFILED_POSITIONS


class PhaseClock:
    """Wall time of consecutive phases outside the stages (where a warm evaluation's seconds go)."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._last = time.perf_counter()

    def mark(self, name: str) -> None:
        """The time since the last mark, added to `name`'s (a phase may come in more than one piece)."""
        now = time.perf_counter()
        self.phases[name] = round(self.phases.get(name, 0.0) + now - self._last, 4)
        self._last = now


class Session:
    """The GPU tiers of one candidate: its runner, the shared judge, its tool processes."""

    def __init__(self, worker: WorkerServices, request: BeginRequest | EvaluateRequest) -> None:
        self.worker = worker
        self.limits = TimeLimits.of(request.get("timeouts"))  # first: a malformed request is refused whole
        self.library = request["library"]
        # Every call's inputs from this evaluation's secret (a request's `seed` replays one): the
        # workload's public seed would let a kernel tell the profiled call or a trial by its values.
        seed = request.get("seed")
        self.secret = int(seed) if seed is not None else new_secret()
        self.spec: dict[str, Any] = {**request["spec"], "seed": call_seed(self.secret, "setup")}
        self.device: str = self.spec.get("device", "cuda")
        kernels = request.get("kernels")
        if kernels is None:
            kernels = module_kernels(self.library, request.get("sass_path"))
        self.kernels: list[str] | None = None if kernels is None else list(kernels)
        self.own = own_kernels(self.kernels, triton=bool(self.spec.get("triton_entry")))
        self.stages: list[str] = list(request.get("stages") or GPU_STAGES)
        self.sanitize = bool(request.get("sanitize", True)) and self.device != "cpu"
        self.pace = {"warmup_s": WARMUP_S, "timed_s": TIMED_S, **(request.get("pace") or {})}
        self.runner: Child | None = None
        self.failed: StageRecord | None = None
        self.device_name: str | None = None
        self.trace_method: str | None = None
        self.exports: dict[str, Any] = {}
        self.notes: list[str] = []
        self.call_s = self.limits.call_floor_s
        self.profiler: ProfiledProcess | None = None
        self.sanitizer: SanitizedProcess | None = None
        self.timed_calls: list[list] | None = None
        self.timed_counters = SampledCalls([], "", [], 0.0, [])  # each timed call's PM-sampled counters
        self.last_order: list[str] = []  # kernels of the last completed correctness call, by start
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
    def smallest_spec(self) -> dict[str, Any]:
        smallest = self.spec.get("smallest") or {}
        return {
            **self.spec,
            "axes": smallest.get("axes") or self.spec["axes"],
            "flops": smallest.get("flops"),
            "seed": call_seed(self.secret, "memcheck"),
        }

    # ------------------------------------------------------------------ begin

    def begin(self) -> dict[str, Any]:
        """Start the candidate's processes, set up the judge, load the candidate: the `begun` fields."""
        clock = PhaseClock()
        if self.device != "cpu":
            # Held before the runner's take releases any spares (their contexts, the next ncu range) and
            # before a fresh worker's first processes make theirs; by the GPUs judged on before where the
            # driver could not name this one (the runner's hello names it then).
            self._note_lock(self.worker.hold_gpu(self.worker.gpu_uuid(self.device)))
            clock.mark("gpu_lock")
        self._start_processes()
        clock.mark("spawn")
        try:
            self._runner_ready(clock)
            self._judge_setup(clock)
            self._load(clock)
        except StageFailed as failed:
            self.failed = failed.stage
            return {"ok": False, **self.failed}
        return {
            "ok": self.failed is None,
            "phases_s": clock.phases,
            "device": self.device_name,
            "trace": self.trace_method,
            "call_limit_s": self.call_s,
            "seed": self.secret,
            **(self.failed or {}),
        }

    def _start_processes(self) -> None:
        worker = self.worker
        self.runner = worker.take_runner(self.device)
        if "dynamic" in self.stages and self.kernels and worker.can_profile and self.device != "cpu":
            # The profiled process makes the timed workload's inputs meanwhile (it loads the candidate only
            # at the go, after the timing stage: `candidate_entry.load_after_go`).
            self.profiler = worker.take_profiler(
                self.spec.get("target", ""),
                self.spec.get("required_family", ""),
                bool(self.spec.get("source_counters")),
            )
            self.profiler.submit(
                self.library,
                {
                    **self.spec,
                    "seed": call_seed(self.secret, "profile"),
                    "calls_before": calls_before_profiled(self.secret),
                },
            )
        if self.sanitize and "correctness" in self.stages and worker.sanitizer_tool:
            self.sanitizer = worker.take_sanitizer()
            self.sanitizer.submit(self.library, self.smallest_spec)

    def _runner_ready(self, clock: PhaseClock) -> None:
        assert self.runner is not None
        ready = self.runner.receive(self.limits.start_s)
        clock.mark("runner_ready")
        if not ready.ok:
            raise StageFailed(
                {
                    "status": Status.infrastructure_error,
                    "message": f"the GPU child did not start: {ready.exit_description}"
                    + (f" ({ready.evidence})" if ready.evidence else ""),
                }
            )
        try:
            hello = cast(RunnerReady, decode_runner(ready.data, "ready"))
        except ProtocolError as exc:
            raise StageFailed(
                {"status": Status.infrastructure_error, "message": f"the GPU child's hello: {exc}"}
            ) from None
        self.device_name = hello["device"]
        self.trace_method = hello["trace"]
        if hello["trace_note"]:
            self.notes.append(hello["trace_note"])
        if hello["gpu_uuid"]:
            # From here to the end nothing else judged on this GPU runs (gpu_lock.py); the wait is a phase.
            self._note_lock(self.worker.hold_gpu(hello["gpu_uuid"]))
            clock.mark("gpu_lock")

    def _note_lock(self, why: str) -> None:
        note = f"{why}: a candidate of another worker may be judged on it at once"
        if why and note not in self.notes:
            self.notes.append(note)

    def _judge_setup(self, clock: PhaseClock) -> None:
        """The judge gets the task; its time of the primary baseline sets the candidate's call limit."""
        start_s = self.limits.start_s
        self.judge_once({"cmd": "setup", "spec": self.spec}, start_s)
        clock.mark("judge_setup")
        try:
            timed = self.judge_once({"cmd": "baseline_ms"}, start_s)
            baseline_ms = float(timed.get("ms") or 0.0)
        except StageFailed:
            baseline_ms = 0.0  # as before: no baseline time leaves the floor as the limit
        clock.mark("baseline")
        self.call_s = self.limits.call_limit_s(baseline_ms)

    def judge_once(self, message: JudgeCommand, timeout_s: float) -> dict[str, Any]:
        """A judge request outside a stage (the runner need not stop): its checked answer."""
        reply = self.worker.judge_request(self.device, message, timeout_s)
        return self._judge_answer(message, reply)

    def _load(self, clock: PhaseClock) -> None:
        assert self.runner is not None
        command: RunnerCommand = {
            "cmd": "load",
            "library": self.library,
            "kernels": self.kernels,
            "spec": self.spec,
            "timing": "timing" in self.stages,
        }
        loaded = self.runner.request(encode_runner(command), self.limits.start_s + self.call_s)
        try:
            answer = self._runner_answer(command, loaded, "loading the library")
            self.exports = answer["exports"]
            self.notes += answer.get("notes") or []
            self.autotuned = answer.get("autotuned")
        except StageFailed as failed:
            self.failed = failed.stage
        clock.mark("load")

    # ------------------------------------------------------------------ the children

    def ask_runner(
        self, message: RunnerCommand, what: str, timeout_s: float | None = None, runner: Child | None = None
    ) -> dict[str, Any]:
        """A request to the candidate's runner (or `runner`) whose failure ends the stage; its reply's data."""
        runner = runner or self.runner
        assert runner is not None
        reply = runner.request(encode_runner(message), timeout_s or self.call_s)
        return self._runner_answer(message, reply, what)

    def _runner_answer(self, message: RunnerCommand, reply: Reply, what: str) -> dict[str, Any]:
        if not reply.ok or reply.forged:
            failed = failure(Status.runtime_error, what, reply)
            stuck = stuck_kernel(reply.hang, self.own, self.last_order) if reply.timed_out else None
            if stuck:
                failed["message"] += f"; {stuck}"
            raise StageFailed(failed)
        try:
            data = cast(dict[str, Any], decode_runner(reply.data, message["cmd"]))
        except ProtocolError as exc:
            raise StageFailed({"status": Status.infrastructure_error, "message": f"{what}: {exc}"}) from None
        if data.get("failed"):
            raise StageFailed({"status": Status.runtime_error, "message": f"{what}: {data['failed']}"})
        if data.get("error"):
            raise StageFailed({"status": Status.infrastructure_error, "message": f"{what}: {data['error']}"})
        if data.get("changed"):
            raise StageFailed(
                {
                    "status": Status.tampered,
                    "message": f"{what}: the harness in the candidate's process changed during the call "
                    f"({', '.join(data['changed'][:3])})",
                }
            )
        return data

    def ask_judge(self, message: JudgeCommand, runner: Child | None = None) -> dict[str, Any]:
        """A judge request made while the candidate's runner (or `runner`, whose buffers it reads) is
        stopped, so nothing in it runs while the judge reads."""
        runner = runner or self.runner
        assert runner is not None
        runner.pause()
        try:
            reply = self.worker.judge_request(self.device, message, self.judge_timeout_s)
        finally:
            runner.resume()
        return self._judge_answer(message, reply)

    def ask_judge_beside(self, message: JudgeCommand) -> Callable[[], dict[str, Any]]:
        """A judge request that reads nothing of the candidate, sent now while the runner goes on (it is
        not stopped): the function that waits for its checked answer. Nothing else may be asked of the
        judge before it is called."""
        answer = self.worker.judge_beside(self.device, message)
        return lambda: self._judge_answer(message, answer(self.judge_timeout_s))

    @property
    def judge_timeout_s(self) -> float:
        """How long a judge request may take: its start, should it have to start again, and ten calls."""
        return self.limits.start_s + 10 * self.call_s

    def _judge_answer(self, message: JudgeCommand, reply: dict[str, Any]) -> dict[str, Any]:
        if reply.get("error"):
            raise StageFailed(
                {"status": Status.infrastructure_error, "message": f"the judge: {reply['error']}"}
            )
        try:
            data = cast(dict[str, Any], decode_judge(reply, message["cmd"]))
        except ProtocolError as exc:
            raise StageFailed(
                {"status": Status.infrastructure_error, "message": f"the judge: {exc}"}
            ) from None
        if data.get("unreadable"):
            raise StageFailed(
                {"status": Status.tampered, "message": f"the candidate's buffers: {data['unreadable']}"}
            )
        return data

    def _profilers(self) -> tuple[ProfiledProcess | None, ProfiledProcess | None]:
        """The ncu runs whose first range may be in flight: this candidate's and the next one's."""
        return self.profiler, self.worker.next_profiler()

    def profiler_warming(self) -> bool:
        """Whether an ncu first range is in flight (`_profilers`)."""
        return any(p is not None and p.warming() for p in self._profilers())

    def await_profiler_warm(self) -> None:
        """Wait, at most WARM_WAIT_S, until no ncu first range is in flight (`_profilers`), so none runs
        beside the sampled, timed calls; one still running then is noted."""
        if not await_warm(self._profilers(), WARM_WAIT_S):
            self.notes.append(
                f"an Nsight Compute run's first range was still running {WARM_WAIT_S:g} s into the timing stage"
            )

    def end(self) -> None:
        """Every process of this candidate closed, whatever fails on the way (a tool left running would
        hold the GPU for the next one)."""
        try:
            if self.runner is not None:
                # Killed, not asked to exit: it holds nothing worth a graceful shutdown.
                self.runner.close()
            self.worker.judge_request(self.device, {"cmd": "release"}, 60)
        finally:
            for tool in (self.profiler, self.sanitizer):
                if tool is not None:
                    tool.close()
