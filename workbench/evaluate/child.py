"""The per-candidate process: loads one candidate library and runs the GPU tiers on request.

`python -m workbench.evaluate.child` is started by the worker in its own session, once per candidate;
it prepares torch, TVM-FFI and CUPTI before any candidate exists (so a spare can wait warm), then
answers requests on the pipes `isolation.py` set up. Whatever the candidate does to this process — a
CUDA fault, a trap, a hang, exit(), a flood on stdout — ends this process only; the worker sees it.

`python -m workbench.evaluate.child profile SPEC.json` is the process Nsight Compute launches: it makes
the inputs of the profiling workload, waits for the go file (so its start-up overlaps correctness),
then calls the candidate once.

Standard library, torch, tvm_ffi and (optionally) cupti-python only.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path


def _error_line(exc: BaseException) -> str:
    from workbench.evaluate.isolation import first_useful_line

    text = f"{type(exc).__name__}: {exc}"
    return first_useful_line(text) or first_useful_line(traceback.format_exc()) or type(exc).__name__


def serve() -> int:
    from workbench.evaluate.isolation import ChildChannel

    channel = ChildChannel()
    import torch
    import tvm_ffi

    from workbench.evaluate.kernel_trace import open_trace

    torch.cuda.init()
    torch.zeros(1, device="cuda")  # create the context now, not inside the first timed call
    trace, trace_note = open_trace()
    channel.write(
        {
            "type": "ready",
            "device": torch.cuda.get_device_name(0),
            "trace": trace.method,
            "trace_note": trace_note,
            "torch": torch.__version__,
        }
    )
    state: dict = {}
    while True:
        request = channel.read()
        if request is None or request.get("cmd") == "exit":
            return 0
        command = request["cmd"]
        try:
            if command == "load":
                state["module"] = tvm_ffi.load_module(request["library"])
                state["run"] = state["module"].run
                state["spec"] = request["spec"]
                known = request.get("kernels")
                state["kernels"] = None if known is None else set(known)
                channel.write({"ok": True})
            elif command == "correctness":
                from workbench.evaluate.correctness import run_correctness

                stage = run_correctness(
                    state["run"], state["spec"], trace, state["kernels"], int(request["trials"])
                )
                channel.write({"stage": stage})
            elif command == "timing":
                channel.write(_timing(state, trace, trace_note, request))
            else:
                channel.write({"error": f"unknown command {command!r}"})
        except Exception as exc:  # noqa: BLE001 - the candidate's failure becomes a verdict
            if command == "load":
                channel.write({"ok": False, "error": _error_line(exc)})
            else:
                channel.write({"stage": {"status": "runtime_error", "message": _error_line(exc)}})
            # A CUDA fault poisons the context: nothing more can be trusted in this process.
            return 1


def _timing(state: dict, trace, trace_note: str, request: dict) -> dict:
    import torch

    from workbench.evaluate.inputs import make_inputs, make_outputs
    from workbench.evaluate.timing import make_baselines, measure_ceilings, run_timing

    ceilings = request.get("ceilings") or measure_ceilings()
    spec = state["spec"]
    inputs = make_inputs(spec, int(spec["seed"]) + 1000)
    outputs = make_outputs(spec)
    run = state["run"]
    baselines = make_baselines(spec, inputs)
    stage = run_timing(
        lambda: run(*inputs, *outputs),
        baselines,
        trace,
        spec,
        ceilings,
        state["kernels"],
        warmup=int(request["warmup"]),
        iterations=int(request["iterations"]),
    )
    if trace_note and stage.get("message"):
        stage["message"] += f" [{trace_note}]"
    torch.cuda.synchronize()
    return {"stage": stage, "ceilings": ceilings}


def profile(spec_path: str) -> int:
    """One call of the candidate for Nsight Compute, at the profiling workload."""
    import torch
    import tvm_ffi

    from workbench.evaluate.inputs import make_inputs, make_outputs

    request = json.loads(Path(spec_path).read_text())
    spec = request["spec"]
    module = tvm_ffi.load_module(request["library"])
    inputs = make_inputs(spec, int(spec["seed"]))
    outputs = make_outputs(spec)
    torch.cuda.synchronize()
    go = request.get("go_file")
    if go:
        deadline = time.monotonic() + float(request.get("wait_s", 3600))
        while not os.path.exists(go):
            if time.monotonic() > deadline:
                print("profile child: no go signal", file=sys.stderr)
                return 3
            time.sleep(0.005)
    module.run(*inputs, *outputs)
    torch.cuda.synchronize()
    return 0


def main() -> None:
    if len(sys.argv) >= 3 and sys.argv[1] == "profile":
        sys.exit(profile(sys.argv[2]))
    sys.exit(serve())


if __name__ == "__main__":
    main()
