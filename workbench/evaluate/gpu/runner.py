"""The candidate's process: it loads one candidate, calls it when told, and hands back raw data only.

Nothing here judges. The worker drives every call (so it can time each one from outside and choose, after
the fact, which timed calls the judge reads); the judge copies the inputs and outputs out of this
process's memory (`exchange.py`) while it is stopped; comparisons, statistics and statuses are made in
processes the candidate never ran in. What must stay here: the launch itself, the fills of fresh inputs,
the L2 flush, and the CUPTI collection. That code is fingerprinted (`fingerprint.py`) before the first
call and checked after every call; and before the candidate's library is loaded the process closes its
doors (`sandbox.py`): no ptrace, exec, new processes, writable files or sockets, and once the library is
loaded no executable memory.

Every buffer the candidate is given exists, filled and exported, before its library is loaded:
- `same`: the trials' tensors (new values every trial, same addresses) and the timed calls' tensors;
- `fresh`: a second set, at other addresses, for the trial that catches results cached by address;
- each baseline's own inputs (never the candidate's values).

Requests (JSON lines on the private pipes, each with a `nonce` that the reply echoes; typed in
`protocol.py`, a malformed one answered with `{error}` naming the field):
- `load {library, kernels, spec, timing}` -> `{ok, exports, sandbox}`
- `prepare {set, seed}` -> `{ok}`: fresh values into the set's inputs, poison into its outputs
- `call {set}` -> `{done, changed?, trace}`: marker kernel, the call, a readback marker, synchronize
- `timing_start {}` -> `{ok, baselines, empty_call}`: forget the timed calls so far
- `timing_prepare {entrant, seed}` -> `{armed}`: a timed call's fresh inputs, poisoned outputs, the L2 flush
- `timing_call {entrant}` -> `{done}`: the timed call and a synchronize; entrant `empty` is the candidate's
  path with TVM-FFI's empty function in its place, the reference for its host time
- `timing_end {}` -> `{trace}`: the records of every timed call
"""

from __future__ import annotations

# Everything the harness will ever import is imported before the sandbox forbids new executable
# memory: a C extension imported later could not be mapped.
import ctypes
import hashlib  # noqa: F401
import json  # noqa: F401
import os
import secrets  # noqa: F401
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from workbench.evaluate.gpu import eager_kernels, sandbox
from workbench.evaluate.gpu.baselines import Baseline, input_buffers, make_baselines
from workbench.evaluate.gpu.child_protocol import decode_runner
from workbench.evaluate.gpu.context_settings import ContextSettings
from workbench.evaluate.gpu.exchange import Exporter
from workbench.evaluate.gpu.fingerprint import Material, changes, fingerprint, state
from workbench.evaluate.gpu.inputs import fill_inputs, fill_poison, make_outputs, scalar_inputs
from workbench.evaluate.gpu.isolation import ChildChannel, error_line, wake_fd
from workbench.evaluate.gpu.kernel_trace import KernelTrace, _Trace
from workbench.evaluate.gpu.l2_reset import PersistingL2
from workbench.evaluate.gpu.part_clock import PartClock
from workbench.evaluate.gpu.protocol import ProtocolError

if TYPE_CHECKING:
    from workbench.evaluate.gpu.triton_runtime import Opened

FAULT_POLL_S = 1e-3  # how often a timed call's wait asks whether the call faulted
# Checked after every call: the code on the path of a call and its reply.
HARNESS_MODULES = (
    "workbench.evaluate.gpu.runner",
    "workbench.evaluate.gpu.l2_reset",
    "workbench.evaluate.gpu.context_settings",
    "workbench.evaluate.gpu.kernel_trace",
    "workbench.evaluate.gpu.fingerprint",
    "workbench.evaluate.gpu.isolation",
    "json.encoder",
)
# Checked after each correctness call and at the end of timing as well (about 1000 functions: too many
# for every timed call): the rest of the harness and the libraries it leans on.
LIBRARY_MODULES = (
    "workbench.evaluate.gpu.exchange",
    "workbench.evaluate.gpu.inputs",
    "workbench.evaluate.gpu.baselines",
    "workbench.evaluate.gpu.sandbox",
    "workbench.evaluate.gpu.protocol",
    "workbench.evaluate.gpu.child_protocol",
    "workbench.evaluate.gpu.typed_check",
    "json",
    "json.decoder",
    "torch.cuda",
    "torch.cuda.streams",
    "cupti.cupti",
)
# For a Triton candidate, also the launch path its calls go through.
TRITON_MODULES = (
    "triton.runtime.jit",
    "triton.runtime.autotuner",
    "triton.runtime.build",
    "triton.runtime.cache",
    "triton.compiler.compiler",
    "triton.backends.nvidia.driver",
)


def l2_flush_bytes(device: str) -> int:
    if device == "cpu":
        return 0
    l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 64 * 1024 * 1024)
    return 2 * l2


def _not_loaded(*_: object) -> object:
    raise RuntimeError("no candidate library is loaded")


class TensorSet:
    """Input and output tensors handed to the candidate, exported for the judge."""

    def __init__(self, spec: dict, exporter: Exporter) -> None:
        self.spec = spec
        self.inputs: dict[str, torch.Tensor] = {}
        self.outputs: list[torch.Tensor] = []
        self.exports: dict = {"inputs": {}, "outputs": {}}
        for name, template in input_buffers(spec, exporter.device).items():
            tensor, export = exporter.empty(list(template.shape), template.dtype)
            self.inputs[name], self.exports["inputs"][name] = tensor, export
        for name, template in zip(spec["definition"]["outputs"], make_outputs(spec, "meta"), strict=True):
            tensor, export = exporter.empty(list(template.shape), template.dtype)
            self.outputs.append(tensor)
            self.exports["outputs"][name] = export
        self.scalars = scalar_inputs(spec)

    def arguments(self) -> list[object]:
        values = {**self.inputs, **self.scalars}
        return [values[name] for name in self.spec["definition"]["inputs"]] + list(self.outputs)

    def refresh(self, seed: int, fast: bool) -> None:
        fill_inputs(self.spec, self.inputs, seed, fast)
        for out in self.outputs:
            fill_poison(out)


class Runner:
    def __init__(self, channel: ChildChannel, trace: _Trace, device: str) -> None:
        self.channel = channel
        self.trace = trace
        self.device = device
        self.exporter = Exporter(device)
        self.sets: dict[str, TensorSet] = {}
        self.baselines: list[Baseline] = []
        self.run: Callable[..., object] = _not_loaded
        self.empty: Callable[..., object] | None = None  # TVM-FFI's `testing.nop`, for a library's path
        self.landed: torch.Tensor | None = None  # pinned: where a timed call's wait sees the GPU done
        self.done: torch.cuda.Event | None = None  # behind the copy to `landed`: raises a call's fault
        self.module: Any = None  # the candidate's module (TVM-FFI's, or the Triton file's)
        self.triton: Opened | None = None  # for a Triton candidate
        self.prints: dict[str, str] = {}
        self.library_prints: dict[str, str] = {}
        self.state: list[tuple[str, Material]] = []
        self.library_state: list[tuple[str, Material]] = []
        fd = wake_fd()
        if fd is not None:
            # Started before load() closes the sandbox's doors.
            threading.Thread(target=self._watch, args=(fd,), daemon=True).start()

    def _watch(self, fd: int) -> None:
        """On each byte from the worker (its request's limit struck), what this process is stuck in. The
        main thread is blocked behind the GPU then; TVM-FFI and torch release the GIL while they wait."""
        while True:
            try:
                if not os.read(fd, 1):
                    return
            except OSError:
                return
            try:
                report = self.trace.hang_report()
            except Exception as exc:  # noqa: BLE001 - the worker words its message without it
                report = {"error": error_line(exc)}
            self.channel.write({"hung": report})

    def synchronize(self) -> None:
        if self.device != "cpu":
            torch.cuda.synchronize()

    def settle(self) -> None:
        """A timed call's wait for the GPU: the caller's stream copies the marker into pinned host memory
        and the host spins on that memory, so it wakes within microseconds whatever the call's length.
        A blocking wait woke 0.1-0.2 ms late after a long kernel (H200,
        benchmarks/results/2026-12-03_host_time_blocking_wait_28e0a81_h200.log), host time the empty call
        beside the candidate's would not show; polling an event made two API records per poll for CUPTI
        to deliver (2026-12-04_latency_696ce2d_h200.log: the timing stage 0.5 s longer). The event behind
        the copy is asked once a millisecond: a call that faulted leaves the copy undone, and the query
        raises the fault as a blocking wait would have."""
        if self.landed is None or self.done is None:  # a CPU device
            return
        host = self.landed.numpy()
        host[0] = -1  # the marker counts up from 0: the copy's arrival is the only way out
        with self.trace.window("settle"):
            self.landed.copy_(self.marker, non_blocking=True)
            self.done.record()
        ask_at = time.perf_counter() + FAULT_POLL_S
        while host[0] == -1:
            if time.perf_counter() > ask_at:
                self.done.query()
                ask_at = time.perf_counter() + FAULT_POLL_S
        torch.cuda.synchronize()  # work the call left on other streams

    @property
    def library_modules(self) -> tuple[str, ...]:
        return LIBRARY_MODULES + (TRITON_MODULES if self.triton is not None else ())

    def _extra(self) -> dict[str, object]:
        """What the fingerprint covers beyond the harness modules: the objects this runner holds."""
        extra: dict[str, object] = {"run": self.run, "empty": self.empty, "channel.write": self.channel.write}
        if self.triton is not None:
            from triton import knobs

            # The read-only cache is what keeps unjudged code from compiling: it must stay in place.
            extra["triton.cache"] = knobs.cache.manager_class
        if isinstance(self.trace, KernelTrace):
            extra.update(
                requested=self.trace.callbacks[0],
                completed=self.trace.callbacks[1],
                launched=self.trace.callbacks[2],
                collect=self.trace.collect,
                now=self.trace.now,
            )
        return extra

    def changed(self, everything: bool = False) -> list[str]:
        """The harness names whose print changed since the load (with `everything`, the libraries' too):
        compared unhashed first, the prints made only to name a change."""
        if state(HARNESS_MODULES, self._extra()) == self.state and (
            not everything or state(self.library_modules) == self.library_state
        ):
            return []
        if not everything:
            return changes(self.prints, fingerprint(HARNESS_MODULES, self._extra()))
        return changes(
            {**self.prints, **self.library_prints},
            {**fingerprint(HARNESS_MODULES, self._extra()), **fingerprint(self.library_modules)},
        )

    # ------------------------------------------------------------------ requests

    def load(self, request: dict) -> dict:
        import tvm_ffi

        spec = request["spec"]
        self.spec = spec
        for name in ("same", "fresh"):
            self.sets[name] = TensorSet(spec, self.exporter)
        self.sets["same"].refresh(int(spec["seed"]), fast=False)
        self.sets["fresh"].refresh(int(spec["seed"]) + 999, fast=False)
        notes: list[str] = []
        if request.get("timing"):
            self.baselines, notes = make_baselines(spec, self.device)
            for number, baseline in enumerate(self.baselines):
                # One untimed call of each: libraries load, plans compile, before the sandbox closes.
                fill_inputs(spec, baseline.inputs, int(spec["seed"]) + 500_000 + number, fast=True)
                baseline.prepare()
                baseline.call()
                baseline.clear()
        self.flush = torch.empty(l2_flush_bytes(self.device), dtype=torch.uint8, device=self.device)
        self.persisting = PersistingL2(self.device)
        # Read before the candidate's library is loaded: its constructors run then.
        stream = torch.cuda.current_stream().cuda_stream if self.device != "cpu" else 0
        self.settings = ContextSettings(self.device, stream)
        self.marker = torch.zeros(1, dtype=torch.int32, device=self.device)
        if self.device != "cpu":
            self.landed = torch.full((1,), -1, dtype=torch.int32, pin_memory=True)
            self.done = torch.cuda.Event()
        self.marker.add_(1)
        self.exporter.warm()
        if spec.get("triton_entry"):
            from workbench.evaluate.gpu import triton_runtime

            self.triton = triton_runtime.open_candidate(Path(spec["triton_entry"]))
        self.synchronize()
        if not spec.get("triton_entry"):
            self.empty = tvm_ffi.get_global_func("testing.nop", allow_missing=True)
        offsets = {}
        if not spec.get("triton_entry") and self.device != "cpu":
            offsets = eager_kernels.function_offsets(Path(request["library"]), request.get("kernels") or ())
        sandboxed = sandbox.available()
        if sandboxed:
            # Not dumpable and without capabilities: even as root, no candidate process reaches this
            # one's pipes or memory through /proc; then the doors.
            sandbox.not_dumpable()
            sandbox.drop_capabilities()
            sandbox.close_doors(no_writes=True)
        else:
            notes.append("no seccomp sandbox on this platform (it is built for Linux on x86-64)")
        if self.triton is not None:
            self.module = self.triton.module()
        else:
            self.module = tvm_ffi.load_module(request["library"])
            self._load_kernels_now(Path(request["library"]), offsets)
        self.run = self.module.run
        if sandboxed:
            sandbox.forbid_new_code()
        autotuned = None
        if self.triton is not None:
            # Triton's first call finds its kernels and launchers and autotunes: off the record, on the
            # fresh set (every trial refills its set first).
            self.run(*self.sets["fresh"].arguments())
            self.synchronize()
            autotuned = self.triton.autotuned()
        self.prints = fingerprint(HARNESS_MODULES, self._extra())
        self.library_prints = fingerprint(self.library_modules)
        self.state = state(HARNESS_MODULES, self._extra())
        self.library_state = state(self.library_modules)
        return {
            "ok": True,
            "exports": {name: tensors.exports for name, tensors in self.sets.items()},
            "sandbox": sandboxed,
            "notes": notes,
            "autotuned": autotuned,
        }

    def _load_kernels_now(self, library: Path, offsets: dict[str, int]) -> None:
        """The own kernels onto the GPU now (eager_kernels.py: so a hang's report is not held behind a
        lazy load). Message-only: a kernel left lazy still runs, only a timeout may say less."""
        base = eager_kernels.load_base(library) if offsets else None
        if base is None or torch.version.cuda is None:
            return
        try:
            runtime = ctypes.CDLL(f"libcudart.so.{torch.version.cuda.split('.')[0]}", mode=os.RTLD_NOLOAD)
        except OSError:
            return
        eager_kernels.load_now(runtime, base, offsets)

    def prepare(self, request: dict) -> dict:
        self.sets[request["set"]].refresh(int(request["seed"]), fast=False)
        self.synchronize()
        self._ready_for("candidate")
        return {"ok": True}

    def _ready_for(self, entrant: str) -> None:
        """Before `entrant`'s call: its own context settings (context_settings.py), and nothing a call set
        aside in L2 left for it (l2_reset.py); a driver that refuses is said."""
        if entrant == "candidate":
            self.settings.for_candidate()
        else:
            self.settings.for_baseline()
        code = self.persisting.reset()
        if code:
            raise RuntimeError(f"resetting the persisting L2 before a call failed (CUresult {code})")

    def call(self, request: dict) -> dict:
        """One correctness call: marker, the call, a readback marker on the caller's stream, then wait."""
        arguments = self.sets[request["set"]].arguments()
        self.trace.clear()
        self.trace.naming(True)  # untimed: a hang here can be named from its launches
        with self.trace.window("marker"):
            self.marker.add_(1)
        with self.trace.window("call"):
            self.run(*arguments)
        with self.trace.window("readback"):
            self.marker.add_(1)
        self.synchronize()
        self.trace.naming(False)
        changed = self.changed(everything=True)
        self.trace.collect()
        return {"done": True, "changed": changed, "trace": self.trace.raw()}

    def timed_prepare(self, request: dict) -> dict:
        entrant, seed = request["entrant"], int(request["seed"])
        clock = PartClock()
        with self.trace.window("prep"):
            if entrant == "empty":
                pass  # the candidate's last outputs stay for the judge
            elif entrant == "candidate":
                self.sets["same"].refresh(seed, fast=True)
            else:
                baseline = self.baselines[int(entrant)]
                fill_inputs(self.spec, baseline.inputs, seed, fast=True)
                baseline.prepare()
        clock.mark("inputs")
        self._ready_for(entrant)
        clock.mark("settings")
        with self.trace.window("flush"):
            self.flush.zero_()
        self.synchronize()
        clock.mark("flush")
        # The previous call is checked here, off the clock the worker runs around `timing_call`.
        changed = self.changed()
        clock.mark("fingerprint")
        return {"armed": True, "changed": changed, "parts_s": clock.parts}

    def timed_call(self, request: dict) -> dict:
        entrant = request["entrant"]
        if entrant == "candidate":
            return self._own_path("call:candidate", self.run)
        if entrant == "empty" and self.empty is not None:
            # The candidate's path step for step, TVM-FFI's empty function called on the same arguments.
            return self._own_path("empty", self.empty)
        baseline = self.baselines[int(entrant)]
        with self.trace.window(f"call:{entrant}"):
            baseline.call()
        self.settle()
        with self.trace.window("clear"):
            baseline.clear()
        return {"done": True}

    def _own_path(self, label: str, function: Callable[..., object]) -> dict:
        """The marker kernel, `function` on the timed set's arguments in window `label`, the wait."""
        arguments = self.sets["same"].arguments()
        with self.trace.window("marker"):
            self.marker.add_(1)
        with self.trace.window(label):
            function(*arguments)
        self.settle()
        return {"done": True}

    def timed_start(self, request: dict) -> dict:
        self.synchronize()
        self.trace.clear()
        names = [baseline.name for baseline in self.baselines]
        return {"ok": True, "baselines": names, "empty_call": self.empty is not None}

    def timed_end(self, request: dict) -> dict:
        clock = PartClock()
        self.synchronize()
        clock.mark("synchronize")
        self.trace.collect()
        clock.mark("collect")
        raw = self.trace.raw()
        clock.mark("raw")
        changed = self.changed(everything=True)
        clock.mark("fingerprint")
        return {
            "trace": raw,
            "changed": changed,
            "l2_flush_bytes": self.flush.numel(),
            "settings_set_aside": sorted(self.settings.changed),
            "parts_s": clock.parts,
        }

    HANDLERS: ClassVar[dict] = {
        "load": load,
        "prepare": prepare,
        "call": call,
        "timing_start": timed_start,
        "timing_prepare": timed_prepare,
        "timing_call": timed_call,
        "timing_end": timed_end,
    }

    def serve(self) -> int:
        while True:
            request = self.channel.read()
            if request is None or request.get("cmd") == "exit":
                self.exporter.close()
                return 0
            command = request.get("cmd")
            handler = self.HANDLERS.get(command)
            nonce = request.get("nonce")
            if handler is None:
                self.channel.write({"nonce": nonce, "error": f"unknown command {command!r}"})
                continue
            try:
                decode_runner(request)
            except ProtocolError as exc:
                self.channel.write({"nonce": nonce, "error": str(exc)})
                continue
            try:
                reply = handler(self, request)
            except Exception as exc:  # noqa: BLE001 - the candidate's failure becomes a verdict
                self.channel.write({"nonce": nonce, "failed": error_line(exc), "during": command})
                # A CUDA fault poisons the context: nothing more can be trusted in this process.
                self.exporter.close()
                return 1
            self.channel.write({"nonce": nonce, **reply})
