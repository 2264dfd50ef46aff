"""The next candidates' runners, started before they are needed. Standard library only, like the worker.

A runner's imports (torch, TVM-FFI, CUPTI) take about 5 s on the H200, longer than one candidate's
tiers (about 3 s): one spare started with a candidate's first stage was still importing when the next
came back to back (0.6-0.7 s of `runner_ready`, 2026-12-03). Two in line on a GPU give each spare two
candidates' time. On the CPU (tests, no GPU to overlap) one is enough.

A held spare imports and waits for `start` before touching the GPU; it is released when nothing of the
current candidate is profiled or timed any more, or when it is taken.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workbench.evaluate.gpu.child_protocol import encode_runner
from workbench.evaluate.gpu.isolation import Child


@dataclass
class SpareRunner:
    device: str
    child: Child
    held: bool


class SpareRunners:
    def __init__(self, start: Callable[[str, bool], Child], gpu_depth: int = 2) -> None:
        self.start = start  # a runner for (device, held)
        self.gpu_depth = gpu_depth
        self.line: list[SpareRunner] = []  # oldest first: taken first, having had the longest to start

    def depth(self, device: str) -> int:
        return min(1, self.gpu_depth) if device == "cpu" else self.gpu_depth

    @property
    def held(self) -> bool:
        return any(spare.held for spare in self.line)

    def fill(self, device: str, held: bool) -> None:
        """Spares for `device` up to its depth; any for another device are closed (the next candidate
        most likely runs where the last one did)."""
        for spare in [s for s in self.line if s.device != device]:
            spare.child.close()
            self.line.remove(spare)
        while len(self.line) < self.depth(device):
            self.line.append(SpareRunner(device, self.start(device, held), held))

    def take(self, device: str) -> Child | None:
        """The oldest live spare for `device`, released if it was held; the dead ones are closed."""
        while self.line:
            spare = self.line.pop(0)
            if spare.device == device and spare.child.alive():
                if spare.held:
                    spare.child.send(encode_runner({"cmd": "start"}))
                return spare.child
            spare.child.close()
        return None

    def release(self) -> None:
        for spare in self.line:
            if spare.held:
                spare.child.send(encode_runner({"cmd": "start"}))
                spare.held = False

    def close(self) -> None:
        for spare in self.line:
            spare.child.close()
        self.line.clear()
