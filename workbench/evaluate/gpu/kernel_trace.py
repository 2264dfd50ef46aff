"""What the candidate's process ran on the GPU, as raw records: CUPTI activity through cupti-python,
with CUDA events as the fallback, and host clocks on a CPU device.

The runner opens a labelled `Window` around every stretch of its own work (preparing inputs, the L2
flush, the marker kernel, the candidate's call). The trace keeps the windows and every record CUPTI
delivers: kernels with their launch configuration, memory copies and sets, and the start time of the
runtime or driver call behind each correlation id. Nothing is judged here: `raw()` hands everything to
the worker, which attributes each record to the window its launch call started in (`trace_checks.py`),
so a kernel launched from anywhere outside a window is visible as stray work.

Verified on the H200 (cupti-python 13.4 over the image's CUPTI 13.0): kernel records carry mangled
names, stream ids and GPU timestamps comparable with `get_timestamp()`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Self

import torch

BUFFER_BYTES = 8 * 1024 * 1024
HANG_FLUSH_S = 1.5  # within the worker's wait for a hang report (isolation.HANG_REPORT_S)


@dataclass
class Window:
    """A host interval; enter/exit stamp it with the trace's clock."""

    trace: _Trace
    label: str
    start: int = 0
    end: int = 0
    events: tuple[torch.cuda.Event, torch.cuda.Event] | None = None

    def __enter__(self) -> Self:
        self.trace._open(self)
        self.trace.current = self
        return self

    def __exit__(self, *exc: object) -> None:
        self.trace.current = None
        self.trace._close(self)
        self.trace.windows.append(self)


@dataclass
class _Trace:
    method: str = ""
    windows: list[Window] = field(default_factory=list)
    current: Window | None = None  # the window open now: on a hang, the one the process is stuck in

    def window(self, label: str) -> Window:
        return Window(self, label)

    def _open(self, window: Window) -> None:
        window.start = self.now()

    def _close(self, window: Window) -> None:
        window.end = self.now()

    def now(self) -> int:
        return time.perf_counter_ns()

    def collect(self) -> None:
        """Make the records of finished work readable (after a synchronize)."""

    def clear(self) -> None:
        self.windows.clear()

    def raw(self) -> dict:
        """Everything recorded since the last `clear()`, as plain JSON."""
        return {
            "method": self.method,
            "windows": [[w.label, w.start, w.end, self._span(w)] for w in self.windows],
            "kernels": [],
            "copies": [],
            "launches": {},
        }

    def _span(self, window: Window) -> float | None:
        return None

    def naming(self, on: bool) -> None:
        """Record launched kernels' names from now (they reach the activity records only when a kernel
        ends; a hang needs them before)."""

    def stuck_window(self) -> Window | None:
        """The call a stuck process is in: its window if still open, else the last call's (a kernel that
        never ends holds the synchronize after the call's window has closed)."""
        if self.current is not None and self.current.label.startswith("call"):
            return self.current
        calls = [w for w in self.windows if w.label == "call" or w.label.startswith("call:")]
        return calls[-1] if calls else self.current

    def hang_report(self) -> dict:
        """From the watch thread while the main thread is stuck: the call's window, and what was launched
        and what finished in it."""
        window = self.stuck_window()
        return {"window": window.label if window is not None else None}


@dataclass
class KernelTrace(_Trace):
    """CUPTI kernel, copy, set and API activity. `collect()` after a synchronize makes it readable."""

    method: str = "cupti"
    kernels: list[list] = field(default_factory=list)
    copies: list[list] = field(default_factory=list)
    launches: dict[int, int] = field(default_factory=dict)  # correlation id -> API call start (ns)
    # correlation id -> (kernel, launch time), while naming is on
    named: dict[int, tuple[str, int]] = field(default_factory=dict)
    _pending: list[tuple] = field(default_factory=list)

    def __post_init__(self) -> None:
        from cupti import cupti

        self._cupti = cupti
        kinds = cupti.ActivityKind
        kernel_kind, copy_kinds = kinds.CONCURRENT_KERNEL, (kinds.MEMCPY, kinds.MEMSET)
        api_kinds = (kinds.RUNTIME, kinds.DRIVER)

        def requested():
            return BUFFER_BYTES, 0

        def completed(activities) -> None:
            for act in activities:
                if act.kind == kernel_kind:
                    self._pending.append(
                        (
                            "k",
                            [
                                act.name, act.start, act.end, act.correlation_id, act.stream_id,
                                [act.grid_x, act.grid_y, act.grid_z], [act.block_x, act.block_y, act.block_z],
                                act.registers_per_thread, act.static_shared_memory, act.dynamic_shared_memory,
                            ],
                        )
                    )  # fmt: skip
                elif act.kind in copy_kinds:
                    self._pending.append(
                        ("c", [int(act.kind), act.start, act.end, act.correlation_id, act.stream_id])
                    )
                elif act.kind in api_kinds:
                    self._pending.append(("a", act.correlation_id, act.start))

        def launched(userdata, domain, cbid, data) -> None:
            # Every driver call while naming is on (~70 us each on the H200: correctness calls only); a
            # launch carries its kernel's name, on entry and again on exit. The runtime's launches
            # (nvcc's <<<>>>, torch's) reach the driver's cuLaunchKernel too: measured on the H200.
            try:
                name = data.symbol_name
                if name and name != "Unknown" and "Launch" in data.function_name:
                    self.named[data.correlation_id] = (name, int(cupti.get_timestamp()))
            except Exception:  # noqa: BLE001 - a record CUPTI cannot decode leaves that launch unnamed
                return

        # Held here so the harness fingerprint covers the very functions CUPTI calls back.
        self.callbacks = (requested, completed, launched)
        cupti.activity_register_callbacks(requested, completed)
        for kind in (kernel_kind, *copy_kinds, *api_kinds):
            cupti.activity_enable(kind)
        try:
            self._subscriber = cupti.subscribe(launched, None)
        except Exception:  # noqa: BLE001 - one subscriber per process: without it, hangs go unnamed
            self._subscriber = None
        # A hang's flush runs on its own thread, waited for a bounded time: a flush that does not return
        # must not keep the watch thread from answering. On the H200 one never returned while a kernel
        # queued behind the hung one waited for its lazy load (the runner now loads the candidate's
        # kernels up front: eager_kernels.py); a kernel loaded some other way can still hold it.
        self._flush_wanted, self._flushed = threading.Event(), threading.Event()
        threading.Thread(target=self._flush_on_demand, daemon=True).start()

    def _flush_on_demand(self) -> None:
        self._flush_wanted.wait()
        self._cupti.activity_flush_all(1)
        self._flushed.set()

    def now(self) -> int:
        return int(self._cupti.get_timestamp())

    def collect(self) -> None:
        self._cupti.activity_flush_all(1)
        self._take_pending()

    def _take_pending(self) -> None:
        for item in self._pending:
            if item[0] == "k":
                self.kernels.append(item[1])
            elif item[0] == "c":
                self.copies.append(item[1])
            else:
                self.launches[item[1]] = item[2]
        self._pending.clear()

    def clear(self) -> None:
        self._cupti.activity_flush_all(1)
        self._pending.clear()
        self.kernels.clear()
        self.copies.clear()
        self.launches.clear()
        self.named.clear()
        self.windows.clear()

    def naming(self, on: bool) -> None:
        # Driver calls only: with the runtime domain on as well, a hung process gave no report in time
        # (the H200, 2026-12-03), and the driver domain already sees the runtime's launches.
        if self._subscriber is not None:
            self._cupti.enable_domain(int(on), self._subscriber, self._cupti.CallbackDomain.DRIVER_API)

    def hang_report(self) -> dict:
        report = super().hang_report()
        window = self.stuck_window()
        if window is None:
            return report
        end = window.end or float("inf")  # an open window has not ended
        report["launched"] = [name for name, at in self.named.values() if window.start <= at <= end]
        self._flush_wanted.set()
        if not self._flushed.wait(HANG_FLUSH_S):
            return report  # no `finished`: which launch is running cannot be told
        # The main thread is blocked behind the GPU: nothing else touches these now.
        self._take_pending()
        mine = {c for c, started in self.launches.items() if window.start <= started <= end}
        # A forced flush hands over the running kernel's record too, without its end (the H200 probe's
        # spinning kernel came back among the "completed"): only a record that ended after it started
        # is a kernel that finished.
        report["finished"] = [
            k[0] for k in sorted(self.kernels, key=lambda k: k[1]) if k[3] in mine and k[2] > k[1] > 0
        ]
        return report

    def raw(self) -> dict:
        data = super().raw()
        data.update(
            kernels=list(self.kernels),
            copies=list(self.copies),
            launches={str(k): v for k, v in self.launches.items()},
        )
        return data


@dataclass
class EventTrace(_Trace):
    """Fallback without CUPTI: CUDA events on the current stream around each window; no kernel names."""

    method: str = "events"

    def _open(self, window: Window) -> None:
        super()._open(window)
        window.events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        window.events[0].record()

    def _close(self, window: Window) -> None:
        assert window.events is not None
        window.events[1].record()
        super()._close(window)

    def collect(self) -> None:
        torch.cuda.synchronize()

    def _span(self, window: Window) -> float | None:
        if window.events is None:
            return None
        return float(window.events[0].elapsed_time(window.events[1]))


@dataclass
class WallTrace(_Trace):
    """A CPU device: the window's own host time is the span."""

    method: str = "wall"

    def _span(self, window: Window) -> float | None:
        return (window.end - window.start) / 1e6


def open_trace(device: str) -> tuple[_Trace, str]:
    """CUPTI when cupti-python loads and enables activity here; else events, with the reason."""
    if device == "cpu":
        return WallTrace(), ""
    try:
        return KernelTrace(), ""
    except Exception as exc:  # noqa: BLE001 - any failure to load CUPTI means the events fallback
        return (
            EventTrace(),
            f"CUPTI unavailable ({type(exc).__name__}: {str(exc)[:200]}); timed with CUDA events",
        )
