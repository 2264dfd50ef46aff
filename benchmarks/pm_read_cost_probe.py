"""What does reading a counted call's samples cost, and what sets it? On H100s the judge spent about
7 ms around each counted call of the headline GEMM: CUPTI's start 0.6 ms, stop 1.7 ms, decode 3.7-4.7 ms,
the samples' evaluation 0.9 ms (`pm_sampling_timing_probe.py`). Two ways to spend less were refuted on an
H100 (5d849c9, f151dbe): one read after the last call (a start after a stop without a decode fails with
ERROR_UNKNOWN) and a smaller hardware buffer (1 MiB to 512 MiB: the same 3.7-4.0 ms decode).

Three questions, on the headline GEMM's call (M=8192, N=7168, K=5120, bf16, cuBLAS through torch.matmul)
after the runner's L2 flush:
  intervals  the sampling interval (20, 50, 100, 200 us), one collector each as the judge configures it
             (`CallCounters`, lead and settle scaled): ms per call by part, samples per call, and the
             bracketed tensor-pipe cycles' median and spread (every interval must count the same call);
  steps      at 20 us, cupti-python's decode taken apart (its own steps, timed one by one): making the
             counter-data image, CUPTI's decode, the image's info, each sample's timestamps, the host
             evaluator's set-up, and each sample's evaluation;
  readers    at 20 us, each way of reading a window (the judge's `SampleReader`; cupti-python's
             decode): ms per call by part and the bracketed tensor-pipe cycles, which must be equal.
             Three more ways ran on H100s: the image initialised only when made (3e99377, refuted: it
             keeps every earlier window's samples, 240 after three calls); every sample evaluated
             through one reused request (3e99377: 0.24 ms against 1.19, the same cycles: the reader's
             way since); an image made to each window's own room (2569394, refuted: 4.9 ms against
             2.0, its making costs more than initialising twice the room).

`python benchmarks/pm_read_cost_probe.py [--calls N]` on the GPU host, cupti-python installed.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from headline_gemm import operands

from workbench.evaluate.gpu.agreement import COUNTERS
from workbench.evaluate.gpu.call_counters import CallCounters
from workbench.evaluate.gpu.part_clock import PartClock
from workbench.evaluate.gpu.sample_reader import CollectorDecode, SampleReader

INTERVALS_US = (20, 50, 100, 200)
TENSOR = next(iter(COUNTERS))


def decode_steps(collector: object, room: int) -> dict[str, float]:
    """cupti-python 13.4's `Collector.decode` and one evaluation of every sample, step by step: ms each."""
    import cupti.cupti as api
    import cupti.profiler_host as host_api

    clock = PartClock()
    image = collector._create_counter_data_image(room)  # type: ignore[attr-defined]
    clock.mark("image")
    params = api.PmSamplingDecodeDataParams()
    params.struct_size = api.PM_SAMPLING_DECODE_DATA_PARAMS_STRUCT_SIZE
    params.p_pm_sampling_object = collector._pm_sampling_object  # type: ignore[attr-defined]
    params.p_counter_data_image = image.ctypes.data
    params.counter_data_image_size = len(image)
    api.pm_sampling_decode_data(params.ptr)
    clock.mark("decode_data")
    info = api.PmSamplingGetCounterDataInfoParams()
    info.struct_size = api.PM_SAMPLING_GET_COUNTER_DATA_INFO_PARAMS_STRUCT_SIZE
    info.p_counter_data_image = image.ctypes.data
    info.counter_data_image_size = len(image)
    api.pm_sampling_get_counter_data_info(info.ptr)
    completed = info.num_completed_samples
    clock.mark("info")
    for index in range(completed):
        sample = api.PmSamplingCounterDataGetSampleInfoParams()
        sample.struct_size = api.PM_SAMPLING_COUNTER_DATA_GET_SAMPLE_INFO_PARAMS_STRUCT_SIZE
        sample.p_pm_sampling_object = collector._pm_sampling_object  # type: ignore[attr-defined]
        sample.p_counter_data_image = image.ctypes.data
        sample.counter_data_image_size = len(image)
        sample.sample_index = index
        api.pm_sampling_counter_data_get_sample_info(sample.ptr)
    clock.mark("sample_info")
    evaluator = host_api.ProfilerHost(
        collector._chip_name,  # type: ignore[attr-defined]
        host_api.ProfilerType.PM_SAMPLING,
    )
    evaluator.initialize()
    clock.mark("host_setup")
    metrics = collector._metrics  # type: ignore[attr-defined]
    for index in range(completed):
        evaluator.evaluate_metric_values(counter_data_image=image, metrics=metrics, index=index)
    clock.mark("evaluate")
    evaluator.deinitialize()
    clock.mark("host_teardown")
    steps = {step: seconds * 1e3 for step, seconds in clock.parts.items()}
    steps["samples"] = float(completed)
    return steps


READERS = {
    "reader": SampleReader,
    "collector": None,  # cupti-python's own decode
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30, help="counted calls of each way")
    args = parser.parse_args()
    torch.cuda.init()
    a, b, c, flush = operands()
    metrics = [counter.sampled for counter in COUNTERS.values()]
    print(f"device: {torch.cuda.get_device_name(0)}; {args.calls} counted calls each")
    for _ in range(5):  # cuBLAS's choice and clocks
        torch.matmul(a, b.T, out=c)

    def counted(counters: CallCounters, steps: dict[str, list[float]] | None = None) -> tuple[int, int]:
        """One counted call, started before its flush as the judge does: its realtime bracket; with
        `steps`, read by `decode_steps` into them (not by `stop`)."""
        counters.start()
        flush.zero_()
        torch.cuda.synchronize()
        time.sleep(200e-6)
        began = time.time_ns()
        torch.matmul(a, b.T, out=c)
        torch.cuda.synchronize()
        bracket = (began, time.time_ns())
        if steps is None:
            return bracket
        time.sleep(counters.settle_s)
        counters.collector.stop()  # type: ignore[attr-defined]
        for name, value in decode_steps(counters.collector, 200).items():
            steps.setdefault(name, []).append(value)
        return bracket

    def read_cost(counters: CallCounters) -> str:
        """`args.calls` counted calls read by `counters.stop()`, after three that warm the reader."""
        parts: dict[str, list[float]] = {}
        cycles: list[float] = []
        lost = 0
        for number in range(args.calls + 3):
            counts = counters.stop(*counted(counters))
            if number < 3:
                continue
            if not counts:
                lost += 1
                continue
            cycles.append(counts[TENSOR])
            for part, seconds in counters.parts_s.items():
                parts.setdefault(part, []).append(seconds * 1e3)
        middle = statistics.median(cycles) if cycles else 0.0
        spread = (max(cycles) - min(cycles)) / middle if middle else 0.0
        return (
            f"ms per call by part (median) {ms(parts)}; {TENSOR} median {middle:.4g}, "
            f"(max-min)/median {spread:.2%}; calls not read {lost}{' (' + counters.why + ')' if lost else ''}"
        )

    for us in INTERVALS_US:
        counters = CallCounters(torch.cuda.current_device(), interval_ns=us * 1000)
        if counters.collector is None:
            print(f"{us} us: no sampler: {counters.why}")
            continue
        print(f"{us} us: {read_cost(counters)}")
        if us == INTERVALS_US[0]:
            steps: dict[str, list[float]] = {}
            for _ in range(args.calls):
                counted(counters, steps)
            print(f"{us} us decode by step, ms (median): {ms(steps)}")
            for way, made in READERS.items():
                if counters.reader is not None:
                    counters.reader.close()
                try:
                    counters.reader = (
                        CollectorDecode(counters.collector)
                        if made is None
                        else made(counters.collector, metrics)
                    )
                    print(f"{us} us read by {way}: {read_cost(counters)}")
                except Exception as exc:  # noqa: BLE001 - a way that fails is a finding, said
                    counters.reader = None
                    print(f"{us} us read by {way}: failed ({type(exc).__name__}: {exc})")
        counters.close()


def ms(parts: dict[str, list[float]]) -> dict[str, float]:
    return {name: round(statistics.median(values), 3) for name, values in parts.items()}


if __name__ == "__main__":
    main()
