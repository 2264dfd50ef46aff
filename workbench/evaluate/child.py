"""The per-candidate process: loads one candidate library and runs the GPU tiers on request.

`python -m workbench.evaluate.child` is started by the worker in its own session, once per candidate;
it prepares torch, TVM-FFI and CUPTI before any candidate exists (so a spare can wait warm), then
answers requests on the pipes `isolation.py` set up. Whatever the candidate does to this process — a
CUDA fault, a trap, a hang, exit(), a flood on stdout — ends this process only; the worker sees it.

`python -m workbench.evaluate.child profile DIR WORKER_PID` is the process Nsight Compute launches ahead
of its candidate: it waits for the candidate in DIR, makes the inputs of the profiling workload, waits
for the go file, then calls the candidate once between cudaProfilerStart and cudaProfilerStop.

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
    # Everything the tiers load on first use, loaded while no candidate waits: the tier modules and
    # cuBLAS's handle (the GEMM reference and baseline).
    import workbench.evaluate.correctness
    import workbench.evaluate.timing  # noqa: F401

    torch.matmul(
        torch.ones(64, 64, device="cuda", dtype=torch.bfloat16),
        torch.ones(64, 64, device="cuda", dtype=torch.bfloat16),
    )
    torch.cuda.synchronize()
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
    baselines, notes = make_baselines(spec, inputs)
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
    for note in [trace_note, *notes]:
        if note and stage.get("message"):
            stage["message"] += f" [{note}]"
    torch.cuda.synchronize()
    return {"stage": stage, "ceilings": ceilings}


def wait_for(path: Path, parent: int) -> bool:
    """Poll for `path`; False once the worker that launched us is gone (a spare must not outlive it)."""
    polls = 0
    while not path.exists():
        polls += 1
        if polls % 100 == 0:
            try:
                os.kill(parent, 0)
            except ProcessLookupError:
                return False
        time.sleep(0.005)
    return True


def profile(workdir: str, parent: int) -> int:
    """The process ncu profiles: ready before its candidate exists, then one call inside
    cudaProfilerStart/Stop at the profiling workload (see `profiled_process.py`)."""
    import torch
    import tvm_ffi

    from workbench.evaluate.inputs import make_inputs, make_outputs

    folder = Path(workdir)
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    (folder / "ready").touch()
    if not wait_for(folder / "request.json", parent):
        return 3
    request = json.loads((folder / "request.json").read_text())
    spec = request["spec"]
    module = tvm_ffi.load_module(request["library"])
    inputs = make_inputs(spec, int(spec["seed"]))
    outputs = make_outputs(spec)
    torch.cuda.synchronize()
    if not wait_for(folder / "go", parent):
        return 3
    torch.cuda.profiler.start()
    module.run(*inputs, *outputs)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    sys.stdout.flush()
    sys.stderr.flush()
    # ncu holds every result once profiling stops; an orderly CUDA teardown under ncu cost ~1 s more.
    os._exit(0)


def main() -> None:
    if len(sys.argv) >= 4 and sys.argv[1] == "profile":
        sys.exit(profile(sys.argv[2], int(sys.argv[3])))
    sys.exit(serve())


if __name__ == "__main__":
    main()
