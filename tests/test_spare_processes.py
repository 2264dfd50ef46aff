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


def test_two_memcheck_spares_wait_held_and_a_candidate_takes_the_oldest(tmp_path) -> None:
    """The memcheck a candidate takes was started a candidate earlier, so its imports are done. The
    real compute-sanitizer is not on this machine: a stand-in runs the child after the tool's options."""
    tool = tmp_path / "compute-sanitizer"
    tool.write_text('#!/bin/sh\nwhile [ "$1" != "--log-file" ]; do shift; done\nshift 2\nexec "$@"\n')
    tool.chmod(0o755)
    worker = Worker(io.StringIO())
    worker.sanitizer_tool = str(tool)
    try:
        worker.warm_spare("cuda", held=True)
        first, second = worker.spare_sanitizers.line
        assert first.held and second.held and first.alive() and second.alive()
        worker.warm_spare("cuda", held=True)
        assert worker.spare_sanitizers.line == [first, second]  # topped up, not grown
        assert worker.take_sanitizer() is first
        worker.warm_spare("cuda", held=True)
        assert worker.spare_sanitizers.line[0] is second and len(worker.spare_sanitizers.line) == 2
        third = worker.spare_sanitizers.line[1]
        second.close()  # a spare that died is passed over, not handed out
        assert worker.take_sanitizer() is third and worker.spare_sanitizers.line == []
        first.close()
        third.close()
    finally:
        worker.close()
