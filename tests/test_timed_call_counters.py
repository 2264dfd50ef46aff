"""Every timed call's PM-sampled counters against the profiled call's (agreement.counters_against_timed), with
the H200's figures for one 4096^3 bf16 GEMM (benchmarks/results/2026-12-05_tensor_signature_probe_
b594700_h200.log): wgmma 134,217,728 tensor-pipe cycles, mma.sync 201,326,592, an FFMA GEMM 8,192 and
2,149,748,736 FMA-pipe instructions; and what the worker asks ncu and reads back for it."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from ncu_support import stand_in_ncu

from workbench.evaluate.gpu.agreement import (
    COUNTER_NOTE,
    COUNTERS,
    SampledCalls,
    counter_disagreements,
    counters_against_timed,
)
from workbench.evaluate.gpu.call_counters import (
    BUFFER_BYTES_PER_SAMPLE,
    MAX_BUFFER_BYTES,
    MIN_BUFFER_BYTES,
    SAMPLING_INTERVAL_NS,
    WINDOW_FLOOR_S,
    CallCounters,
    sampling_for,
    window_for,
)
from workbench.evaluate.gpu.profile import counter_metrics, ncu_command, parse_raw_csv
from workbench.evaluate.gpu.sample_reader import CollectorDecode
from workbench.evaluate.gpu.worker import Worker

FLOPS = 2.0 * 4096**3
WGMMA = {"tensor_cycles": 134_217_728.0, "fma_instructions": 13_074_432.0}  # Triton's wgmma GEMM
MMA_SYNC = {"tensor_cycles": 201_326_592.0, "fma_instructions": 12_959_744.0}  # Triton's mma.sync GEMM
TENSOR, FMA = (counter.profiled for counter in COUNTERS.values())
DATA = Path(__file__).parent / "data" / "ncu"


def _fewer(profiled: dict[str, float], timed: list[dict[str, float]]) -> tuple[str, dict] | None:
    return next(iter(counter_disagreements(profiled, timed, FLOPS, fewer=True)), None)


def _more(profiled: dict[str, float], timed: list[dict[str, float]]) -> tuple[str, dict] | None:
    return next(iter(counter_disagreements(profiled, timed, FLOPS, fewer=False)), None)


def test_timed_calls_on_the_proven_path_agree_both_ways() -> None:
    assert _fewer(WGMMA, [dict(WGMMA)] * 50) is None and _more(WGMMA, [dict(WGMMA)] * 50) is None
    # The marker kernel beside each sampled call and a few percent of data-dependent FMAs are allowed.
    jitter = {
        "tensor_cycles": WGMMA["tensor_cycles"] + 900,
        "fma_instructions": 0.96 * WGMMA["fma_instructions"],
    }
    assert _fewer(WGMMA, [jitter]) is None and _more(WGMMA, [jitter]) is None


def test_a_timed_path_that_left_the_proven_tensor_work_to_ffma_did_fewer_tensor_cycles() -> None:
    simt = {"tensor_cycles": 8_192.0, "fma_instructions": 2_149_748_736.0}
    message, figures = _fewer(WGMMA, [dict(WGMMA)] * 10 + [simt]) or ("", {})
    assert figures == {
        "counter": "tensor_cycles",
        "profiled": WGMMA["tensor_cycles"],
        "timed": 8_192.0,
        "timed_call": 11,
    }
    assert "timed call 11 counted 8,192 tensor cycles, fewer than the profiled call's 134,217,728" in message
    assert _fewer(simt, [dict(simt)]) is None  # a memory-bound task's own FFMA path


def test_a_timed_path_that_skips_a_tenth_of_the_k_blocks_is_short() -> None:
    skipping = {name: 0.9 * value for name, value in WGMMA.items()}
    assert _fewer(WGMMA, [skipping]) is not None


def test_more_than_the_profiled_call_is_told_apart_from_fewer() -> None:
    # A timed path on mma.sync (1.5x the tensor cycles), or one evening the cycles with a third of the
    # work on FFMA: more, never fewer (anything else the GPU ran in the window could only add too).
    mixed = {"tensor_cycles": WGMMA["tensor_cycles"], "fma_instructions": FLOPS / 3 / 64}
    for path in (MMA_SYNC, mixed):
        assert _fewer(WGMMA, [dict(path)]) is None
        message, _ = _more(WGMMA, [dict(path)]) or ("", {})
        assert "more than the profiled call's" in message and COUNTER_NOTE in message


def test_a_counter_one_side_lacks_is_not_compared() -> None:
    assert _fewer({"fma_instructions": 1e8}, [{"fma_instructions": 1e6}]) is not None
    assert _fewer({}, [dict(MMA_SYNC)]) is None
    assert _fewer(WGMMA, [{"fma_instructions": WGMMA["fma_instructions"]}]) is None


def _launch(name: str, counters: dict[str, float]) -> dict:
    return {"name": name, "counters": dict(counters)}


def _sampled(calls: list[dict[str, float]]) -> SampledCalls:
    return SampledCalls(calls, "", [], 0.25, [0.01] * len(calls))


def test_the_dynamic_tier_sums_the_candidates_own_kernels_and_fails_a_short_timed_call() -> None:
    # Two launches of the candidate's own kernel make the profiled count; a library kernel beside them
    # is not the candidate's proof and is left out.
    half = {name: value / 2 for name, value in WGMMA.items()}
    launches = [_launch("gemm", half), _launch("gemm", half), _launch("cublas", MMA_SYNC)]
    own = {"gemm"}
    agreed = counters_against_timed(launches, own, _sampled([dict(WGMMA)] * 3), FLOPS)
    assert agreed.failed is None
    assert agreed.note == (
        "[3 of 3 timed calls' counters match the profiled call's: "
        "tensor cycles 1.0000x, fma instructions 1.0000x (lowest-highest)]"
    )
    # Calls apart are shown by their lowest and highest, the margin an honest kernel keeps to the bound.
    apart = [dict(WGMMA), {**WGMMA, "fma_instructions": WGMMA["fma_instructions"] * 1.01}]
    spread = counters_against_timed(launches, own, _sampled(apart), FLOPS)
    assert spread.failed is None
    assert spread.note.endswith("tensor cycles 1.0000x, fma instructions 1.0000-1.0100x (lowest-highest)]")
    simt = {"tensor_cycles": 8_192.0, "fma_instructions": 2_149_748_736.0}
    short = counters_against_timed(launches, own, _sampled([dict(WGMMA), simt]), FLOPS)
    assert short.failed is not None and short.note == ""
    assert short.failed.startswith("timed call 2 counted 8,192 tensor cycles, fewer than")
    assert short.failed.endswith("the timed calls did less of the work the profiled call proved")
    # Every kernel counts where the candidate's own are unknown: cuBLAS's cycles join the proof.
    assert counters_against_timed(launches, None, _sampled([dict(WGMMA)]), FLOPS).failed


def test_more_in_half_the_timed_calls_fails_and_in_fewer_is_noted() -> None:
    # The speedup is the median call's: a path the profiled call did not take moves it only where it
    # ran in half the calls or more; in fewer, it is noted (a neighbour's work on the GPU adds too).
    launches = [_launch("gemm", WGMMA)]
    for proven, other, fails in ((5, 5, True), (5, 6, True), (6, 5, False), (6, 4, False), (49, 1, False)):
        calls = [dict(MMA_SYNC)] * other + [dict(WGMMA)] * proven
        verdict = counters_against_timed(launches, None, _sampled(calls), FLOPS)
        assert (verdict.failed is not None) is fails, (proven, other)
        if not fails:
            assert verdict.note.startswith(
                f"[noted, in fewer than half the timed calls ({other} of {proven + other}): timed call 1"
            )


def test_calls_over_on_either_counter_add_up() -> None:
    # Three calls on mma.sync and three with a third of the work on FFMA: six of ten off the proven path,
    # though each counter alone is over in fewer than half.
    mixed = {"tensor_cycles": WGMMA["tensor_cycles"], "fma_instructions": FLOPS / 3 / 64}
    calls = [dict(MMA_SYNC)] * 3 + [dict(mixed)] * 3 + [dict(WGMMA)] * 4
    verdict = counters_against_timed([_launch("gemm", WGMMA)], None, _sampled(calls), FLOPS)
    assert verdict.failed is not None and "6 of 10 timed calls counted more" in verdict.failed


def test_a_side_without_counters_is_said_with_the_samplers_reason() -> None:
    counted, uncounted = [_launch("gemm", WGMMA)], [{"name": "gemm"}]
    cases = [
        (uncounted, [dict(WGMMA)], "", "this ncu did not count them"),
        (counted, [{}, {}], "", "no timed call was sampled"),
        (counted, [], "PM sampling is not available on this GPU", "PM sampling is not available on this GPU"),
    ]
    for launches, timed, why, said in cases:
        verdict = counters_against_timed(
            launches, None, SampledCalls(timed, why, [], 0.25, [0.01] * len(timed)), FLOPS
        )
        assert verdict == (None, f"[the timed calls' counters were not compared: {said}]")


def test_the_worker_asks_ncu_for_the_counters_only_where_it_lists_them(tmp_path: Path) -> None:
    listing = "Device GH100\nsm__pipe_tensor_cycles_active    # of cycles the tensor pipe was active\n"
    ncu = stand_in_ncu(tmp_path, listing)
    worker = Worker(io.StringIO())
    worker.ncu = str(ncu)
    assert worker.extra_metrics("hopper", "GMMA") == (TENSOR,)
    assert counter_metrics(frozenset({"sm__pipe_tensor_cycles_active", "sm__inst_executed_pipe_fma"})) == (
        TENSOR,
        FMA,
    )
    command = ncu_command("ncu", "log", "hopper", ["app"], required="GMMA", extra_metrics=(TENSOR, FMA))
    assert {TENSOR, FMA} <= set(command[command.index("--metrics") + 1].split(","))


def test_the_profiled_calls_counters_are_read_from_the_raw_page() -> None:
    header, units, row = (DATA / "wgmma_gemm_m256_raw_details.csv").read_text().splitlines()[:3]
    page = "\n".join(
        [f'{header},"{TENSOR}","{FMA}"', f'{units},"cycle","inst"', f'{row},"134,217,728","13,074,432"']
    )
    (launch,) = parse_raw_csv(page)
    assert launch["counters"] == {"tensor_cycles": 134_217_728.0, "fma_instructions": 13_074_432.0}
    (recorded,) = parse_raw_csv((DATA / "wgmma_gemm_m256_raw_details.csv").read_text())
    assert recorded["counters"] == {}


def test_without_pm_sampling_the_calls_are_not_counted_and_the_reason_is_kept() -> None:
    # This machine has no GPU (nor cupti-python): the judge's sampler says why and counts nothing.
    counters = CallCounters(0)
    assert counters.collector is None and "PM sampling is not available" in counters.why
    counters.start()
    assert counters.stop(1_000, 2_000) == {}
    counters.close()


class _Samples(list):
    """cupti-python's decoded samples, as `CallCounters.stop` reads them."""

    @property
    def num_completed_samples(self) -> int:
        return len(self)


# The stand-in's three samples, back to back from CUPTI's clock's 0, and a bracket that, widened by an
# interval each side (60-170 us), overlaps the second and third only: the first holds the prepare's work.
SPANS = [(0, 50_000), (50_000, 100_000), (100_000, 150_000)]
BRACKET = (110_000, 120_000)


class _StandInCollector:
    """cupti-python's PM-sampling collector (no GPU here): a slow start, stop and decode, three samples."""

    def __init__(self) -> None:
        self.rooms: list[int] = []

    def start(self) -> None:
        time.sleep(0.03)

    def stop(self) -> None:
        time.sleep(0.02)

    def decode(self, max_samples: int) -> _Samples:
        time.sleep(0.01)
        self.rooms.append(max_samples)
        return _Samples(
            SimpleNamespace(metric_values=[float(i), 2.0 * i], start_timestamp=start, end_timestamp=end)
            for i, (start, end) in zip((5, 1, 2), SPANS, strict=True)
        )


def test_each_counted_call_says_where_the_judges_time_around_it_went() -> None:
    counters = CallCounters(0)
    collector = _StandInCollector()
    counters.collector, counters.reader = collector, CollectorDecode(collector)
    counters.start()
    counts = counters.stop(*BRACKET)
    # Room for every interval from the start asked to the stop done (0.05 s of the stand-in's own):
    # the monitors sample through CUPTI's start and stop too.
    assert collector.rooms[0] >= 0.05e9 / SAMPLING_INTERVAL_NS + 64
    assert counts == dict(zip(COUNTERS, (3.0, 6.0), strict=True))  # the samples the bracket overlaps
    parts = counters.parts_s
    assert list(parts) == ["start", "settle", "stop", "decode", "evaluate"]
    assert parts["settle"] >= counters.settle_s
    # Each part holds at least its own wait (lower bounds only: a busy machine may only add).
    assert parts["start"] >= 0.03 and parts["stop"] >= 0.02 and parts["decode"] >= 0.01


def test_a_calls_counts_are_the_samples_its_bracket_overlaps_and_none_is_said() -> None:
    counters = CallCounters(0)
    collector = _StandInCollector()
    counters.collector, counters.reader = collector, CollectorDecode(collector)
    # The bracket widened by an interval (0-210 us) overlaps all three: the bracket's sum is the window's.
    counters.start()
    assert counters.stop(50_000, 160_000) == dict(zip(COUNTERS, (8.0, 16.0), strict=True))
    # A bracket where no sample lies: the sampler's clock is not the worker's, so nothing is compared.
    counters.start()
    assert counters.stop(10_000_000, 10_100_000) == {}
    assert counters.why == "no sample overlapped a call's bracket (the sampler's clock is not the worker's)"


def test_a_step_of_the_hosts_clock_during_a_call_leaves_its_bracket_on_its_samples() -> None:
    counters = CallCounters(0)
    collector = _StandInCollector()
    counters.collector, counters.reader = collector, CollectorDecode(collector)
    step = [0]  # CUPTI's clock less the realtime clock: the realtime clock steps back 10 ms mid-call
    counters.clock_offset = lambda: step[0]
    counters.start()
    step[0] = 10_000_000
    # Read in the stepped clock, the bracket's end lies before its start; each end mapped by the offset
    # read nearest it, the bracket is the call's again (the second and third samples).
    assert counters.stop(BRACKET[0], BRACKET[1] - step[0]) == dict(zip(COUNTERS, (3.0, 6.0), strict=True))


class _HeldDecode(_StandInCollector):
    """A collector whose decode waits until the test lets it go: the read's place is seen, not timed."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()
        self.decoding = threading.Event()
        self.disabled = False

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def disable(self) -> None:
        self.disabled = True

    def decode(self, max_samples: int) -> _Samples:
        self.decoding.set()
        assert self.go.wait(30), "the test never let the decode go"
        return super().decode(max_samples)


def test_a_stopped_calls_samples_are_read_beside_what_follows_and_kept_in_call_order() -> None:
    counters = CallCounters(0)
    collector = _HeldDecode()
    counters.collector, counters.reader = collector, CollectorDecode(collector)
    counters.start()
    counters.stop_beside(*BRACKET)  # returns while its decode is still held
    assert collector.decoding.wait(30) and counters.windows == []
    assert counters.reading is not None and counters.reading.is_alive()
    collector.go.set()
    counters.start()  # the next call's start waits for the read: the collector is one
    assert counters.reading is None and len(counters.windows) == 1
    counters.stop_beside(*BRACKET)
    counters.close()  # so does the close, which keeps both calls' sums
    assert counters.windows == [dict(zip(COUNTERS, (3.0, 6.0), strict=True))] * 2
    assert len(collector.rooms) == 2 and collector.disabled
    assert set(counters.totals_s) == {"start", "settle", "stop", "decode", "evaluate"}


class _FailingStop(_HeldDecode):
    def stop(self) -> None:
        raise RuntimeError("CUPTI_ERROR_INVALID_OPERATION")


class _FailingStart(_HeldDecode):
    def start(self) -> None:
        raise RuntimeError("CUPTI_ERROR_UNKNOWN")


@pytest.mark.parametrize(
    ("collector", "said"),
    [
        (_FailingStart, "could not be started (RuntimeError: CUPTI_ERROR_UNKNOWN)"),
        (_FailingStop, "could not be stopped (RuntimeError: CUPTI_ERROR_INVALID_OPERATION)"),
    ],
)
def test_a_call_whose_sampling_would_not_start_or_stop_is_kept_empty_with_the_reason(
    collector: type[_HeldDecode], said: str
) -> None:
    counters = CallCounters(0)
    failing = collector()
    counters.collector, counters.reader = failing, CollectorDecode(failing)
    counters.start()
    counters.stop_beside(*BRACKET)
    counters.close()
    assert counters.windows == [{}] and failing.rooms == [] and failing.disabled
    assert said in counters.why


class _FillsOnCall(_HeldDecode):
    """A collector whose hardware buffer fills on the given calls (from 1): cupti-python's decode then
    fails with MemoryError (CUPTI's ERROR_OUT_OF_MEMORY), as every window larger than its buffer did on
    an H100 (94a280e)."""

    def __init__(self, filled: set[int]) -> None:
        super().__init__()
        self.filled = filled
        self.go.set()
        self.starts = 0

    def start(self) -> None:
        self.starts += 1

    def decode(self, max_samples: int) -> _Samples:
        if len(self.rooms) + 1 in self.filled:
            self.rooms.append(max_samples)
            raise MemoryError("Record overflow in the hardware buffer.")
        return _StandInCollector.decode(self, max_samples)


def test_a_window_that_outgrew_the_hardware_buffer_is_kept_by_its_call_number_and_says_why() -> None:
    counters = CallCounters(0, window_s=0.5)
    collector = _FillsOnCall({2})
    counters.collector, counters.reader = collector, CollectorDecode(collector)
    for _ in range(4):
        counters.start()
        counters.stop_beside(*BRACKET)
    counters.close()
    assert counters.outgrown == [2]
    assert counters.windows[0] == dict(zip(COUNTERS, (3.0, 6.0), strict=True))
    # CUPTI starts no window after one outgrew its buffer (H100, 9e6367f): the later calls are not
    # started and are kept empty; the call that outgrew already fails the proof.
    assert counters.windows[1:] == [{}] * 3
    assert collector.starts == 2 and collector.disabled
    assert counters.why == (
        "a call's window outgrew the sampler's hardware buffer, sized for 0.50 s (0 samples read)"
    )


def test_the_buffer_is_sized_from_the_stages_first_call_and_the_interval_grows_only_past_the_largest() -> (
    None
):
    # A call of a fraction of a second gets the floor's window; longer ones twenty times their first call.
    assert window_for(0.004) == WINDOW_FLOOR_S and window_for(20.0) == WINDOW_FLOOR_S
    assert window_for(100.0) == 2.0
    interval, buffer = sampling_for(WINDOW_FLOOR_S)
    samples = WINDOW_FLOOR_S * 1e9 / SAMPLING_INTERVAL_NS
    assert interval == SAMPLING_INTERVAL_NS and buffer >= samples * BUFFER_BYTES_PER_SAMPLE
    assert buffer < MAX_BUFFER_BYTES / 4  # the point: CUPTI's set-up follows the buffer's size
    assert sampling_for(0.001)[1] == MIN_BUFFER_BYTES
    # Past what the largest buffer holds at the interval, the interval grows and the window still fits.
    for window_s in (10.0, 60.0):
        interval, buffer = sampling_for(window_s)
        assert buffer == MAX_BUFFER_BYTES and interval > SAMPLING_INTERVAL_NS
        assert (window_s * 1e9 / interval) * BUFFER_BYTES_PER_SAMPLE <= MAX_BUFFER_BYTES
    # A probe's finer interval is kept where the buffer holds the window at it.
    assert sampling_for(WINDOW_FLOOR_S, 20_000)[0] == 20_000
    # The settle is counted in the interval taken, so a grown one still takes the call's last sample.
    longer = CallCounters(0, window_s=60.0)
    assert longer.settle_s == 2 * longer.interval_ns / 1e9 > 2 * SAMPLING_INTERVAL_NS / 1e9


def test_a_timed_call_that_outgrew_the_sampler_fails_the_proof_and_names_the_call() -> None:
    launches = [_launch("gemm", WGMMA)]
    # Call 2 outgrew the buffer, so call 3 was not started (CUPTI starts none after a full buffer).
    # Its prepare and call took more than half the window: the call itself outgrew it.
    sampled = SampledCalls([dict(WGMMA), {}, {}], "", [2], 0.25, [0.01, 0.2, 0.01])
    verdict = counters_against_timed(launches, None, sampled, FLOPS)
    assert verdict.failed == (
        "timed call 2 of 3 ran longer than the sampler's buffer holds (0.25 s, sized from the candidate's "
        "first call in the stage), so neither it nor the calls after it were counted: a timed call far "
        "slower than the warm-up's is not proved to run the profiled path"
    )
    # A short call whose window outgrew still fails where fewer than half the calls were counted before it.
    early = SampledCalls([dict(WGMMA), {}, {}], "", [2], 0.25, [0.01] * 3)
    assert counters_against_timed(launches, None, early, FLOPS).failed == verdict.failed
    # Where ncu did not count the profiled call there is nothing to prove against: said, not failed.
    unprofiled = counters_against_timed([{"name": "gemm"}], None, sampled, FLOPS)
    assert unprofiled.failed is None and "not compared" in unprofiled.note


def test_a_window_outgrown_by_a_host_stall_outside_a_short_call_leaves_the_calls_before_it_to_prove() -> None:
    launches = [_launch("gemm", WGMMA)]
    # Call 3 of 4 took 10 ms of a 0.25 s window that outgrew its buffer: the worker or the judge stalled,
    # not the candidate; CUPTI started no window after it, so calls 1 and 2 are the proof.
    sampled = SampledCalls([dict(WGMMA), dict(WGMMA), {}, {}], "", [3], 0.25, [0.01] * 4)
    verdict = counters_against_timed(launches, None, sampled, FLOPS)
    assert verdict.failed is None
    assert verdict.note == (
        "[2 of 4 timed calls counted: timed call 3's window outgrew the sampler's buffer (0.25 s) while its "
        "prepare and call took 0.010 s: the host stalled outside the call, and neither it nor the calls after "
        "it were counted]"
    )
    # The calls that were counted are still held to the profiled call's counts.
    short = {name: value * 0.9 for name, value in WGMMA.items()}
    stalled_short = SampledCalls([dict(WGMMA), short, {}, {}], "", [3], 0.25, [0.01] * 4)
    failed = counters_against_timed(launches, None, stalled_short, FLOPS).failed
    assert failed is not None and "timed call 2 counted" in failed and "fewer" in failed
    # And so is more in half of them or more: a path the profiled call did not take still fails.
    more = {name: value * 1.5 for name, value in WGMMA.items()}
    stalled_more = SampledCalls([more, dict(WGMMA), {}, {}], "", [3], 0.25, [0.01] * 4)
    failed = counters_against_timed(launches, None, stalled_more, FLOPS).failed
    assert failed is not None and "1 of 2 timed calls counted more" in failed
