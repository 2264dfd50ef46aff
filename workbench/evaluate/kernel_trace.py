"""Which kernels a stretch of host code launched, and when they ran: CUPTI activity records through
cupti-python, with CUDA events as the fallback.

A `Window` is a host-side interval. A kernel belongs to it when the API call that launched it (runtime
or driver, joined on CUPTI's correlation id) started inside the interval, whatever thread or stream
launched it. That gives a call's own kernels (for timing and for foreign-kernel detection) without
trusting launch order or stream. Verified on the H200 (cupti-python 13.4 over the image's CUPTI 13.0):
kernel records carry mangled names, stream ids and GPU timestamps comparable with `get_timestamp()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Self

import torch

BUFFER_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class KernelRecord:
    name: str
    start: int  # ns, CUPTI clock
    end: int
    correlation: int
    stream: int


@dataclass
class Window:
    """A host interval; enter/exit stamp it with the trace's clock."""

    trace: object
    label: str
    start: int = 0
    end: int = 0
    events: tuple[torch.cuda.Event, torch.cuda.Event] | None = None

    def __enter__(self) -> Self:
        self.trace._open(self)  # type: ignore[attr-defined]
        return self

    def __exit__(self, *exc: object) -> None:
        self.trace._close(self)  # type: ignore[attr-defined]


class _Windows:
    """What both traces share: a `Window` stamped by the trace's own `_open` and `_close`."""

    def window(self, label: str) -> Window:
        return Window(self, label)


@dataclass
class KernelTrace(_Windows):
    """CUPTI kernel + API activity. `collect()` after a synchronize makes the records readable."""

    method: str = "cupti"
    kernels: list[KernelRecord] = field(default_factory=list)
    launches: dict[int, int] = field(default_factory=dict)  # correlation id -> API call start (ns)
    _pending: list[tuple] = field(default_factory=list)

    def __post_init__(self) -> None:
        from cupti import cupti

        self._cupti = cupti
        kernel_kind = cupti.ActivityKind.CONCURRENT_KERNEL
        api_kinds = (cupti.ActivityKind.RUNTIME, cupti.ActivityKind.DRIVER)

        def requested():
            return BUFFER_BYTES, 0

        def completed(activities) -> None:
            for act in activities:
                if act.kind == kernel_kind:
                    self._pending.append(
                        ("k", act.name, act.start, act.end, act.correlation_id, act.stream_id)
                    )
                elif act.kind in api_kinds:
                    self._pending.append(("a", act.correlation_id, act.start))

        cupti.activity_register_callbacks(requested, completed)
        for kind in (kernel_kind, *api_kinds):
            cupti.activity_enable(kind)

    def now(self) -> int:
        return int(self._cupti.get_timestamp())

    def _open(self, window: Window) -> None:
        window.start = self.now()

    def _close(self, window: Window) -> None:
        window.end = self.now()

    def collect(self) -> None:
        """Flush CUPTI's buffers (call after synchronizing) and index what came back."""
        self._cupti.activity_flush_all(1)
        for item in self._pending:
            if item[0] == "k":
                self.kernels.append(KernelRecord(*item[1:]))
            else:
                self.launches[item[1]] = item[2]
        self._pending.clear()

    def clear(self) -> None:
        self._cupti.activity_flush_all(1)
        self._pending.clear()
        self.kernels.clear()
        self.launches.clear()

    def kernels_in(self, window: Window) -> list[KernelRecord]:
        found = []
        for kernel in self.kernels:
            launched = self.launches.get(kernel.correlation)
            if launched is not None and window.start <= launched <= window.end:
                found.append(kernel)
        return found

    def span_ms(self, window: Window) -> float | None:
        """GPU time from the window's first kernel start to its last kernel end."""
        kernels = self.kernels_in(window)
        if not kernels:
            return None
        return (max(k.end for k in kernels) - min(k.start for k in kernels)) / 1e6


@dataclass
class EventTrace(_Windows):
    """Fallback without CUPTI: CUDA events on the current stream around each window; no kernel names."""

    method: str = "events"

    def _open(self, window: Window) -> None:
        window.events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        window.events[0].record()

    def _close(self, window: Window) -> None:
        assert window.events is not None
        window.events[1].record()

    def collect(self) -> None:
        torch.cuda.synchronize()

    def clear(self) -> None:
        return None

    def kernels_in(self, window: Window) -> list[KernelRecord]:
        return []

    def span_ms(self, window: Window) -> float | None:
        if window.events is None:
            return None
        return float(window.events[0].elapsed_time(window.events[1]))


def open_trace() -> tuple[KernelTrace | EventTrace, str]:
    """CUPTI when cupti-python loads and enables activity here; else events, with the reason."""
    try:
        return KernelTrace(), ""
    except Exception as exc:  # noqa: BLE001 - any failure to load CUPTI means the events fallback
        return (
            EventTrace(),
            f"CUPTI unavailable ({type(exc).__name__}: {str(exc)[:200]}); timed with CUDA events",
        )
