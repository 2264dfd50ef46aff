"""The hardware counters of each timed call of the candidate, read in the judge's process by CUPTI's PM
sampling (cupti-python): the GPU's performance monitors sampled at a fixed interval, with no replay, no
serialisation and nothing in the candidate's process. Sampling is device-wide and runs through the whole
of a timing stage's kept rounds, started once before them: no call is sampled differently from another,
so none can be told apart. Each counted call's counts are the samples that overlap its bracket, the
worker's realtime clock read just before the call was asked and just after its answer (the samples'
timestamps are CUPTI's clock, which is the realtime clock: `benchmarks/pm_continuous_probe.py`), widened by
an interval on each side. The call lies wholly inside, and anything else in the bracket can only add, so
it never undercounts the call; the idle before every kept call and the settle after a counted one keep
other work out. After each counted call the judge drains the sampler's buffer on a thread beside what
follows (host-only work), evaluating only the samples that overlap a call not yet read whole.

Only while the timing stage runs: Nsight Compute, which profiles the next stage, needs the monitors.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

from workbench.evaluate.gpu.agreement import COUNTERS
from workbench.evaluate.gpu.sample_reader import SampleReader

# The read's cost follows the samples in a window (at 20 us, 2.0 ms a call in a bare loop of 78 samples,
# 4-10 ms in the timing stage, whose window holds its requests between processes too; 2569394, H100);
# a longer interval has fewer, at the cost of a longer lead that every kept call then waits.
SAMPLING_INTERVAL_NS = 50_000
# After the start, before the first kept call: five intervals (the first sample, which holds everything
# counted before the start, is taken). After a counted call and before the close's stop: two (the sample
# that holds its last counts is taken).
LEAD_INTERVALS, SETTLE_INTERVALS = 5, 2
METRIC_SET = "TriageCompute"  # GH100's single-pass set that holds both counters
# The hardware buffer must hold what is sampled between two drains: a full one fails the decode and its
# samples are lost.
# A sample takes 2.6-5.2 KB of it on an H100 (94a280e: 4 MiB held 809 samples and not 1,600; 16 MiB
# 3,212 and not 6,400); room is made for 8 KiB. CUPTI's set-up and close follow the buffer's size
# (there: 71 ms and 43 ms at 16 MiB, 313 and 79 at cupti-python's 512 MiB), so the buffer is sized to
# the window the stage expects, not the call limit (10 s or more: gigabytes at this interval).
BUFFER_BYTES_PER_SAMPLE = 8 * 1024
MIN_BUFFER_BYTES, MAX_BUFFER_BYTES = 16 * 1024 * 1024, 512 * 1024 * 1024
# The seconds between two drains the buffer holds (a drain follows each counted call, so about a round):
# the stage's first round, many times over, and never less than a floor. An honest round does not grow
# twentyfold between the warm-up and the timed rounds; a call whose samples were lost so is not counted,
# and fails (`agreement.counters_against_timed`).
WINDOW_FACTOR, WINDOW_FLOOR_S = 20, 0.25


def window_for(first_round_s: float) -> float:
    """The seconds the buffer must hold between two drains, given the stage's first round."""
    return max(WINDOW_FLOOR_S, WINDOW_FACTOR * first_round_s)


def sampling_for(window_s: float, interval_ns: int = SAMPLING_INTERVAL_NS) -> tuple[int, int]:
    """The interval (at least `interval_ns`) and hardware buffer whose samples hold `window_s`: a longer
    interval only where the largest buffer would not hold the window at `interval_ns`."""
    interval_ns = max(interval_ns, math.ceil(window_s * 1e9 * BUFFER_BYTES_PER_SAMPLE / MAX_BUFFER_BYTES))
    samples = math.ceil(window_s * 1e9 / interval_ns) + 64
    return interval_ns, min(MAX_BUFFER_BYTES, max(MIN_BUFFER_BYTES, samples * BUFFER_BYTES_PER_SAMPLE))


@dataclass
class _Bracket:
    """A counted call not yet read whole: its number, its bracket in CUPTI's clock, its sums so far."""

    number: int
    began_ns: int
    ended_ns: int
    sums: list[float] = field(default_factory=lambda: [0.0] * len(COUNTERS))


class CallCounters:
    """One PM-sampling session on one device for one timing stage; `why` says why there is none."""

    def __init__(
        self, device_index: int, window_s: float = WINDOW_FLOOR_S, interval_ns: int = SAMPLING_INTERVAL_NS
    ) -> None:
        self.collector: object | None = None
        self.reader: SampleReader | None = None
        self.why = ""
        self.window_s = window_s
        self.interval_ns, buffer_bytes = sampling_for(window_s, interval_ns)
        self.lead_s = LEAD_INTERVALS * self.interval_ns / 1e9  # in the interval taken
        self.settle_s = SETTLE_INTERVALS * self.interval_ns / 1e9
        self.started = False  # CUPTI's start was made (the close stops it, even after a full buffer)
        self.sampling = False  # and its samples are still read
        self.offset_ns = 0  # CUPTI's clock less the realtime clock the brackets are read in
        self.drained = 0.0  # when the buffer was last drained (perf_counter)
        self.pending: list[_Bracket] = []
        # Every counted call's sums, in call order, once read whole (empty where its samples were lost).
        self.windows: list[dict[str, float]] = []
        self.outgrown: list[int] = []  # the calls (from 1) whose samples the full buffer lost
        self.totals_s: dict[str, float] = {}  # the judge's seconds by part: start, drains, evaluation, close
        self.draining: threading.Thread | None = None
        try:
            import cupti.cupti as api
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
        except Exception as exc:  # noqa: BLE001 - a cupti-python without the bindings it reads through
            collector.disable()
            self.why = f"this cupti-python cannot read the samples ({type(exc).__name__}: {str(exc)[:160]})"
            return
        self.collector = collector
        self.offset_ns = api.get_timestamp() - time.time_ns()

    def start(self) -> None:
        """Sampling from now to the close; the first sample (all counted before) taken before it returns."""
        if self.collector is None:
            return
        began = time.perf_counter()
        try:
            self.collector.start()  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - no call is compared, and the verdict says why
            self.why = f"the sampling could not be started ({type(exc).__name__}: {str(exc)[:160]})"
            return
        self.started = self.sampling = True
        time.sleep(self.lead_s)
        self.drained = time.perf_counter()
        self._add("start", self.drained - began)

    def call(self, began_ns: int, ended_ns: int) -> None:
        """A counted call, bracketed in the realtime clock: its samples are read on a thread beside what
        follows (the next `call`, `await_read` and `close` wait for it)."""
        self.await_read()
        margin = self.interval_ns
        bracket = _Bracket(len(self.windows) + len(self.pending) + 1, 0, 0)
        bracket.began_ns = began_ns + self.offset_ns - margin
        bracket.ended_ns = ended_ns + self.offset_ns + margin
        if not self.sampling:
            self.windows.append({})
            return
        self.pending.append(bracket)
        self.draining = threading.Thread(target=self._drain, name="pm-sampling-drain", daemon=True)
        self.draining.start()

    def await_read(self) -> None:
        if self.draining is not None:
            self.draining.join()
            self.draining = None

    def _drain(self) -> None:
        """Every sample taken since the last drain decoded; those that overlap a pending call evaluated
        and added to it; a call whose bracket ends before the last sample read is whole."""
        assert self.reader is not None
        began = time.perf_counter()
        room = int((began - self.drained) * 1e9 / self.interval_ns) + 64
        try:
            completed, room = self.reader.decode(room)
            self.drained = began
            if self.reader.overflow:  # samples were lost: the pending calls cannot be read whole
                self._lose(
                    f"the sampler's hardware buffer filled between two drains (it holds {self.window_s:.2f} s)",
                    outgrown=True,
                )
                return
            if completed >= room:
                self._lose(f"a drain of the sampler gave {completed} samples ({room} made room for)")
                return
            spans = self.reader.timestamps(completed)
            decoded = time.perf_counter()
            wanted = [
                index
                for index, (start, end) in enumerate(spans)
                if any(end > call.began_ns and start < call.ended_ns for call in self.pending)
            ]
            values = self.reader.values_at(wanted)
        except Exception as exc:  # noqa: BLE001 - a drain failed: the pending calls are not compared
            self._lose(f"a drain of the sampler could not be read ({type(exc).__name__}: {str(exc)[:160]})")
            return
        for index, sample in zip(wanted, values, strict=True):
            start, end = spans[index]
            for call in self.pending:
                if end > call.began_ns and start < call.ended_ns:
                    call.sums = [total + value for total, value in zip(call.sums, sample, strict=True)]
        last_end = spans[-1][1] if spans else 0
        while self.pending and self.pending[0].ended_ns <= last_end:
            whole = self.pending.pop(0)
            self.windows.append(dict(zip(COUNTERS, whole.sums, strict=True)))
        self._add("decode", decoded - began)
        self._add("evaluate", time.perf_counter() - decoded)

    def _lose(self, why: str, outgrown: bool = False) -> None:
        """The pending calls' samples lost: kept empty, in order, with the first reason; a full buffer also
        stops the sampling (CUPTI takes no more from it: ERROR_UNKNOWN on H100s, 9e6367f)."""
        if outgrown:
            self.outgrown += [call.number for call in self.pending]
            self.sampling = False
        self.why = self.why or why
        self.windows += [{} for _ in self.pending]
        self.pending = []

    def close(self) -> None:
        """The last calls read whole (after a settle, the sampling stopped and drained), then disabled."""
        self.await_read()
        if self.collector is None:
            return
        try:
            if self.started:
                began = time.perf_counter()
                time.sleep(self.settle_s)
                try:
                    self.collector.stop()  # type: ignore[attr-defined]
                except Exception as exc:  # noqa: BLE001 - the last calls are not compared, and say why
                    self._lose(f"the sampling could not be stopped ({type(exc).__name__}: {str(exc)[:160]})")
                self._add("stop", time.perf_counter() - began)
                if self.sampling and self.pending:
                    self._drain()
            if self.pending:  # their samples were never all taken
                self._lose("the sampling ended before the last calls' samples were taken")
            if self.reader is not None:
                self.reader.close()
            self.collector.disable()  # type: ignore[attr-defined]
        finally:
            self.collector = self.reader = None
            self.started = self.sampling = False

    def _add(self, part: str, seconds: float) -> None:
        self.totals_s[part] = self.totals_s.get(part, 0.0) + seconds
