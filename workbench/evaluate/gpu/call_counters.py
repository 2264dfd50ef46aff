"""The hardware counters of each timed call of the candidate, read in the judge's process by CUPTI's PM
sampling (cupti-python): the GPU's performance monitors sampled at a fixed interval, with no replay, no
serialisation and nothing in the candidate's process, so a kernel cannot tell a counted call from any
other. Sampling is device-wide: it is started just before a candidate call (its inputs already written,
L2 already flushed) and stopped after the call has finished and two more intervals have passed, so the
last partial interval is read too. Two sums come back. The window's, every sample from start to stop:
the call lies wholly inside, and anything else can only add, so it never undercounts the call. The
trimmed one leaves out the first sample, which holds everything the GPU counted since the last read (on
the H200, the baseline GEMMs and the judge's reference between two timed calls: 3x the call's tensor
cycles); the call starts a few intervals after the start, once that sample is taken.

Only while the timing stage runs: Nsight Compute, which profiles the next stage, needs the monitors.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from workbench.evaluate.gpu.agreement import COUNTERS

SAMPLING_INTERVAL_NS = 20_000
# After a start, before the call: five intervals (the first sample is taken). After the call has
# finished, before the stop: two (the sample that holds its last counts is taken).
LEAD_S = 5 * SAMPLING_INTERVAL_NS / 1e9
SETTLE_S = 2 * SAMPLING_INTERVAL_NS / 1e9
METRIC_SET = "TriageCompute"  # GH100's single-pass set that holds both counters


class CallCounters:
    """One PM-sampling session on one device; `why` says why there is none."""

    def __init__(self, device_index: int) -> None:
        self.collector: object | None = None
        self.reader: SampleReader | None = None
        self.why = ""
        self.started = 0.0  # when the call's part of the window began (after the lead)
        # The last call's seconds by part (CUPTI's start, the lead, the settle, CUPTI's stop, the decode,
        # the samples' evaluation): where a counted call's cost goes.
        self.parts_s: dict[str, float] = {}
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
                sampling_interval=SAMPLING_INTERVAL_NS,
                single_pass_metric_set_name=METRIC_SET,
            )
        except Exception as exc:  # noqa: BLE001 - another chip's names: not made, said
            collector.disable()
            self.why = f"this GPU cannot sample the counters ({type(exc).__name__}: {str(exc)[:160]})"
            return
        try:
            reader = HostReader(collector, metrics)
        except Exception as exc:  # noqa: BLE001 - another cupti-python: not made, said
            collector.disable()
            self.why = f"the samples' reader could not be made ({type(exc).__name__}: {str(exc)[:160]})"
            return
        self.collector, self.reader = collector, reader

    def start(self) -> None:
        if self.collector is not None:
            began = time.perf_counter()
            self.collector.start()  # type: ignore[attr-defined]
            started = time.perf_counter()
            time.sleep(LEAD_S)  # the first sample, with what came before the start, is taken
            self.started = time.perf_counter()
            self.parts_s = {"start": started - began, "lead": self.started - started}

    def stop(self) -> tuple[dict[str, float], dict[str, float]]:
        """The counters summed over the window's samples, and over all but its first; both empty where
        sampling failed."""
        if self.collector is None:
            return {}, {}
        settling = time.perf_counter()
        time.sleep(SETTLE_S)
        stopping = time.perf_counter()
        # Room for every sample the call's time can hold: a sample left out would undercount it.
        room = int((stopping - self.started) * 1e9 / SAMPLING_INTERVAL_NS) + 64
        try:
            self.collector.stop()  # type: ignore[attr-defined]
            decoding = time.perf_counter()
            assert self.reader is not None
            image, completed = self.reader.decode(room)
        except Exception as exc:  # noqa: BLE001 - a call's samples lost: this call is not compared
            self.why = f"a call's samples could not be read ({type(exc).__name__}: {str(exc)[:160]})"
            return {}, {}
        decoded = time.perf_counter()
        self.parts_s.update(settle=stopping - settling, stop=decoding - stopping, decode=decoded - decoding)
        if completed >= room or completed < 2:
            self.why = f"a call gave {completed} samples ({room} made room for)"
            return {}, {}
        values = self.reader.evaluate(image, completed)
        self.parts_s["evaluate"] = time.perf_counter() - decoded
        return _summed(values), _summed(values[1:])

    def close(self) -> None:
        if self.collector is not None:
            try:
                if self.reader is not None:
                    self.reader.close()
                self.collector.disable()  # type: ignore[attr-defined]
            finally:
                self.collector = self.reader = None


class SampleReader(Protocol):
    """Reads one call's samples out of the collector's hardware buffer, and evaluates them."""

    def decode(self, room: int) -> tuple[object, int]:
        """The decoded image, with room for `room` samples, and how many samples in it are complete."""
        ...

    def evaluate(self, image: object, completed: int) -> list[list[float]]:
        """Each complete sample's values, in `COUNTERS`' order."""
        ...

    def close(self) -> None: ...


class HostReader:
    """cupti-python's `Collector.decode` and sample evaluation, with one host evaluator kept for the
    whole session. The library's `decode` initialises a new evaluator at every read and asks every
    sample's timestamps, which the sums do not need: 3.6 ms of the ~7 ms a counted headline GEMM call
    cost the judge (H100, 474de3c, `pm_sampling_timing_probe.py`), 50 calls an evaluation."""

    def __init__(self, collector: object, metrics: list[str]) -> None:
        from cupti import cupti, profiler_host

        self.api = cupti
        self.metrics = metrics
        # The library keeps the session's handle and chip to itself; pinned (cupti-python 13.4.0), and
        # a rename fails here, at the open, so the calls are not counted and the verdict says why.
        self.session: int = collector._pm_sampling_object  # type: ignore[attr-defined]
        self.host = profiler_host.ProfilerHost(
            collector._chip_name,  # type: ignore[attr-defined]
            profiler_host.ProfilerType.PM_SAMPLING,
        )
        self.host.initialize()

    def _image(self, room: int) -> Any:
        """A counter-data image initialised with room for `room` samples."""
        import numpy as np
        from cupti.utils import metrics_to_c_array

        api = self.api
        kept, names = metrics_to_c_array(self.metrics)  # `kept` holds the names' memory while asked
        size = api.PmSamplingGetCounterDataSizeParams()
        size.struct_size = api.PM_SAMPLING_GET_COUNTER_DATA_SIZE_PARAMS_STRUCT_SIZE
        size.p_pm_sampling_object = self.session
        size.p_metric_names = names
        size.num_metrics = len(self.metrics)
        size.max_samples = room
        api.pm_sampling_get_counter_data_size(size.ptr)
        del kept
        image = np.zeros(size.counter_data_size, dtype=np.uint8)
        init = api.PmSamplingCounterDataImageInitializeParams()
        init.struct_size = api.PM_SAMPLING_COUNTER_DATA_IMAGE_INITIALIZE_PARAMS_STRUCT_SIZE
        init.p_pm_sampling_object = self.session
        init.counter_data_size = len(image)
        init.p_counter_data = image.ctypes.data
        api.pm_sampling_counter_data_image_initialize(init.ptr)
        return image

    def decode(self, room: int) -> tuple[object, int]:
        api = self.api
        image = self._image(room)
        params = api.PmSamplingDecodeDataParams()
        params.struct_size = api.PM_SAMPLING_DECODE_DATA_PARAMS_STRUCT_SIZE
        params.p_pm_sampling_object = self.session
        params.p_counter_data_image = image.ctypes.data
        params.counter_data_image_size = len(image)
        api.pm_sampling_decode_data(params.ptr)
        info = api.PmSamplingGetCounterDataInfoParams()
        info.struct_size = api.PM_SAMPLING_GET_COUNTER_DATA_INFO_PARAMS_STRUCT_SIZE
        info.p_counter_data_image = image.ctypes.data
        info.counter_data_image_size = len(image)
        api.pm_sampling_get_counter_data_info(info.ptr)
        return image, int(info.num_completed_samples)

    def evaluate(self, image: object, completed: int) -> list[list[float]]:
        return [
            self.host.evaluate_metric_values(image, self.metrics, index).tolist()
            for index in range(completed)
        ]

    def close(self) -> None:
        self.host.deinitialize()


def _summed(samples: list[list[float]]) -> dict[str, float]:
    return {name: float(sum(sample[index] for sample in samples)) for index, name in enumerate(COUNTERS)}
