"""A verdict is sent before its candidate's processes are closed and the next one's started: the caller
does not wait for that (0.12-0.17 s of every evaluation on the H200 at 77bf9c8, `phases_s["end"]`), the
worker's next request does. A real `Worker` in this process on the CPU, its children real processes; the
stream it replies on notes, at each reply, whether the candidate's session and its runner were there."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from cpu_pipeline import build_cpu, cpu_spec

from workbench.evaluate.gpu.worker import Worker


class WatchedReplies(io.StringIO):
    """The worker's reply stream: for each reply, its type and whether a session and its runner were
    alive when it was written."""

    def __init__(self) -> None:
        super().__init__()
        self.worker: Worker | None = None
        self.seen: list[tuple[str, bool, bool]] = []

    def write(self, text: str) -> int:
        if text.strip() and self.worker is not None:
            session = self.worker.session
            runner = session.runner if session is not None else None
            alive = runner is not None and runner.alive()
            self.seen.append((json.loads(text)["type"], session is not None, alive))
        return super().write(text)


@pytest.fixture
def watched() -> tuple[Worker, WatchedReplies]:
    out = WatchedReplies()
    worker = Worker(out)
    out.worker = worker
    yield worker, out
    worker.close()


def test_the_verdict_goes_out_before_the_candidates_processes_are_closed(
    watched: tuple[Worker, WatchedReplies], tmp_path: Path
) -> None:
    worker, out = watched
    library = str(build_cpu({}, tmp_path))
    worker.handle(
        {
            "op": "evaluate",
            "id": 1,
            "library": library,
            "kernels": None,
            "spec": cpu_spec(),
            "stages": ["correctness"],
            "pace": {"warmup_s": 0.0, "timed_s": 0.0},
        }
    )
    result = [entry for entry in out.seen if entry[0] == "result"]
    assert result == [("result", True, True)]  # sent while the session and its runner still were
    assert worker.session is None  # ended once the verdict was out, before the next request
    # The staged way: `ended` is sent first too, and the session is over when the next request comes.
    worker.handle(
        {
            "op": "begin",
            "id": 2,
            "library": library,
            "kernels": None,
            "spec": cpu_spec(),
            "stages": ["correctness"],
        }
    )
    assert out.seen[-1][0] == "begun" and worker.session is not None
    worker.handle({"op": "end", "id": 3})
    assert out.seen[-1] == ("ended", True, True)
    assert worker.session is None
    worker.handle({"op": "hello", "id": 4})
    assert out.seen[-1][0] == "hello"  # nothing else was sent for the end: no second reply
