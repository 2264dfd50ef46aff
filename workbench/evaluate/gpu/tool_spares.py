"""Spare tool runs (ncu, memcheck) in line for the next candidates. Standard library only, like the worker.

A tool run's start (the tool's own, its child's imports, then its CUDA context under the tool) takes
seconds, and a held one makes its context only once nothing of the current candidate is profiled or
timed. One spare, released at the end of a candidate's dynamic tier, was still making its context when
the next candidate came back to back (the H200: memcheck 0.5-1.6 s of waiting at 6c53454; ncu not
prepared in 10 of 25 evaluations at 23dcef4, its tier 1.5-3.4 s against 1.4-1.9 s). Two in line give
the one taken a whole candidate's time (ncu prepared in 24 of 25 at 8b6b4f0).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from workbench.evaluate.gpu.tool_process import ToolProcess

Tool = TypeVar("Tool", bound=ToolProcess)


class ToolSpares(Generic[Tool]):
    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.line: list[Tool] = []  # oldest first: taken first, having had the longest to start

    def take(self, fits: Callable[[Tool], bool]) -> Tool | None:
        """The oldest live spare that `fits`; the dead ones and those that do not fit are closed (they
        were started for the last candidate's settings, which this one changed)."""
        while self.line:
            tool = self.line.pop(0)
            if tool.alive() and fits(tool):
                return tool
            tool.close()
        return None

    def fill(self, make: Callable[[], Tool]) -> None:
        while len(self.line) < self.depth:
            self.line.append(make())

    def next_up(self) -> Tool | None:
        """The spare the next candidate takes, if it fits."""
        return self.line[0] if self.line else None

    def release(self) -> None:
        """Held spares may make their CUDA contexts now."""
        for tool in self.line:
            tool.start()

    def close(self) -> None:
        for tool in self.line:
            tool.close()
        self.line.clear()
