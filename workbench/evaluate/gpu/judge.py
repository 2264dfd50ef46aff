"""The judge: `python -m workbench.evaluate.gpu.judge`, a process no candidate ever runs in.

The worker starts one and keeps it across candidates. For each candidate it copies the inputs and
outputs out of the candidate's process (`exchange.py`) while that process is stopped, runs the task's
reference on its own copy of what the candidate was given, after the candidate's call, and compares.
The reference's results live only here, in another CUDA context, so no candidate can reach them.

Requests (JSON lines on the private pipes `isolation.py` sets up; replies echo `nonce`; typed in
`protocol.py`, a malformed one answered with `{error}` naming the field):
- `setup {spec}` -> `{ok}`: the candidate's task and workload
- `snapshot {exports, seed}` -> `{ok, mismatched}`: copy the inputs before a call; check that the random
  ones hold exactly the values `seed` draws (the runner filled them)
- `check {exports, seed, fresh}` -> `{trial}`: copy inputs and outputs after the call, compare the inputs
  with the snapshot, the outputs with the reference run on the snapshot
- `check_timed {exports, seed}` -> `{trial}`: the same for a timed call, whose inputs the judge redraws
  from its seed (the flash-attention forward for derived ones) instead of a snapshot
- `baseline_ms {}` -> `{ms}`: the primary baseline's time here (sets the candidate's time limits)
- `release {}` -> `{ok}`
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any, ClassVar

import torch

from workbench.evaluate.gpu import sandbox
from workbench.evaluate.gpu.call_counters import CallCounters
from workbench.evaluate.gpu.child_protocol import decode_judge, encode_judge
from workbench.evaluate.gpu.correctness import (
    PASSED,
    bits,
    changed_inputs,
    compare_output,
    output_tolerance,
    passes_quickly,
    same_kind,
)
from workbench.evaluate.gpu.exchange import ExchangeError, Importer
from workbench.evaluate.gpu.fast_reference import fast_reference, has_fast_reference, within_half
from workbench.evaluate.gpu.inputs import (
    DTYPES,
    compile_reference,
    derive,
    random_inputs,
    run_reference,
    scalar_inputs,
    shape_of,
)
from workbench.evaluate.gpu.isolation import ChildChannel
from workbench.evaluate.gpu.part_clock import PartClock
from workbench.evaluate.gpu.protocol import ProtocolError, Status

DERIVED_ATOL = 1e-3  # the fast forward of a timed call, redrawn here: the same kernels on the same inputs


class Judge:
    def __init__(self, channel: ChildChannel, device: str) -> None:
        self.channel = channel
        self.device = device
        self.importer = Importer(device)
        self.spec: dict = {}
        self.reference: Callable[..., Any] | None = None
        self.snapshot_inputs: dict[str, torch.Tensor] | None = None
        self.baseline_cache: dict[tuple, float] = {}
        # The library answer for timed calls (fast_reference.py): None until a correctness trial has
        # shown it within half the tolerance of the task's reference, False once one has not.
        self.fast_trusted: bool | None = None
        self.counters: CallCounters | None = None  # PM sampling, only while a timing stage runs

    def _input_meta(self) -> dict[str, tuple[list[int], torch.dtype]]:
        definition, axes = self.spec["definition"], self.spec["axes"]
        scalars = scalar_inputs(self.spec)
        return {
            name: (shape_of(t, axes), DTYPES[t["dtype"]])
            for name, t in definition["inputs"].items()
            if name not in scalars
        }

    def _output_meta(self) -> dict[str, tuple[list[int], torch.dtype]]:
        definition, axes = self.spec["definition"], self.spec["axes"]
        return {name: (shape_of(t, axes), DTYPES[t["dtype"]]) for name, t in definition["outputs"].items()}

    def _copy(self, exports: dict, meta: dict[str, tuple[list[int], torch.dtype]]) -> dict[str, torch.Tensor]:
        return {
            name: self.importer.copy(exports[name], shape, dtype) for name, (shape, dtype) in meta.items()
        }

    # ------------------------------------------------------------------ requests

    def setup(self, request: dict) -> dict:
        self.release({})
        self.spec = request["spec"]
        self.reference = compile_reference(self.spec["definition"]["reference"])
        self.fast_trusted = None if has_fast_reference(self.spec, self.device) else False
        return {"ok": True}

    def snapshot(self, request: dict) -> dict:
        copied = self._copy(request["exports"]["inputs"], self._input_meta())
        drawn = random_inputs(self.spec, int(request["seed"]), self.device)
        mismatched = [
            name for name, value in drawn.items() if not torch.equal(bits(value), bits(copied[name]))
        ]
        self.snapshot_inputs = copied
        return {"ok": not mismatched, "mismatched": mismatched}

    def check(self, request: dict) -> dict:
        if self.snapshot_inputs is None:
            return {"error": "no snapshot of the inputs was taken before this call"}
        before = self.snapshot_inputs
        self.snapshot_inputs = None
        # A correctness trial's parts go unreported (only timed calls' checks are): its clock never syncs.
        trial = self._judge(request, before, PartClock(), fresh=bool(request.get("fresh")))
        return {"trial": trial}

    def check_timed(self, request: dict) -> dict:
        seed = int(request["seed"])
        # The device synchronised at each mark: the GPU work queued in a part is counted in it.
        clock = PartClock(torch.cuda.synchronize if self.device.startswith("cuda") else None)
        drawn: dict[str, object] = {**random_inputs(self.spec, seed, self.device), **scalar_inputs(self.spec)}
        drawn.update(derive(self.spec, drawn, fast=True))
        expected_inputs = {name: drawn[name] for name in self._input_meta()}
        clock.mark("draw")
        trial = self._judge(
            request, expected_inputs, clock, fresh=False, derived_atol=DERIVED_ATOL, quick=True
        )
        if self.counters is not None:
            # The round's counted call was read beside this check: the next call's start waits for none.
            self.counters.await_read()
            clock.mark("counters_read")
        return {"trial": trial, "parts_s": clock.parts}

    def _judge(
        self,
        request: dict,
        before: dict[str, Any],
        clock: PartClock,
        fresh: bool,
        derived_atol: float | None = None,
        quick: bool = False,
    ) -> dict:
        """One call's trial: its inputs after the call against `before`, its outputs against the
        reference run on `before`; `clock` marks copy, inputs, library (a timed call's half-tolerance
        check against the library's answer), reference and compare."""
        seed = int(request["seed"])
        exports = request["exports"]
        after = self._copy(exports["inputs"], self._input_meta())
        got = self._copy(exports["outputs"], self._output_meta())
        clock.mark("copy")
        trial: dict = {"seed": seed, "passed": False, "fresh_addresses": fresh, "outputs": {}}
        derived = set(self.spec.get("derived_inputs") or []) if derived_atol is not None else set()
        exact = [name for name in before if name not in derived]
        modified = changed_inputs(exact, [before[n] for n in exact], [after[n] for n in exact])
        modified += [
            name
            for name in derived
            if not torch.allclose(before[name].float(), after[name].float(), atol=derived_atol or 0.0, rtol=0)
        ]
        clock.mark("inputs")
        if modified:
            trial.update(
                status=Status.inputs_modified, message=f"the call changed input(s) {', '.join(modified)}"
            )
            return trial
        arguments = {**before, **scalar_inputs(self.spec)}
        if derived:  # a timed call is judged on what it was given, derived values included
            arguments.update({name: after[name] for name in derived})
        ordered = [arguments[name] for name in self.spec["definition"]["inputs"]]
        ratio = float(self.spec.get("matched_ratio", 1.0))
        bound = self.spec.get("outlier_bound")
        tolerances = [output_tolerance(self.spec, name) for name in got]
        if quick and self.fast_trusted:
            close = self._passes_against_library(arguments, got, tolerances, ratio, bound)
            clock.mark("library")
            if close:
                trial["outputs"] = {name: {"name": name, "passed": True} for name in got}
                trial.update(status=PASSED, message="", passed=True)
                return trial
        with torch.no_grad():
            if self.reference is None:
                raise RuntimeError("the judge was asked to check a call before its set-up")
            expected = run_reference(self.reference, self.spec["definition"], self.spec["axes"], ordered)
        clock.mark("reference")
        if not quick and self.fast_trusted is not False:
            self._earn_trust(arguments, got, expected, tolerances)
        status: str = PASSED
        message = ""
        for (name, actual), want, (atol, rtol) in zip(got.items(), expected, tolerances, strict=True):
            want = want.to(actual.dtype) if want.dtype != actual.dtype and same_kind(want, actual) else want
            # Every timed call is checked: cheap when it is right, in full when it may not be.
            if quick and passes_quickly(actual, want, atol, rtol, ratio, bound):
                trial["outputs"][name] = {"name": name, "passed": True}
                continue
            out_status, check = compare_output(name, actual, want, atol, rtol, ratio, bound)
            trial["outputs"][name] = check
            if out_status != PASSED and status == PASSED:
                status, message = out_status, f"output {name}: {check.get('reason', '')}"
        clock.mark("compare")
        trial.update(status=status, message=message, passed=status == PASSED)
        return trial

    def _library_answer(self, arguments: dict[str, Any]) -> list[torch.Tensor] | None:
        """The library's outputs for these inputs, or None (and the library unused from here on) where
        its call fails: torch's private flash ops may refuse a shape or run out of memory beside the
        candidate's buffers."""
        try:
            with torch.no_grad():
                return fast_reference(self.spec, arguments)
        except RuntimeError:
            self.fast_trusted = False
            return None

    def _passes_against_library(
        self,
        arguments: dict[str, Any],
        got: dict[str, torch.Tensor],
        tolerances: list[tuple[float, float]],
        ratio: float,
        bound: float | None,
    ) -> bool:
        """Whether a timed call lies within half the tolerance of the library's answer."""
        fast = self._library_answer(arguments)
        return fast is not None and within_half(list(got.values()), fast, tolerances, ratio, bound)

    def _earn_trust(
        self,
        arguments: dict[str, Any],
        got: dict[str, torch.Tensor],
        expected: list[torch.Tensor],
        tolerances: list[tuple[float, float]],
    ) -> None:
        """A correctness trial's test of the library answer: within half the tolerance of the task's
        reference on every element of every output, or it is not used for this candidate."""
        fast = self._library_answer(arguments)
        if fast is None:
            return
        # In the outputs' own dtypes: the library's answer as a call's output would hold it.
        dtypes = [actual.dtype for actual in got.values()]
        self.fast_trusted = within_half(
            [f.to(d) for f, d in zip(fast, dtypes, strict=True)], expected, tolerances
        )

    def baseline_ms(self, request: dict) -> dict:
        """Median of five calls of the primary baseline here (events), cached per task and workload."""
        key = (self.spec["task"], self.spec["workload_uuid"])
        if key not in self.baseline_cache:
            self.baseline_cache[key] = _time_primary_baseline(self.spec, self.device)
        return {"ms": self.baseline_cache[key]}

    def counters_open(self, request: dict) -> dict:
        self.counters_close(request)
        if self.device == "cpu":
            return {"ok": False, "why": "no GPU to sample"}
        self.counters = CallCounters(torch.cuda.current_device(), request["window_s"])
        return {"ok": self.counters.collector is not None, "why": self.counters.why}

    def counters_start(self, request: dict) -> dict:
        if self.counters is not None:
            self.counters.start()
        return {"ok": self.counters is not None}

    def counters_stop(self, request: dict) -> dict:
        """The window stopped; its samples are read on a thread beside what comes next (`close` says)."""
        if self.counters is not None:
            self.counters.stop_beside(request["began_ns"], request["ended_ns"])
        return {"ok": self.counters is not None}

    def counters_close(self, request: dict) -> dict:
        """Every counted call's sums, in call order, once each read is done."""
        if self.counters is None:
            return {"counts": [], "outgrown": [], "why": "", "parts_s": {}}
        counters, self.counters = self.counters, None
        counters.close()
        return {
            "counts": counters.windows,
            "outgrown": counters.outgrown,
            "why": counters.why,
            "parts_s": counters.totals_s,
        }

    def release(self, request: dict) -> dict:
        self.counters_close(request)
        self.snapshot_inputs = None
        self.importer.release()
        if self.device != "cpu":
            torch.cuda.empty_cache()
        return {"ok": True}

    HANDLERS: ClassVar[dict] = {
        "setup": setup,
        "snapshot": snapshot,
        "check": check,
        "check_timed": check_timed,
        "baseline_ms": baseline_ms,
        "release": release,
        "counters_open": counters_open,
        "counters_start": counters_start,
        "counters_stop": counters_stop,
        "counters_close": counters_close,
    }

    def serve(self) -> int:
        while True:
            request = self.channel.read()
            if request is None or request.get("cmd") == "exit":
                return 0
            nonce = request.get("nonce")
            handler = self.HANDLERS.get(request.get("cmd"))
            if handler is None:
                self.channel.write({"nonce": nonce, "error": f"unknown command {request.get('cmd')!r}"})
                continue
            try:
                decode_judge(request)
                reply = handler(self, request)
            except ProtocolError as exc:
                reply = {"error": str(exc)}
            except ExchangeError as exc:
                reply = {"unreadable": str(exc)}
            except Exception as exc:  # noqa: BLE001 - a judge bug is an infrastructure error, said in one line
                reply = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            self.channel.write({"nonce": nonce, **reply})


def _time_primary_baseline(spec: dict, device: str) -> float:
    from workbench.evaluate.gpu.baselines import make_baselines
    from workbench.evaluate.gpu.inputs import fill_inputs

    baselines, _ = make_baselines(spec, device)
    if not baselines:
        return 0.0
    baseline = baselines[0]
    fill_inputs(spec, baseline.inputs, int(spec["seed"]) + 700_000, fast=True)
    times = []
    for number in range(7):
        baseline.prepare()
        if device == "cpu":
            started = time.perf_counter()
            baseline.call()
            elapsed = (time.perf_counter() - started) * 1e3
        else:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            baseline.call()
            end.record()
            end.synchronize()
            elapsed = start.elapsed_time(end)
        baseline.clear()
        if number >= 2:
            times.append(elapsed)
    times.sort()
    return times[len(times) // 2]


def main() -> None:
    channel = ChildChannel()
    sandbox.not_dumpable()  # the candidate's processes cannot open its pipes or memory through /proc
    device = os.environ.get("PTXWB_DEVICE", "cuda")
    if device != "cpu":
        torch.cuda.init()
        torch.zeros(1, device=device)
    channel.write(encode_judge({"type": "ready", "device": device, "pid": os.getpid()}, "ready"))
    sys.exit(Judge(channel, device).serve())


if __name__ == "__main__":
    main()
