"""Where does opening a timing stage's PM sampling go? The judge's `counters_open` (`CallCounters`) took
0.27-0.85 s on H100s; it runs beside the warm-up, and what the warm-up does not cover is waited (0.06-0.1 s
an evaluation on the slower H100s at 20de725). Some of it is host-only and the same at every open: the
configuration image CUPTI's host makes for the metrics. Kept by the judge, a later open would pay only
what needs the device.

One process, several opens, each timed by step and each followed by one counted headline GEMM call
(its trimmed tensor-pipe cycles must be the same every way):
  fresh  as the judge opens today: cupti-python's enable, configure (a new host and image), the reader
         (a new host evaluator), and their close;
  kept   the configuration image made at the first open only; a later open is the enable, CUPTI's
         set-config with the kept image, and a new reader (a reader kept from an earlier session fails
         its first decode with ERROR_INVALID_OPERATION: its image was sized by that session's object);
  small  as kept, with a 32 MiB hardware buffer instead of cupti-python's 512 MiB (does the set-config's
         cost follow the buffer's size?);
  sizes  the set-config and the close alone, at 16, 64, 128 and 256 MiB: the cost's line against size;
  room   how many samples a MiB of hardware buffer holds: idle windows of 40-1280 ms into 4 and 16 MiB
         buffers; the longest that decodes and the shortest that does not bound a sample's bytes. Beside
         it, the host image's bytes a sample (CUPTI's size for 2,000 samples less that for 1,000). At
         02296f0 (H100) a filled buffer failed the decode with ERROR_OUT_OF_MEMORY (cupti-python reads
         it as a filled buffer) even at 1 MiB and 50 ms, and KEEP_LATEST's decode failed with
         ERROR_UNKNOWN at every size: only KEEP_OLDEST is usable, and its buffer must hold the window. At
         fa87577 16 MiB held 160 ms (3,210 samples) and 64 MiB 640 ms: at most 5.2 KB a sample.

At 11ff5fb and 222c710 on two H100s the open was CUPTI's set-config: 291-326 ms with cupti-python's
512 MiB buffer, the same with the image kept (the host's image costs nothing measurable), 78-80 ms with
32 MiB; the close 71-79 ms against 41-46 ms; the enable 0.05 ms after the process's first.

`python benchmarks/pm_open_cost_probe.py [--opens N]` on the GPU host, cupti-python installed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch
from headline_gemm import operands

from workbench.evaluate.gpu.agreement import COUNTERS
from workbench.evaluate.gpu.call_counters import METRIC_SET, SAMPLING_INTERVAL_NS, SETTLE_INTERVALS
from workbench.evaluate.gpu.part_clock import PartClock
from workbench.evaluate.gpu.sample_reader import SampleReader

DEFAULT_BUFFER = 512 * 1024 * 1024


def set_config(collector: Any, image: Any, buffer_bytes: int, append_mode: Any = None) -> None:
    """CUPTI's set-config with a configuration image made earlier (cupti-python's `configure` less its
    host), and the collector told it is configured."""
    import cupti.cupti as api
    from cupti import pm_sampling

    params = api.PmSamplingSetConfigParams()
    params.struct_size = api.PM_SAMPLING_SET_CONFIG_PARAMS_STRUCT_SIZE
    params.p_pm_sampling_object = collector._pm_sampling_object
    params.config_size = len(image)
    params.p_config = image.ctypes.data
    params.hardware_buffer_size = buffer_bytes
    params.sampling_interval = SAMPLING_INTERVAL_NS
    params.trigger_mode = pm_sampling.TriggerMode.GPU_TIME_INTERVAL
    params.hw_buffer_append_mode = append_mode or pm_sampling.HardwareBufferAppendMode.KEEP_OLDEST
    api.pm_sampling_set_config(params.ptr)
    collector._config = image
    collector._metrics = [counter.sampled for counter in COUNTERS.values()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opens", type=int, default=5)
    args = parser.parse_args()
    from cupti import pm_sampling

    a, b, c, flush = operands()
    device = torch.cuda.current_device()
    metrics = [counter.sampled for counter in COUNTERS.values()]

    def counted(collector: Any, reader: SampleReader) -> float:
        """One headline GEMM call after its flush, counted as `CallCounters` counted it until it bracketed
        the call: the cycles of all samples but the first, which holds what came before the start (taken
        in the five intervals before the call)."""
        flush.zero_()
        torch.cuda.synchronize()
        begun = time.perf_counter()
        collector.start()
        time.sleep(5 * SAMPLING_INTERVAL_NS / 1e9)
        torch.matmul(a, b.T, out=c)
        torch.cuda.synchronize()
        time.sleep(SETTLE_INTERVALS * SAMPLING_INTERVAL_NS / 1e9)
        collector.stop()
        room = int((time.perf_counter() - begun) * 1e9 / SAMPLING_INTERVAL_NS) + 64
        completed, room = reader.decode(room)
        if completed >= room or completed < 2 or reader.overflow:
            return float("nan")
        return sum(sample[0] for sample in reader.values(list(range(1, completed))))

    for _ in range(3):  # cuBLAS's handle and the GEMM's kernel loaded before any open is timed
        torch.matmul(a, b.T, out=c)
    torch.cuda.synchronize()
    print(f"device: {torch.cuda.get_device_name()}; {args.opens} opens each way", flush=True)

    kept_image: Any = None
    for way in ("fresh", "kept", "small"):
        rows: list[dict[str, float]] = []
        cycles: list[float] = []
        for _ in range(args.opens):
            clock = PartClock()
            collector = pm_sampling.Collector(device)
            collector.enable()
            clock.mark("enable")
            if way == "fresh" or kept_image is None:
                collector.configure(
                    metrics=metrics,
                    sampling_interval=SAMPLING_INTERVAL_NS,
                    single_pass_metric_set_name=METRIC_SET,
                )
                clock.mark("configure")
                kept_image = collector._config
            else:
                set_config(collector, kept_image, DEFAULT_BUFFER if way == "kept" else 32 * 1024 * 1024)
                clock.mark("set_config")
            reader = SampleReader(collector, metrics)  # its image is sized by this session's object
            clock.mark("reader")
            cycles.append(counted(collector, reader))
            clock.mark("counted_call")
            reader.close()
            collector.disable()
            clock.mark("close")
            rows.append({step: seconds * 1e3 for step, seconds in clock.parts.items()})
        names = list(dict.fromkeys(name for row in rows for name in row))
        medians = {
            name: round(statistics.median(row[name] for row in rows if name in row), 2) for name in names
        }
        firsts = {name: round(rows[0][name], 2) for name in rows[0]}
        spread = (max(cycles) - min(cycles)) / statistics.median(cycles) if cycles else float("nan")
        print(
            f"{way}: ms by step, first open {firsts}; median of all {medians}; "
            f"trimmed tensor cycles median {statistics.median(cycles):.4g}, (max-min)/median {spread:.2%}",
            flush=True,
        )

    for mebibytes in (16, 64, 128, 256):
        clock = PartClock()
        collector = pm_sampling.Collector(device)
        collector.enable()
        clock.mark("enable")
        set_config(collector, kept_image, mebibytes * 1024 * 1024)
        clock.mark("set_config")
        collector.disable()
        clock.mark("close")
        print(
            f"sizes: {mebibytes} MiB, ms by step { {step: round(seconds * 1e3, 2) for step, seconds in clock.parts.items()} }",
            flush=True,
        )

    image_bytes = 0.0
    for mebibytes, windows_ms in ((4, (40, 80, 160, 320)), (16, (160, 320, 640, 1280))):
        for window_ms in windows_ms:
            collector = pm_sampling.Collector(device)
            collector.enable()
            set_config(collector, kept_image, mebibytes * 1024 * 1024)
            reader = SampleReader(collector, metrics)
            if not image_bytes:
                reader._make_room(2_000)
                larger = len(reader.image)
                reader._make_room(1_000)
                image_bytes = (larger - len(reader.image)) / 1_000
                print(f"room: the host image holds a sample in {image_bytes:.0f} bytes", flush=True)
            collector.start()
            time.sleep(window_ms / 1e3)
            collector.stop()
            asked = int(window_ms * 1e6 / SAMPLING_INTERVAL_NS)
            try:
                completed, room = reader.decode(asked + 64)
                said = f"{completed} samples (room {room}), filled: {reader.overflow}"
                said += f"; the buffer over them: {mebibytes * 1024 * 1024 / max(completed, 1):.0f} bytes a sample"
            except Exception as exc:  # noqa: BLE001 - a filled buffer fails the decode: that is the answer
                said = f"decode failed: {type(exc).__name__}: {str(exc)[:160]}"
            print(f"room: {mebibytes} MiB, a {window_ms} ms window ({asked} intervals): {said}", flush=True)
            reader.close()
            collector.disable()


if __name__ == "__main__":
    main()
