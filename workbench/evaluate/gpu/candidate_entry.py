"""The candidate's processes: `python -m workbench.evaluate.gpu.candidate_entry [serve | once DIR WORKER_PID]`.

`serve` (the default) is the runner (`runner.py`): started by the worker in its own session, once per
candidate; it prepares torch, TVM-FFI and CUPTI before any candidate exists (so a spare can wait warm),
then answers requests on the pipes `isolation.py` set up. Whatever the candidate does to this process —
a CUDA fault, a trap, a hang, exit(), a flood on stdout — ends this process only; the worker sees it.

`once DIR WORKER_PID` is the process a tool (Nsight Compute, compute-sanitizer) launches ahead of its
candidate: it waits for the candidate in DIR, makes the inputs of the requested workload, waits for the
go file, then calls the candidate once (between cudaProfilerStart and cudaProfilerStop) and exits.

Standard library, torch, tvm_ffi and (optionally) cupti-python and, for a Triton candidate, triton only.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def serve() -> int:
    from workbench.evaluate.gpu.child_protocol import RunnerReady, encode_runner
    from workbench.evaluate.gpu.isolation import HOLD_ENV, ChildChannel

    channel = ChildChannel()
    device = os.environ.get("PTXWB_DEVICE", "cuda")
    import torch
    import tvm_ffi  # noqa: F401

    from workbench.evaluate.gpu.kernel_trace import open_trace
    from workbench.evaluate.gpu.runner import Runner

    if os.environ.get(HOLD_ENV):
        # Started while another candidate is profiled: no CUDA context until the worker says so.
        go = channel.read()
        if go is None or go.get("cmd") != "start":
            return 0
    if device != "cpu":
        torch.cuda.init()
        torch.zeros(1, device=device)  # the context now, not inside the first call
        # cuBLAS's handle (the GEMM baseline) and the first kernels, while no candidate waits.
        torch.matmul(
            torch.ones(64, 64, device=device, dtype=torch.bfloat16),
            torch.ones(64, 64, device=device, dtype=torch.bfloat16),
        )
        torch.cuda.synchronize()
    trace, trace_note = open_trace(device)
    ready: RunnerReady = {
        "type": "ready",
        "device": torch.cuda.get_device_name(0) if device != "cpu" else "cpu",
        "gpu_uuid": f"GPU-{torch.cuda.get_device_properties(0).uuid}" if device != "cpu" else "",
        "trace": trace.method,
        "trace_note": trace_note,
        "torch": torch.__version__,
        "pid": os.getpid(),
    }
    channel.write(encode_runner(ready, "ready"))
    return Runner(channel, trace, device).serve()


def wait_for(path: Path, parent: int, also: Path | None = None) -> bool:
    """Poll for `path` (or `also`); False once the worker that launched us is gone (a spare must not
    outlive it)."""
    polls = 0
    while not path.exists() and not (also is not None and also.exists()):
        polls += 1
        # Not os.kill(parent, 0): the sandbox denies signals to other processes, probes included.
        if polls % 100 == 0 and not os.path.exists(f"/proc/{parent}"):
            return False
        time.sleep(0.005)
    return True


def _close_tool_logs() -> None:
    """Close any descriptor this process inherited onto its tool's log, so the candidate cannot write
    into the report that judges it."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd <= 2:
            continue
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if os.path.basename(target) in ("ncu.log", "sanitizer.log"):
            os.close(fd)


def close_tool_doors(tool: str) -> None:
    """The doors of a process a tool watches, closed before the candidate loads. memcheck's library
    needs no file: none is written, created or renamed. ncu's profiles the call through a lock file
    under /tmp/nvidia, the device files and its temporary files, so that process may write there and
    nowhere else (Landlock), and, without capabilities, not through /proc into the worker's or the
    judge's pipes (they are not dumpable): the tool's report, the worker's replies and the code the next
    candidate's processes import stay out of its reach."""
    from workbench.evaluate.gpu import sandbox

    if tool != "ncu":
        sandbox.close_doors(no_writes=True)
        return
    lock = "/tmp/nvidia"
    os.makedirs(lock, exist_ok=True)
    sandbox.confine_writes([os.environ.get("TMPDIR", lock), lock, "/dev"])
    sandbox.drop_capabilities()
    sandbox.close_doors(no_writes=False)


def warm_profiled_range() -> None:
    """One tiny kernel (torch's fill) inside a profiled range: Nsight Compute does its one-time set-up at
    the first kernel it profiles, and an empty range left it to the candidate's call (the H100, 171b8f3).
    Its launch leads the report, where `profile.without_warm_launch` takes it out."""
    import torch

    marker = torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    marker.fill_(1.0)  # not 0: a kernel whatever path a zero fill might take
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def await_candidate(folder: Path, parent: int, warm_range: Callable[[], None] = warm_profiled_range) -> bool:
    """Wait for the candidate (`request.json`). A `warm` file before it (the worker writes one only where
    nothing is timed or profiled, and always before the request) runs `warm_range` first, then leaves a
    `warmed` file (holding WARM_RAN where the range ran through): Nsight Compute's one-time set-up (about
    1.1 s at a process's first profiled kernel, the H200 at 3d9fae2; 0.85 s on an H100 at 171b8f3) is
    paid here while no candidate waits rather than after the go."""
    from workbench.evaluate.gpu.profile import WARM_RAN

    warm, request = folder / "warm", folder / "request.json"
    if not wait_for(request, parent, also=warm):
        return False
    if warm.exists():
        outcome = WARM_RAN
        try:
            warm_range()
        except Exception as exc:  # noqa: BLE001 - a range that fails costs only the saving: the call is as before
            print(f"ncu's first range before the candidate failed: {exc}", file=sys.stderr, flush=True)
            outcome = ""
        # Whole when it appears: the worker takes its presence for the range's end, then reads it.
        (folder / "warmed.partial").write_text(outcome)
        os.replace(folder / "warmed.partial", folder / "warmed")
    return wait_for(request, parent)


def load_after_go(folder: Path, parent: int, load: Callable[[], Any]) -> Any | None:
    """The candidate's module, loaded only once the worker says go (None if it is gone first). A tool's
    run waits through its candidate's timing stage (ncu's is profiled after it); loaded before, the
    library's constructors, or the Python a Triton candidate imports, could start a thread that runs on
    the GPU beside the timed calls (holding SMs the baselines would use) from a process nothing traces.
    Loaded after, nothing of the candidate runs anywhere but the timed process while it is timed."""
    if not wait_for(folder / "go", parent):
        return None
    return load()


CALLS_BEFORE_S = 2.0  # unprofiled calls stop after this long: a slow kernel keeps the dynamic tier short


def _calls_before(module: Any, arguments: list[Any], count: int) -> None:
    """The calls ahead of the profiled one (outside the profiler's range), so its position in the process
    is the secret's, not always the first."""
    import torch

    started = time.perf_counter()
    for _ in range(count):
        module.run(*arguments)
        torch.cuda.synchronize()
        if time.perf_counter() - started > CALLS_BEFORE_S:
            break


def once(workdir: str, parent: int) -> int:
    """One call of the candidate for a tool that watches this process (see `profiled_process.py`)."""
    import torch
    import tvm_ffi

    from workbench.evaluate.gpu import sandbox
    from workbench.evaluate.gpu.inputs import make_inputs, make_outputs
    from workbench.evaluate.gpu.isolation import HOLD_ENV, TOOL_ENV

    folder = Path(workdir)
    _close_tool_logs()
    # A spare started while another candidate is profiled: no CUDA context until the worker says so.
    if os.environ.get(HOLD_ENV) and not wait_for(folder / "start", parent):
        return 3
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    (folder / "ready").touch()
    if not await_candidate(folder, parent):
        return 3
    request = json.loads((folder / "request.json").read_text())
    spec = request["spec"]
    inputs = make_inputs(spec, int(spec["seed"]))
    outputs = make_outputs(spec)
    opened = None
    if spec.get("triton_entry"):
        from workbench.evaluate.gpu import triton_runtime

        opened = triton_runtime.open_candidate(Path(spec["triton_entry"]))
    torch.cuda.synchronize()
    (folder / "prepared").touch()  # the call's inputs are made: only the go and the load are left
    if sandbox.available():
        close_tool_doors(os.environ.get(TOOL_ENV, ""))
    module = load_after_go(
        folder,
        parent,
        lambda: opened.module() if opened is not None else tvm_ffi.load_module(request["library"]),
    )
    if module is None:
        return 3
    if opened is not None:
        opened.seed(json.loads((folder / "go").read_text() or "{}").get("autotuned") or {})
    _calls_before(module, [*inputs, *outputs], int(spec.get("calls_before", 0)))
    torch.cuda.profiler.start()
    module.run(*inputs, *outputs)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    sys.stdout.flush()
    sys.stderr.flush()
    # The tool holds every result once the call is done; an orderly CUDA teardown cost ~1 s more.
    os._exit(0)


def main() -> None:
    if len(sys.argv) >= 4 and sys.argv[1] == "once":
        sys.exit(once(sys.argv[2], int(sys.argv[3])))
    sys.exit(serve())


if __name__ == "__main__":
    main()
