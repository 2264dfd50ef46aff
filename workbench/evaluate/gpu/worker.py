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
are made here (`session.py` and its stages, `trace_checks.py`, `timing.py`, `agreement.py`).

Requests (one JSON object per line; replies echo `id`; every message is typed in `protocol.py`, and a
malformed one is answered with an `error` whose status is infrastructure_error, naming the field):
- `{"op": "hello"}` -> `{"type": "hello", "protocol": 3, "host", "python", "gpus": [...], "ncu": path|null}`
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
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from typing import IO, Any, cast

from workbench.evaluate.gpu import sandbox
from workbench.evaluate.gpu.child_protocol import JudgeCommand, encode_judge
from workbench.evaluate.gpu.device_uuid import gpu_uuid
from workbench.evaluate.gpu.gpu_lock import GpuLock
from workbench.evaluate.gpu.isolation import HOLD_ENV, Child
from workbench.evaluate.gpu.ncu_metrics import listed_metrics
from workbench.evaluate.gpu.profile import counter_metrics, ordinary_load_metrics
from workbench.evaluate.gpu.protocol import (
    GPU_STAGES,
    PROTOCOL,
    EvaluateRequest,
    HostRequest,
    ProtocolError,
    StageHead,
    Status,
    TimeLimits,
    WorkerReply,
    decode_host,
    encode_host,
)
from workbench.evaluate.gpu.session import WARM_WAIT_S, Session
from workbench.evaluate.gpu.spare_runners import SpareRunners
from workbench.evaluate.gpu.stages import run_stage
from workbench.evaluate.gpu.tool_process import ProfiledProcess, SanitizedProcess
from workbench.evaluate.gpu.tool_spares import ToolSpares


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


# Tool runs kept started for the next candidates, each (tool_spares.py says why two).
SPARE_PROFILERS = 2
SPARE_SANITIZERS = 2


class Worker:
    """Serves requests; keeps the judge, spare runners and spares of each tool run warm."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.session: Session | None = None
        self.runners = SpareRunners(self._start_runner)
        self.judges: dict[str, Child] = {}
        self.spare_profilers: ToolSpares[ProfiledProcess] = ToolSpares(SPARE_PROFILERS)
        self.spare_sanitizers: ToolSpares[SanitizedProcess] = ToolSpares(SPARE_SANITIZERS)
        self.target: str | None = None  # the last candidate's: the next is most likely the same
        self.required = ""  # the family its task required, likewise
        self.source_counters = False  # as the last candidate asked, likewise
        self.device = "cuda"
        self.ncu = find_tool_path("ncu")
        self.profiling_refused = profiling_refusal(sandbox.available(), sandbox.landlock_abi())
        self.sanitizer_tool = find_tool_path("compute-sanitizer")
        self._ncu_version: str | None = None
        self._listed_metrics: dict[str, frozenset[str]] = {}  # target -> what this ncu lists for its chip
        # The last end after a reply, in seconds: a request that came meanwhile waited behind it.
        self.previous_end_s: float | None = None
        self.gpu_locks: dict[str, GpuLock] = {}  # by GPU UUID, opened at the first candidate on it
        self.gpu_uuids: dict[str, str] = {}  # device name -> its GPU's UUID ("": the driver did not say)

    @property
    def can_profile(self) -> bool:
        return self.ncu is not None and self.profiling_refused is None

    def ncu_version(self) -> str:
        if self._ncu_version is None:
            from workbench.evaluate.gpu.toolchain import tool_version

            self._ncu_version = tool_version("ncu") or "unknown"
        return self._ncu_version

    def extra_metrics(self, target: str, required: str) -> tuple[str, ...]:
        """What ncu collects beyond the tier's own metrics, of the metrics this ncu lists (asked once per
        target, offline): the counters the timed calls are compared on, and for a memory-bound family
        what its ordinary loads fetched."""
        if self.ncu is None:
            return ()
        if target not in self._listed_metrics:
            self._listed_metrics[target] = listed_metrics(self.ncu, target)
        listed = self._listed_metrics[target]
        return counter_metrics(listed) + ordinary_load_metrics(required, listed)

    def take_runner(self, device: str) -> Child:
        self.release_spares()
        return self.runners.take(device) or self._start_runner(device, False)

    @staticmethod
    def _start_runner(device: str, held: bool) -> Child:
        return Child(
            child_argv(), env={"PTXWB_DEVICE": device, **({HOLD_ENV: "1"} if held else {})}, wake=True
        )

    def judge_request(self, device: str, message: JudgeCommand, timeout_s: float) -> dict[str, Any]:
        """A request to this device's judge (started on first use, restarted if it died): its answer, or
        `{"error"}` saying why there is none."""
        return self.judge_beside(device, message)(timeout_s)

    def judge_beside(self, device: str, message: JudgeCommand) -> Callable[[float], dict[str, Any]]:
        """`judge_request` sent now and answered later: the function that waits (at most its argument)
        for the answer. Nothing else may be asked of this judge before it is called."""
        judge = self.judges.get(device)
        if judge is None or not judge.alive():
            judge = Child(judge_argv(), env={"PTXWB_DEVICE": device})
            ready = judge.receive(TimeLimits().start_s)
            if not ready.ok:
                judge.close()
                error = {
                    "error": f"the judge did not start: {ready.exit_description} {ready.evidence}".strip()
                }
                return lambda _timeout_s: error
            self.judges[device] = judge
        asked = judge.ask(encode_judge(message))

        def answer(timeout_s: float) -> dict[str, Any]:
            reply = judge.answer(asked, timeout_s)
            if not reply.ok:
                judge.close()
                self.judges.pop(device, None)
                return {
                    "error": f"the judge {reply.exit_description or 'gave no answer'} {reply.evidence}".strip()
                }
            return reply.data or {}

        return answer

    def take_profiler(
        self, target: str, required: str = "", source_counters: bool = False
    ) -> ProfiledProcess:
        """The oldest spare ncu run started for this target, required family (its metrics) and these
        sections and still waiting, else a new one."""
        self.target, self.required, self.source_counters = target, required, source_counters
        wanted = (target, required, source_counters)
        profiler = self.spare_profilers.take(lambda p: (p.target, p.required, p.source_counters) == wanted)
        assert self.ncu is not None
        extra = self.extra_metrics(target, required)
        return profiler or ProfiledProcess(
            self.ncu, target, child_argv(), required, source_counters, extra_metrics=extra
        )

    def take_sanitizer(self) -> SanitizedProcess:
        sanitizer = self.spare_sanitizers.take(lambda _: True)
        assert self.sanitizer_tool is not None
        return sanitizer or SanitizedProcess(self.sanitizer_tool, child_argv())

    def warm_spare(self, device: str, held: bool = False) -> None:
        """Start the next candidates' processes now, so their start-up is off the clock: runners
        (spare_runners.py), the next two's ncu runs for the last target and required family and their
        memcheck runs (tool_spares.py). `held` ones go as far as they can without the GPU (the tools'
        own start, their children's and the runner's imports: about 5 s on the H200, against 0.3 s of
        GPU set-up after the release) and wait to be released."""
        self.runners.fill(device, held)
        if device == "cpu":
            if not held:
                self.release_spares()
            return
        ncu, target, sanitizer = self.ncu, self.target, self.sanitizer_tool
        if self.can_profile and ncu is not None and target:
            required, counted = self.required, self.source_counters
            extra = self.extra_metrics(target, required)  # listed when its candidate took its profiler
            self.spare_profilers.fill(
                lambda: ProfiledProcess(
                    ncu, target, child_argv(), required, counted, held=held, extra_metrics=extra
                )
            )
        if sanitizer is not None:
            self.spare_sanitizers.fill(lambda: SanitizedProcess(sanitizer, child_argv(), held=held))
        if not held:  # after the fill, so the ncu run next in line warms while no candidate waits
            self.release_spares()

    def release_spares(self) -> None:
        """Held spares may make their CUDA contexts now: nothing of the current candidate is timed or
        profiled any more. The ncu run next in line runs its first range too (one at a time: the next
        candidate's timing stage waits for it, `Session.await_profiler_warm`)."""
        self.runners.release()
        self.spare_profilers.release()
        self.spare_sanitizers.release()
        profiler = self.spare_profilers.next_up()
        if profiler is not None:
            profiler.warm()

    def next_profiler(self) -> ProfiledProcess | None:
        return self.spare_profilers.next_up()

    def gpu_uuid(self, device: str) -> str:
        """The UUID of `device`'s GPU, asked of the driver once (device_uuid.py); "" where it cannot say,
        and why is printed to the worker's log."""
        if device not in self.gpu_uuids:
            uuid, why = gpu_uuid(device)
            if why:
                print(f"the GPU's lock waits for the runner's hello: {why}", file=sys.stderr, flush=True)
            self.gpu_uuids[device] = uuid
        return self.gpu_uuids[device]

    def hold_gpu(self, uuid: str = "") -> str:
        """The GPU's lock (`uuid`'s, else each one this worker judged on before) held until `release_gpu`,
        waiting for another worker's candidate on it; why there is none, where so."""
        if uuid and uuid not in self.gpu_locks:
            self.gpu_locks[uuid] = GpuLock(uuid)
        locks = [self.gpu_locks[uuid]] if uuid else list(self.gpu_locks.values())
        for lock in locks:
            lock.hold()
        return "; ".join(lock.why for lock in locks if lock.why)

    def release_gpu(self) -> None:
        """The GPU let go once the next ncu run's first range is over (it started with this candidate's
        profiled call; another worker's sampling must not open beside it)."""
        next_up = self.next_profiler()
        for lock in self.gpu_locks.values():
            lock.release_after(lambda: next_up is not None and next_up.warming(), WARM_WAIT_S)

    def reply(self, request: dict[str, Any], message: WorkerReply) -> None:
        if isinstance(request, dict) and "id" in request:
            message = cast(WorkerReply, {"id": request["id"], **message})
        self.out.write(encode_host(message) + "\n")
        self.out.flush()

    def refuse(self, request: dict[str, Any], message: str) -> None:
        """An error reply: the request was malformed, unknown or out of order."""
        self.reply(request, {"type": "error", "status": Status.infrastructure_error, "message": message})

    def handle(self, data: dict[str, Any]) -> bool:
        """Serve one request; False to stop."""
        try:
            request = cast(HostRequest, decode_host(data))
        except ProtocolError as exc:
            self.refuse(data, str(exc))
            return True
        if "op" not in request:  # a reply's shape sent as a request
            self.refuse(data, "malformed message: field 'op' is missing")
            return True
        try:
            return self._serve(request, data)
        except ProtocolError as exc:  # a field only the op's own code can check (a time limit's name)
            self.refuse(data, str(exc))
            return True

    def _serve(self, request: HostRequest, data: dict[str, Any]) -> bool:
        if request["op"] == "hello":
            self.reply(data, self._hello())
        elif request["op"] == "begin":
            self._end_session(warm=False)
            self.session = Session(self, request)
            self.reply(data, cast(WorkerReply, {"type": "begun", **self._begin(self.session)}))
        elif request["op"] == "stage":
            if self.session is None:
                self.refuse(data, "no candidate begun")
            else:
                result = run_stage(self.session, request["stage"], request)
                reply: WorkerReply = {
                    "type": "stage",
                    "stage": request["stage"],
                    "result": cast(StageHead, result),
                }
                self.reply(data, reply)
        elif request["op"] == "end":
            self.reply(data, {"type": "ended"})
            self._end_after_reply(warm=bool(request.get("warm", True)))
        elif request["op"] == "evaluate":
            self._evaluate(request)
        else:  # shutdown
            self.close()
            self.reply(data, {"type": "bye"})
            return False
        return True

    def _hello(self) -> WorkerReply:
        return {
            "type": "hello",
            "protocol": PROTOCOL,
            "host": platform.node(),
            "python": sys.version.split()[0],
            "gpus": list_gpus(),
            "ncu": self.ncu,
            "sanitizer": self.sanitizer_tool,
        }

    def _end_session(self, warm: bool) -> None:
        session, self.session = self.session, None  # an end that fails is not tried again by each begin
        if session is not None:
            try:
                session.end()
                if warm:
                    self.warm_spare(session.device)
            finally:
                self.release_gpu()  # after the spares' release: a range it starts keeps the lock too

    def _end_after_reply(self, warm: bool) -> None:
        """The session's end once its verdict is sent: the caller does not wait for its processes to be
        closed and the next one's started (0.12-0.17 s at 77bf9c8, `phases_s["end"]`); the next request does.
        The request is answered already, so a failure here is logged, not sent as a second reply."""
        started = time.perf_counter()
        try:
            self._end_session(warm)
        except Exception as exc:  # noqa: BLE001 - the worker lives on, and serves the next request
            print(f"ending the candidate's session failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        self.previous_end_s = time.perf_counter() - started

    def _begin(self, session: Session) -> dict[str, Any]:
        """The session begun, its phases with the end before it (`previous_end`) where there was one."""
        begun = session.begin()
        if self.previous_end_s is not None and begun.get("phases_s") is not None:
            begun["phases_s"]["previous_end"] = round(self.previous_end_s, 4)
        self.previous_end_s = None
        return begun

    def _evaluate(self, request: EvaluateRequest) -> None:
        """All requested GPU stages of one library in one request, with progress events."""
        data = cast(dict[str, Any], request)
        self._end_session(warm=False)
        session = self.session = Session(self, request)
        begun = self._begin(session)
        stages: dict[str, dict] = {}
        for name in [s for s in GPU_STAGES if s in session.stages]:
            self.reply(data, {"type": "progress", "stage": name, "state": "started"})
            result = run_stage(session, name, request)
            stages[name] = result
            self.reply(
                data,
                {
                    "type": "progress",
                    "stage": name,
                    "state": "finished",
                    "status": result["status"],
                    "message": result.get("message", ""),
                },
            )
            if name == "correctness" and result["status"] not in (Status.passed, Status.not_run):
                break  # a failed correctness stops timing and the dynamic tier
        self.reply(
            data,
            {
                "type": "result",
                "stages": stages,
                "device": begun.get("device"),
                "trace": begun.get("trace"),
                "phases_s": begun.get("phases_s"),
                "seed": begun.get("seed"),
            },
        )
        self._end_after_reply(warm=bool(request.get("warm", True)))

    def close(self) -> None:
        self._end_session(warm=False)
        self.runners.close()
        for judge in self.judges.values():
            judge.close()
        self.judges.clear()
        self.spare_profilers.close()
        self.spare_sanitizers.close()
        for lock in self.gpu_locks.values():
            lock.close()
        self.gpu_locks.clear()


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
                worker.refuse({}, f"malformed request: {exc.msg}")
                continue
            try:
                if not worker.handle(request):
                    break
            except Exception as exc:  # noqa: BLE001 - a worker bug answers the request, the worker lives on
                worker.refuse(request, f"{type(exc).__name__}: {exc}")
    finally:
        worker.close()


if __name__ == "__main__":
    main()
