"""The next candidate's processes: started, held off the GPU, with the current candidate's first stage
(their imports take seconds), and released only when asked. Real worker and runner processes on CPU."""

from __future__ import annotations

import io
import select

from workbench.evaluate.gpu.protocol import BeginRequest, Status
from workbench.evaluate.gpu.session import Session
from workbench.evaluate.gpu.stages import run_stage
from workbench.evaluate.gpu.worker import Worker


def test_the_first_stage_starts_a_held_spare_runner_that_readies_only_once_released() -> None:
    worker = Worker(io.StringIO())
    request: BeginRequest = {
        "op": "begin",
        "library": "/nonexistent/kernel.so",
        "spec": {"device": "cpu", "axes": {}},
        "kernels": [],
        "stages": ["correctness"],
    }
    try:
        session = Session(worker, request)
        assert worker.runners.line == []
        stage = run_stage(session, "no such stage", {"op": "stage", "stage": "no such stage"})
        assert stage["status"] == Status.infrastructure_error
        assert [(s.device, s.held) for s in worker.runners.line] == [("cpu", True)]  # one on the CPU
        runner = worker.runners.line[0].child
        assert runner.alive()
        # Held: nothing comes on its channel (its hello follows its CUDA context). Only looked at: a
        # receive() that times out would kill it.
        assert select.select([runner._read_fd], [], [], 3.0)[0] == []
        run_stage(session, "no such stage", {"op": "stage", "stage": "no such stage"})
        assert [s.child for s in worker.runners.line] == [runner]  # not one per stage
        worker.release_spares()
        assert not worker.runners.held
        ready = runner.receive(120.0)
        assert ready.ok and ready.data is not None and ready.data.get("type") == "ready", ready
    finally:
        worker.close()
