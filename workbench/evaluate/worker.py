"""The GPU worker: `python -m workbench.evaluate.worker`, JSON lines on stdin/stdout.

One worker serves many candidates; each candidate gets a fresh child process (`child.py`) in its own
process group, and the worker survives whatever the candidate does. Local and ssh executors talk to it
the same way (over a pipe, or over `ssh host python -m workbench.evaluate.worker`).

Requests (one JSON object per line; replies echo `id`):
- `{"op": "hello"}` -> `{"type": "hello", "protocol": 1, "host", "python", "gpus": [...], "ncu": path|null}`
- `{"op": "build", "source", "target", "timeout_s"}` -> `{"type": "built", "build", "static", "kernels"}`:
  build + static tier on this host (needs the whole workbench installed here, nvcc and cuobjdump).
- `{"op": "begin", "library", "kernels", "spec", "stages", "timeouts"}` -> `{"type": "begun", "ok", ...}`
- `{"op": "stage", "stage": "correctness"|"dynamic"|"timing", "trials"?, "warmup"?, "iterations"?}`
  -> `{"type": "stage", "stage", "result": {...}}` (the stage in `EvalResult`'s JSON shape)
- `{"op": "end"}` -> `{"type": "ended"}`
- `{"op": "evaluate", "library", "kernels", "spec", "stages", ...}` -> progress events
  `{"type": "progress", "stage", "state", "status"?, "message"?}` then `{"type": "result", "stages", "device"}`
- `{"op": "shutdown"}`

The GPU path uses only the standard library here (torch lives in the children), so a bare GPU host
with torch, apache-tvm-ffi and cupti-python can serve it; `build` alone imports the rest.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from workbench.evaluate.isolation import Child, describe_exit, first_useful_line
from workbench.evaluate.profile import dynamic_stage, parse_raw_csv
from workbench.evaluate.profiled_process import ProfiledProcess

PROTOCOL = 1
GPU_STAGES = ("correctness", "dynamic", "timing")
DEFAULT_TIMEOUTS = {"start_s": 180.0, "correctness_s": 120.0, "dynamic_s": 300.0, "timing_s": 120.0}
_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)", re.MULTILINE)


def find_ncu() -> str | None:
    from workbench.evaluate.toolchain import find_tool

    path = find_tool("ncu")
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


def module_kernels(library: str, sass_path: str | None = None) -> list[str] | None:
    """Mangled names of the kernels a candidate defines, from its SASS dump, else cuobjdump on the
    library; [] when it defines none (then every kernel it launches is foreign), None when unknown."""
    if sass_path and Path(sass_path).is_file():
        return sorted(set(_FUNCTION.findall(Path(sass_path).read_text(errors="replace"))))
    from workbench.evaluate.toolchain import find_tool

    tool = find_tool("cuobjdump")
    if tool is None:
        return None
    try:
        out = subprocess.run(
            [str(tool), "--dump-sass", library], check=False, capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return sorted(set(_FUNCTION.findall(out.stdout)))


def child_argv() -> list[str]:
    return [sys.executable, "-m", "workbench.evaluate.child"]


def worker_argv() -> list[str]:
    return [sys.executable, "-m", "workbench.evaluate.worker"]


def _failure(status: str, what: str, reply) -> dict:
    """A stage dict for a child that gave no reply: timed out, crashed, or exited."""
    if reply.timed_out:
        message = f"{what}: no answer within the time limit; the candidate's process group was killed"
    else:
        message = f"{what}: the candidate's process {reply.exit_description}"
    if reply.evidence:
        message += f" ({reply.evidence})"
    return {"status": "timeout" if reply.timed_out else status, "message": message}


class Session:
    """The GPU stages of one candidate: its child, and its Nsight Compute run (started before it)."""

    def __init__(self, worker: Worker, request: dict) -> None:
        self.worker = worker
        self.library = request["library"]
        self.spec = request["spec"]
        kernels = request.get("kernels")
        if kernels is None:
            kernels = module_kernels(self.library, request.get("sass_path"))
        self.kernels: list[str] | None = None if kernels is None else list(kernels)
        self.stages = list(request.get("stages") or GPU_STAGES)
        self.timeouts = {**DEFAULT_TIMEOUTS, **(request.get("timeouts") or {})}
        self.child: Child | None = None
        self.failed: dict | None = None
        self.device: str | None = None
        self.trace_method: str | None = None
        self.profiler: ProfiledProcess | None = None

    @property
    def profile_axes(self) -> dict:
        """The axes of the workload ncu profiles: the spec's smallest one, else the evaluated one."""
        return (self.spec.get("profile") or {}).get("axes") or self.spec["axes"]

    def begin(self) -> dict:
        child = self.worker.take_child()
        self.child = child
        if "dynamic" in self.stages and self.kernels and self.worker.ncu:
            # The profiled process loads the module and makes its inputs while correctness runs.
            self.profiler = self.worker.take_profiler(self.spec.get("target", ""))
            self.profiler.submit(self.library, {**self.spec, "axes": self.profile_axes})
        ready = child.receive(self.timeouts["start_s"])
        if not ready.ok:
            self.failed = {
                "status": "infrastructure_error",
                "message": f"the GPU child did not start: {ready.exit_description}"
                + (f" ({ready.evidence})" if ready.evidence else ""),
            }
            return {"ok": False, **self.failed}
        self.device = ready.data.get("device")
        self.trace_method = ready.data.get("trace")
        loaded = child.request(
            {"cmd": "load", "library": self.library, "kernels": self.kernels, "spec": self.spec},
            self.timeouts["correctness_s"],
        )
        if not loaded.ok:
            self.failed = _failure("runtime_error", "loading the library", loaded)
        elif not loaded.data.get("ok"):
            self.failed = {
                "status": "runtime_error",
                "message": f"loading the library: {loaded.data.get('error')}",
            }
        return {
            "ok": self.failed is None,
            "device": self.device,
            "trace": self.trace_method,
            **(self.failed or {}),
        }

    def stage(self, name: str, request: dict) -> dict:
        started = time.perf_counter()
        result = self._stage(name, request)
        result.setdefault("duration_s", time.perf_counter() - started)
        return result

    def _stage(self, name: str, request: dict) -> dict:
        if self.failed is not None:
            return dict(self.failed)
        assert self.child is not None
        if name == "correctness":
            reply = self.child.request(
                {"cmd": "correctness", "trials": int(request.get("trials", 3))},
                self.timeouts["correctness_s"],
            )
            return reply.data["stage"] if reply.ok else _failure("runtime_error", "correctness", reply)
        if name == "timing":
            reply = self.child.request(
                {
                    "cmd": "timing",
                    "warmup": int(request.get("warmup", 10)),
                    "iterations": int(request.get("iterations", 50)),
                    "ceilings": self.worker.ceilings,
                },
                self.timeouts["timing_s"],
            )
            if not reply.ok:
                return _failure("runtime_error", "timing", reply)
            if reply.data.get("ceilings"):
                self.worker.ceilings = reply.data["ceilings"]
            return reply.data["stage"]
        if name == "dynamic":
            return self._dynamic()
        return {"status": "infrastructure_error", "message": f"unknown stage {name!r}"}

    def _dynamic(self) -> dict:
        profile = self.spec.get("profile") or {}
        base = {"tool": None, "workload_axes": self.profile_axes}
        if self.worker.ncu is None:
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
        profiler = self.profiler
        assert profiler is not None
        profiler.go()
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
            profile.get("flops") or self.spec.get("flops"),
            self.spec.get("target", ""),
            set(self.kernels),
        )
        # Where the tier's time goes (ncu and its process started before this candidate).
        stage["message"] += f" [ncu finished {waited_s:.1f} s after the go signal]"
        return {**base, **stage}

    def end(self) -> None:
        if self.child is not None:
            # Killed, not asked to exit: it holds nothing worth a graceful shutdown, and CUDA and
            # CUPTI teardown in an orderly exit took seconds on the H200.
            self.child.close()
        if self.profiler is not None:
            self.profiler.close()


class Worker:
    """Serves requests; caches this device's measured ceilings; keeps one spare child warm."""

    def __init__(self, out) -> None:
        self.out = out
        self.ceilings: dict | None = None
        self.session: Session | None = None
        self.spare: Child | None = None
        self.spare_profiler: ProfiledProcess | None = None
        self.target: str | None = None  # the last candidate's: the next is most likely the same
        self.ncu = find_ncu()
        self._ncu_version: str | None = None

    def ncu_version(self) -> str:
        if self._ncu_version is None:
            from workbench.evaluate.toolchain import tool_version

            self._ncu_version = tool_version("ncu") or "unknown"
        return self._ncu_version

    def take_child(self) -> Child:
        child, self.spare = self.spare, None
        if child is None or not child.alive():
            if child is not None:
                child.close()
            child = Child(child_argv())
        return child

    def take_profiler(self, target: str) -> ProfiledProcess:
        """The spare ncu run when it was started for this target and is still waiting, else a new one."""
        self.target = target
        profiler, self.spare_profiler = self.spare_profiler, None
        if profiler is not None and (profiler.target != target or not profiler.alive()):
            profiler.close()
            profiler = None
        assert self.ncu is not None
        return profiler or ProfiledProcess(self.ncu, target, child_argv())

    def warm_spare(self) -> None:
        """Start the next candidate's processes now, between candidates, so their start-up is off the
        clock: its child, and its ncu run for the target the last candidate had."""
        if self.spare is None:
            self.spare = Child(child_argv())
        if self.spare_profiler is None and self.ncu and self.target:
            self.spare_profiler = ProfiledProcess(self.ncu, self.target, child_argv())

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
                },
            )
        elif op == "build":
            self.reply(request, {"type": "built", **remote_build(request)})
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
            self.session.end()
            self.session = None
            if warm:
                self.warm_spare()

    def _evaluate(self, request: dict) -> None:
        """All requested GPU stages of one library in one request, with progress events."""
        self._end_session(warm=False)
        session = self.session = Session(self, request)
        begun = session.begin()
        stages: dict[str, dict] = {}
        for name in session.stages:
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
            if result.get("status") not in ("passed", "not_run"):
                break
        self._end_session(warm=bool(request.get("warm", True)))
        self.reply(
            request,
            {"type": "result", "stages": stages, "device": begun.get("device"), "trace": begun.get("trace")},
        )

    def close(self) -> None:
        self._end_session(warm=False)
        if self.spare is not None:
            self.spare.close()
            self.spare = None
        if self.spare_profiler is not None:
            self.spare_profiler.close()
            self.spare_profiler = None


def remote_build(request: dict) -> dict:
    """Build + static tier here, for an executor whose GPU host compiles (ssh). Imports the workbench's
    build stack (pydantic among it) only now, so a GPU-only worker never needs it."""
    import asyncio

    from workbench.evaluate.build import build
    from workbench.evaluate.result import Status
    from workbench.evaluate.sass import static_stage
    from workbench.tasks import get_target

    target = get_target(request["target"])
    build_stage = asyncio.run(build(request["source"], target, float(request.get("timeout_s", 180.0)), None))
    reply: dict = {"build": build_stage.model_dump(mode="json"), "static": None, "kernels": None}
    if build_stage.status == Status.passed:
        static = asyncio.run(static_stage(build_stage, target))
        reply["static"] = static.model_dump(mode="json")
        if build_stage.library_path:
            reply["kernels"] = module_kernels(build_stage.library_path, static.sass_path)
    return reply


def main() -> None:
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
