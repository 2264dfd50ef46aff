"""The real worker process over its JSON-lines protocol, on this machine (no GPU here).

It answers hello, rejects malformed and unknown requests without dying, and turns a GPU child that
cannot start into a verdict while it keeps serving. Builds are not its work: an ssh executor's GPU
host builds with `python -m workbench.evaluate.remote_build` (tests/test_remote_build.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from workbench.evaluate.gpu.worker import worker_argv


class WorkerProcess:
    def __init__(self, cache: Path) -> None:
        env = {**os.environ, "PTXWB_CACHE": str(cache)}
        self.process = subprocess.Popen(
            worker_argv(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    def send_line(self, line: str) -> dict:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def send(self, message: dict) -> dict:
        return self.send_line(json.dumps(message))

    def close(self) -> int:
        self.send({"op": "shutdown"})
        return self.process.wait(timeout=60)


@pytest.fixture
def worker(tmp_path: Path):
    process = WorkerProcess(tmp_path / "cache")
    yield process
    if process.process.poll() is None:
        process.process.kill()
        process.process.wait()


def test_hello_describes_the_host(worker: WorkerProcess) -> None:
    reply = worker.send({"op": "hello", "id": 1})
    assert reply["id"] == 1 and reply["type"] == "hello" and reply["protocol"] == 3
    assert isinstance(reply["gpus"], list) and reply["python"].startswith("3.")
    assert worker.close() == 0


def test_bad_requests_are_answered_and_the_worker_lives_on(worker: WorkerProcess) -> None:
    assert worker.send_line("{not json")["type"] == "error"
    assert worker.send({"op": "fly", "id": 2}) == {
        "id": 2,
        "type": "error",
        "status": "infrastructure_error",
        "message": "malformed message: field 'op' names no message of this channel: 'fly'",
    }
    assert worker.send({"op": "stage", "stage": "timing", "id": 3})["message"] == "no candidate begun"
    malformed = worker.send({"op": "stage", "stage": 7, "id": 5})
    assert malformed["status"] == "infrastructure_error" and "'stage'" in malformed["message"]
    assert worker.send({"op": "hello", "id": 4})["type"] == "hello"
    assert worker.close() == 0


def test_a_gpu_child_that_cannot_start_is_a_verdict_not_a_dead_worker(
    worker: WorkerProcess, tmp_path: Path
) -> None:
    library = tmp_path / "missing.so"
    spec = {"definition": {"inputs": {}, "outputs": {}}, "axes": {}, "seed": 1}
    begun = worker.send(
        {
            "op": "begin",
            "id": 5,
            "library": str(library),
            "kernels": ["k"],
            "spec": spec,
            "stages": ["correctness"],
            "timeouts": {"start_s": 120},
        }
    )
    assert begun["type"] == "begun"
    if begun["ok"]:
        pytest.skip("this machine has a working GPU: the failure path is exercised by the GPU tests")
    assert begun["status"] == "infrastructure_error"
    assert begun["message"].startswith("the GPU child did not start: exited with status 1")
    stage = worker.send({"op": "stage", "id": 6, "stage": "correctness"})
    assert stage["result"]["status"] == "infrastructure_error"
    assert worker.send({"op": "end", "id": 7})["type"] == "ended"
    assert worker.send({"op": "hello", "id": 8})["type"] == "hello"
    assert worker.close() == 0


def test_a_chatty_worker_costs_only_the_end_of_its_stderr_and_its_exit_names_its_last_words() -> None:
    import asyncio

    from workbench.evaluate.worker_client import STDERR_KEPT, WorkerClient, WorkerError

    async def go() -> tuple[int, str, str]:
        # PYTHONVERBOSE=2: the real worker writes ~180 KB of import traces to stderr before its hello.
        client = WorkerClient(worker_argv(), {**os.environ, "PYTHONVERBOSE": "2"})
        try:
            await client.start()
            kept = len(client._stderr)
            assert client._process is not None and client._process.stdin is not None
            client._process.stdin.close()  # the worker's stdin ends: it exits, writing its clean-up traces
            try:
                await client.request({"op": "hello"}, timeout_s=60)
                reason = "answered"
            except WorkerError as exc:
                reason = str(exc)
            last = [line for line in client._stderr.decode(errors="replace").splitlines() if line.strip()][-1]
            return kept, reason, last
        finally:
            await client.close()

    kept, reason, last = asyncio.run(go())
    assert kept == STDERR_KEPT  # more was written; only the end is kept
    assert reason.startswith("the worker exited (status 0): ") and reason.endswith(last[:300])
