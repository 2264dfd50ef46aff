"""The hardware counters of each timed call of the candidate, read in the judge's process by CUPTI's PM
sampling (cupti-python): the GPU's performance monitors sampled at a fixed interval, with no replay, no
serialisation and nothing in the candidate's process, so a kernel cannot tell a counted call from any
other. Sampling is device-wide: it is started before the runner prepares a candidate call (flushes L2,
writes its inputs) and stopped after the call has finished and two more intervals have passed, so the
last partial interval is read too. The call's counts are the samples that overlap its bracket, the
worker's realtime clock read just before the call was asked and just after its answer, widened by an
interval each side (the samples' timestamps are CUPTI's clock, which is the realtime clock: each bracket
summed 1.0000x the call, nothing outside it, on an H100 at 31f66f1, `benchmarks/pm_continuous_probe.py`).
The call lies wholly inside, and anything else there can only add, so it never undercounts the call.
The prepare's work, the first sample's (all counted since the last read) and the next call's lie
outside it: every kept call idles 200 us after its prepare, and the judge stops the window before the
runner goes on. It decodes the window's samples, and evaluates those in the bracket, on a thread beside
the next calls and its own check of the round (`stop_beside`): host-only work, off the timed rounds' path.

Only while the timing stage runs: Nsight Compute, which profiles the next stage, needs the monitors.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from workbench.evaluate.gpu.agreement import COUNTERS
from workbench.evaluate.gpu.sample_reader import CollectorDecode, SampleReader

# The read's cost follows the samples in a window (at 20 us, 2.0 ms a call in a bare loop of 78 samples,
# 4-10 ms in the timing stage, whose window holds its requests between processes too; 2569394, H100);
# a longer interval has fewer, and a wider margin around each bracket.
SAMPLING_INTERVAL_NS = 50_000
# After the call has finished, before the stop: two intervals (the sample that holds its last counts is
# taken, and the bracket's margin is past).
SETTLE_INTERVALS = 2
METRIC_SET = "TriageCompute"  # GH100's single-pass set that holds both counters
# The hardware buffer must hold a whole window: a full one fails the decode and the call is not read.
# A sample takes 2.6-5.2 KB of it on an H100 (94a280e: 4 MiB held 809 samples and not 1,600; 16 MiB
# 3,212 and not 6,400); room is made for 8 KiB. CUPTI's set-up and close follow the buffer's size
# (there: 71 ms and 43 ms at 16 MiB, 313 and 79 at cupti-python's 512 MiB), so the buffer is sized to
# the window the stage expects, not the call limit (10 s or more: gigabytes at this interval).
BUFFER_BYTES_PER_SAMPLE = 8 * 1024
MIN_BUFFER_BYTES, MAX_BUFFER_BYTES = 16 * 1024 * 1024, 512 * 1024 * 1024
# The window a stage's counted calls may take: its candidate's first call, many times over, and never
# less than a floor that holds any call of a fraction of a second with the requests around it and a
# host's stall beside it (a window holds the worker's and the judge's requests too: the headline GEMM's
# take 2-3 ms). An honest call does not grow twentyfold between its warm-up and its timed calls; one that
# does is not counted, and fails, unless its own prepare and call took under half the window (a host stall
# outside it: `agreement.counters_against_timed`). The floor's buffer is 79 MiB: its
# set-up lies between 91 and 125 ms (64 and 128 MiB on an H100, 94a280e); the warm-up hid the 40 MiB of
# a 0.25 s floor (b411ebe), and whether it hides this one is not yet measured.
WINDOW_FACTOR, WINDOW_FLOOR_S = 20, 0.5


def window_for(first_call_ms: float) -> float:
    """The seconds a counted call's window may take, given the candidate's first call in the stage (its
    prepare and its call: the sampler is started before the prepare)."""
    return max(WINDOW_FLOOR_S, WINDOW_FACTOR * first_call_ms / 1e3)


def sampling_for(window_s: float, interval_ns: int = SAMPLING_INTERVAL_NS) -> tuple[int, int]:
    """The interval (at least `interval_ns`) and hardware buffer whose samples hold `window_s`: a longer
    interval only where the largest buffer would not hold the window at `interval_ns`."""
    interval_ns = max(interval_ns, math.ceil(window_s * 1e9 * BUFFER_BYTES_PER_SAMPLE / MAX_BUFFER_BYTES))
    samples = math.ceil(window_s * 1e9 / interval_ns) + 64
    return interval_ns, min(MAX_BUFFER_BYTES, max(MIN_BUFFER_BYTES, samples * BUFFER_BYTES_PER_SAMPLE))


class CallCounters:
    """One PM-sampling session on one device; `why` says why there is none."""

    def __init__(
        self, device_index: int, window_s: float = WINDOW_FLOOR_S, interval_ns: int = SAMPLING_INTERVAL_NS
    ) -> None:
        self.collector: object | None = None
        self.reader: SampleReader | CollectorDecode | None = None
        self.why = ""
        self.window_s = window_s
        self.interval_ns, buffer_bytes = sampling_for(window_s, interval_ns)
        self.settle_s = SETTLE_INTERVALS * self.interval_ns / 1e9  # in the interval taken
        # CUPTI's clock (its samples' timestamps) against the realtime clock a bracket is read in, read
        # at each call's start and again at its stop: each end of a bracket is mapped by the offset read
        # nearest it, so a step of the host's clock during the call does not move the bracket off it.
        # Without CUPTI the samples' clock is the realtime clock itself.
        self.clock_offset: Callable[[], int] = lambda: 0
        self.offset_ns = 0  # CUPTI's clock less the realtime clock, at the last start
        self.bracket = (0, 0)  # the last stopped call's, in CUPTI's clock, widened by an interval
        self.begun = 0.0  # when the window's start was asked
        self.window_open = False  # the last start's window is sampling
        self.stopped = 0.0  # when the window's stop was done
        # The last call's seconds by part (CUPTI's start, the settle, CUPTI's stop, the decode,
        # the samples' evaluation): where a counted call's cost goes.
        self.parts_s: dict[str, float] = {}
        # Calls stopped by `stop_beside`: each one's sums, their parts summed, the read still running.
        self.windows: list[dict[str, float]] = []
        self.outgrown: list[int] = []  # the calls (from 1) whose window outgrew the hardware buffer
        self.totals_s: dict[str, float] = {}
        self.reading: threading.Thread | None = None
        try:
            from cupti import pm_sampling

            collector = pm_sampling.Collector(device_index)
            collector.enable()
        except Exception as exc:  # noqa: BLE001 - no sampling here: the check is not made, and says why
            self.why = f"CUPTI's PM sampling is not available ({type(exc).__name__}: {str(exc)[:160]})"
            return
        metrics = [counter.sampled for counter in COUNTERS.values()]
        try:
            collector.configure(
                metrics=metrics,
                hardware_buffer_size=buffer_bytes,
                sampling_interval=self.interval_ns,
                single_pass_metric_set_name=METRIC_SET,
            )
        except Exception as exc:  # noqa: BLE001 - another chip's names: not made, said
            collector.disable()
            self.why = f"this GPU cannot sample the counters ({type(exc).__name__}: {str(exc)[:160]})"
            return
        try:
            self.reader = SampleReader(collector, metrics)
        except Exception:  # noqa: BLE001 - another cupti-python: its own, slower read
            self.reader = CollectorDecode(collector)
        self.collector = collector
        import cupti.cupti as api

        self.clock_offset = lambda: api.get_timestamp() - time.time_ns()

    def start(self) -> None:
        self.await_read()  # the last call's read is done with the collector
        self.window_open = False
        # After a window outgrew the buffer CUPTI starts no other (ERROR_UNKNOWN, H100 9e6367f); that
        # call already fails the proof, so the later ones are kept empty.
        if self.collector is None or self.outgrown:
            return
        self.begun = time.perf_counter()
        try:
            self.collector.start()  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - this call is not compared, and says why
            self.why = f"a call's sampling could not be started ({type(exc).__name__}: {str(exc)[:160]})"
            return
        self.window_open = True
        self.offset_ns = self.clock_offset()
        self.parts_s = {"start": time.perf_counter() - self.begun}

    def stop(self, began_ns: int, ended_ns: int) -> dict[str, float]:
        """The counters summed over the samples the call's bracket (realtime ns before it was asked and
        after its answer) overlaps; empty where sampling failed."""
        return self.read() if self.halt(began_ns, ended_ns) else {}

    def halt(self, began_ns: int, ended_ns: int) -> bool:
        """The window ended once the call's last sample is taken: False where sampling failed."""
        margin, offset_ns = self.interval_ns, self.clock_offset()
        self.bracket = (began_ns + self.offset_ns - margin, ended_ns + offset_ns + margin)
        if self.collector is None or self.reader is None or not self.window_open:
            return False
        self.window_open = False
        settling = time.perf_counter()
        time.sleep(self.settle_s)
        stopping = time.perf_counter()
        try:
            self.collector.stop()  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - a call's samples lost: this call is not compared
            self.why = f"a call's sampling could not be stopped ({type(exc).__name__}: {str(exc)[:160]})"
            return False
        self.stopped = time.perf_counter()
        self.parts_s.update(settle=stopping - settling, stop=self.stopped - stopping)
        return True

    def read(self) -> dict[str, float]:
        """The halted window's samples decoded and evaluated, summed as `stop` says."""
        assert self.reader is not None
        decoding = time.perf_counter()
        try:
            # Room for every sample from the start asked to the stop done (the monitors sample until
            # then: a room from the call's start to the stop's ask fell short on 2 of 30 calls, H100
            # 0c764f8); a sample left out would undercount the call.
            room = int((self.stopped - self.begun) * 1e9 / self.interval_ns) + 64
            completed, room = self.reader.decode(room)
        except Exception as exc:  # noqa: BLE001 - a call's samples lost: this call is not compared
            self.why = f"a call's samples could not be read ({type(exc).__name__}: {str(exc)[:160]})"
            return {}
        decoded = time.perf_counter()
        self.parts_s["decode"] = decoded - decoding
        if self.reader.overflow:  # the newest samples were dropped: the call would look short
            self.why = (
                f"a call's window outgrew the sampler's hardware buffer, sized for {self.window_s:.2f} s "
                f"({completed} samples read)"
            )
            return {}
        if completed >= room or completed < 2:
            self.why = f"a call gave {completed} samples ({room} made room for)"
            return {}
        began, ended = self.bracket
        spans = self.reader.timestamps(completed)
        inside = [index for index, (start, end) in enumerate(spans) if end > began and start < ended]
        values = self.reader.values(inside)  # only the bracket's samples evaluated on the host
        self.parts_s["evaluate"] = time.perf_counter() - decoded
        if not inside:  # the sampler's clock is not the worker's here: nothing to judge the call on
            self.why = "no sample overlapped a call's bracket (the sampler's clock is not the worker's)"
            return {}
        return _summed(values)

    def stop_beside(self, began_ns: int, ended_ns: int) -> None:
        """`stop`, its read on a thread: the host-only decode and evaluation run beside the runner's next
        calls and the judge's check of the round. The next `start`, `await_read` and `close` wait for it;
        each call's sums are kept in `windows`, its parts added to `totals_s`."""
        if not self.halt(began_ns, ended_ns):
            self._keep({})
            return
        self.reading = threading.Thread(target=self._read_and_keep, name="pm-sampling-read", daemon=True)
        self.reading.start()

    def await_read(self) -> None:
        if self.reading is not None:
            self.reading.join()
            self.reading = None

    def _read_and_keep(self) -> None:
        try:
            sums = self.read()
        except Exception as exc:  # noqa: BLE001 - the evaluation failed: this call is not compared
            self.why = f"a call's samples could not be evaluated ({type(exc).__name__}: {str(exc)[:160]})"
            sums = {}
        # The reader says whether this window outgrew the buffer (none read after one that did).
        self._keep(sums, outgrown=self.reader is not None and self.reader.overflow)

    def _keep(self, sums: dict[str, float], outgrown: bool = False) -> None:
        self.windows.append(sums)
        if outgrown:
            self.outgrown.append(len(self.windows))
        for part, seconds in self.parts_s.items():
            self.totals_s[part] = self.totals_s.get(part, 0.0) + seconds

    def close(self) -> None:
        self.await_read()
        if self.collector is not None:
            try:
                if self.reader is not None:
                    self.reader.close()
                self.collector.disable()  # type: ignore[attr-defined]
            finally:
                self.collector = self.reader = None


def _summed(samples: list[list[float]]) -> dict[str, float]:
    return {name: float(sum(sample[index] for sample in samples)) for index, name in enumerate(COUNTERS)}
