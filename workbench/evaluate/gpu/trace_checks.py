"""What the raw records of the candidate's process say, read in the worker (a process the candidate
never ran in).

A record belongs to the window its launch call (runtime or driver API, joined on CUPTI's correlation id)
started in, whatever thread or stream launched it. From that:
- a call's own kernels, its launch configurations and its GPU span;
- kernels of the call that are not the module's own (`foreign_kernel`);
- GPU work the process launched outside every window the harness opened (`stray_kernel`): a background
  thread, work left running past the call;
- kernels of the call on another stream, still running when the caller's stream read the outputs;
- the harness's marker kernel missing from its window: the trace itself was switched off or flushed
  from inside (`tampered`).

Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from workbench.evaluate.gpu.protocol import Status

KERNEL_FIELDS = (
    "name",
    "start",
    "end",
    "correlation",
    "stream",
    "grid",
    "block",
    "registers",
    "static_smem",
    "dynamic_smem",
)
_Dim3 = tuple[int, int, int]  # a launch's x, y, z


@dataclass(frozen=True)
class Kernel:
    name: str
    start: int
    end: int
    correlation: int
    stream: int
    grid: _Dim3 = (0, 0, 0)
    block: _Dim3 = (0, 0, 0)
    registers: int = 0
    static_smem: int = 0
    dynamic_smem: int = 0

    @classmethod
    def from_raw(cls, row: list) -> Kernel:
        name, start, end, correlation, stream, grid, block, registers, static_smem, dynamic_smem = row
        # The runner records CUPTI's gridX/Y/Z and blockX/Y/Z: three numbers each.
        return cls(
            str(name), int(start), int(end), int(correlation), int(stream),
            cast(_Dim3, tuple(int(x) for x in grid)), cast(_Dim3, tuple(int(x) for x in block)),
            int(registers), int(static_smem), int(dynamic_smem),
        )  # fmt: skip

    @property
    def launch(self) -> tuple:
        """What must match between the profiled and the timed calls."""
        return (self.name, self.grid, self.block, self.registers, self.dynamic_smem, self.static_smem)


@dataclass
class WindowRecords:
    label: str
    start: int
    end: int
    span_field: float | None
    kernels: list[Kernel] = field(default_factory=list)
    copies: list[list] = field(default_factory=list)

    def span_ms(self, method: str) -> float | None:
        """GPU time from the window's first kernel start to its last kernel end (CUPTI), else the span
        the trace measured for the window itself (events, host clock)."""
        if method != "cupti":
            return self.span_field
        if not self.kernels:
            return None
        return (max(k.end for k in self.kernels) - min(k.start for k in self.kernels)) / 1e6


@dataclass
class Attributed:
    method: str
    windows: list[WindowRecords]
    stray: list[str]  # descriptions of records launched outside every window

    def labelled(self, prefix: str) -> list[WindowRecords]:
        return [w for w in self.windows if w.label == prefix or w.label.startswith(prefix + ":")]


def attribute(raw: dict) -> Attributed:
    """Every record of `raw` into the window its launch call started in; the rest is stray."""
    method = str(raw.get("method", ""))
    windows = [
        WindowRecords(str(label), int(start), int(end), span)
        for label, start, end, span in raw.get("windows", [])
    ]
    launches = {int(k): int(v) for k, v in (raw.get("launches") or {}).items()}
    ordered = sorted(windows, key=lambda w: w.start)
    stray: list[str] = []

    def home(correlation: int) -> WindowRecords | None:
        started = launches.get(correlation)
        if started is None:
            return None
        for window in ordered:
            if window.start <= started <= window.end:
                return window
            if window.start > started:
                break
        return None

    for row in raw.get("kernels", []):
        kernel = Kernel.from_raw(row)
        window = home(kernel.correlation)
        if window is None:
            stray.append(f"kernel {kernel.name}")
        else:
            window.kernels.append(kernel)
    for row in raw.get("copies", []):
        window = home(int(row[3]))
        if window is None:
            stray.append("memory copy" if int(row[0]) == 1 else "memory set")
        else:
            window.copies.append(row)
    return Attributed(method, windows, stray)


def foreign_names(kernels: list[Kernel], own: set[str] | None) -> list[str]:
    if own is None:
        return []
    return sorted({k.name for k in kernels if k.name not in own})


def call_problem(trace: Attributed, own: set[str] | None) -> tuple[str, str] | None:
    """(status, message) for one correctness call traced as marker, call, readback windows."""
    if trace.method != "cupti":
        return None
    if trace.stray:
        return Status.stray_kernel, (
            f"the candidate's process ran {len(trace.stray)} piece(s) of GPU work outside its call "
            f"(first: {trace.stray[0]}): work launched by another thread or left running is not allowed"
        )
    markers = trace.labelled("marker") + trace.labelled("readback")
    if len(markers) < 2 or not all(w.kernels for w in markers):
        return (
            Status.tampered,
            "the kernel trace lost the harness's marker kernel: CUPTI was switched off or flushed",
        )
    windows: list[WindowRecords | None] = [*trace.labelled("call")] or [None]
    (call,) = windows
    if call is None:
        return Status.tampered, "the call's window is missing from the trace"
    foreign = foreign_names(call.kernels, own)
    if foreign:
        return Status.foreign_kernel, (
            f"the call launched {len(foreign)} kernel(s) not defined in the candidate's module: "
            + ", ".join(foreign[:3])
        )
    if not call.kernels:
        return (
            Status.runtime_error,
            "the call launched no GPU kernel: its outputs were made on the host or copied",
        )
    readback = trace.labelled("readback")
    if readback and readback[0].kernels:
        first_read = min(k.start for k in readback[0].kernels)
        read_stream = readback[0].kernels[0].stream
        late = [k for k in call.kernels if k.end > first_read and k.stream != read_stream]
        if late:
            return Status.runtime_error, (
                f"kernel {late[0].name} ran on another stream (id {late[0].stream}) and was still running when the "
                "caller's stream read the outputs: launch on the stream TVM-FFI hands out, or order your stream "
                "before returning"
            )
    return None
