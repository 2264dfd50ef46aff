"""Every timed call's PM-sampled counters against the profiled call's (agreement.counters_against_timed), with
the H200's figures for one 4096^3 bf16 GEMM (benchmarks/results/2026-12-05_tensor_signature_probe_
b594700_h200.log): wgmma 134,217,728 tensor-pipe cycles, mma.sync 201,326,592, an FFMA GEMM 8,192 and
2,149,748,736 FMA-pipe instructions; and what the worker asks ncu and reads back for it."""

from __future__ import annotations

import io
import threading
from pathlib import Path

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
    return SampledCalls(calls, "", [], 0.25)


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
        "tensor cycles 1.0000x, fma instructions 1.0000x (medians)]"
    )
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
        verdict = counters_against_timed(launches, None, SampledCalls(timed, why, [], 0.25), FLOPS)
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
    counters.call(1_000, 2_000)
    counters.close()
    assert counters.windows == [{}] and counters.outgrown == []


class _StandInSampler:
    """cupti-python's collector and the judge's reader (no GPU here): each drain hands over the next
    batch of samples, (start, end) in ns with (tensor cycles, FMA instructions); a drain may be held
    until the test lets it go, and the buffer may fill on a given drain."""

    def __init__(self, batches: list[list[tuple[int, int, float]]], filled_on: int = 0) -> None:
        self.batches, self.filled_on = batches, filled_on
        self.drains = 0
        self.evaluated: list[int] = []  # every sample asked for its values, by its start
        self.starts = self.stops = 0
        self.disabled = False
        self.go = threading.Event()
        self.go.set()
        self.decoding = threading.Event()
        self.overflow = False
        self.batch: list[tuple[int, int, float]] = []

    def start(self) -> None:
        self.starts += 1

    def stop(self) -> None:
        self.stops += 1

    def disable(self) -> None:
        self.disabled = True

    def decode(self, room: int) -> tuple[int, int]:
        self.decoding.set()
        assert self.go.wait(30), "the test never let the drain go"
        self.drains += 1
        self.overflow = self.drains == self.filled_on
        self.batch = self.batches.pop(0) if self.batches and not self.overflow else []
        return len(self.batch), max(room, len(self.batch) + 1)

    def timestamps(self, completed: int) -> list[tuple[int, int]]:
        return [(start, end) for start, end, _ in self.batch[:completed]]

    def values_at(self, indices: list[int]) -> list[list[float]]:
        self.evaluated += [self.batch[index][0] for index in indices]
        return [[self.batch[index][2], 2 * self.batch[index][2]] for index in indices]

    def close(self) -> None:
        pass


def _samples(first_ns: int, last_ns: int, value: float = 1.0) -> list[tuple[int, int, float]]:
    """Back-to-back 50 us samples from `first_ns` to `last_ns`, each counting `value`."""
    step = SAMPLING_INTERVAL_NS
    return [(start, start + step, value) for start in range(first_ns, last_ns, step)]


def _sampler(sampler: _StandInSampler) -> CallCounters:
    counters = CallCounters(0)
    counters.collector = counters.reader = sampler  # type: ignore[assignment]
    counters.why = ""
    return counters


def test_each_call_counts_the_samples_its_widened_bracket_overlaps_and_no_other() -> None:
    # A call bracketed 1.00-1.20 ms: widened by an interval, 0.95-1.25 ms; the samples from 0.95 to 1.25
    # overlap it (six), those before and after do not, and only the six are evaluated.
    sampler = _StandInSampler([_samples(0, 2_000_000)])
    counters = _sampler(sampler)
    counters.start()
    counters.call(1_000_000, 1_200_000)
    counters.close()
    assert counters.windows == [dict(zip(COUNTERS, (6.0, 12.0), strict=True))]
    assert sampler.evaluated == list(range(950_000, 1_250_000, 50_000))
    assert sampler.starts == sampler.stops == 1 and sampler.disabled
    assert set(counters.totals_s) == {"start", "stop", "decode", "evaluate"}


def test_a_call_whose_last_sample_was_not_yet_taken_is_read_whole_at_a_later_drain() -> None:
    # The first drain (after call 1) ends at 1.1 ms, inside call 1's bracket: its sums carry over, and
    # call 2's drain, the sampler still running, completes it; the close's last drain reads call 2.
    batches = [_samples(0, 1_100_000), _samples(1_100_000, 3_000_000), _samples(3_000_000, 4_000_000)]
    sampler = _StandInSampler(batches)
    counters = _sampler(sampler)
    counters.start()
    counters.call(1_000_000, 1_200_000)
    counters.call(2_000_000, 3_400_000)
    counters.close()
    # Call 1: 0.95-1.25 ms, six samples across two drains; call 2: 1.95-3.45 ms, thirty.
    assert [window["tensor_cycles"] for window in counters.windows] == [6.0, 30.0]
    assert sampler.drains == 3 and counters.outgrown == [] and counters.why == ""


def test_a_calls_samples_are_read_beside_what_follows() -> None:
    sampler = _StandInSampler([_samples(0, 2_000_000), _samples(2_000_000, 4_000_000)])
    sampler.go.clear()
    counters = _sampler(sampler)
    counters.start()
    counters.call(1_000_000, 1_200_000)  # returns while its drain is held
    assert sampler.decoding.wait(30) and counters.windows == []
    assert counters.draining is not None and counters.draining.is_alive()
    sampler.go.set()
    counters.await_read()  # as the round's check does at its end
    assert counters.draining is None and len(counters.windows) == 1
    counters.call(3_000_000, 3_200_000)
    counters.close()  # the close waits for the last drain, stops, and drains what is left
    assert [window["tensor_cycles"] for window in counters.windows] == [6.0, 6.0]


def test_a_full_buffer_loses_the_pending_calls_by_number_and_stops_the_sampling() -> None:
    # The second drain finds the buffer filled: call 2 is lost, and no later call is sampled (CUPTI
    # takes no more from a buffer that filled: ERROR_UNKNOWN on H100s, 9e6367f).
    sampler = _StandInSampler([_samples(0, 2_000_000), _samples(2_000_000, 4_000_000)], filled_on=2)
    counters = CallCounters(0, window_s=0.5)
    counters.collector = counters.reader = sampler  # type: ignore[assignment]
    counters.why = ""
    counters.start()
    for began in (1_000_000, 3_000_000, 5_000_000):
        counters.call(began, began + 200_000)
    counters.close()
    assert counters.windows[0]["tensor_cycles"] == 6.0 and counters.windows[1:] == [{}, {}]
    assert counters.outgrown == [2] and sampler.drains == 2 and sampler.stops == 1  # stopped at the close
    assert counters.why == "the sampler's hardware buffer filled between two drains (it holds 0.50 s)"


class _FailingStart(_StandInSampler):
    def start(self) -> None:
        raise RuntimeError("CUPTI_ERROR_UNKNOWN")


class _FailingStop(_StandInSampler):
    def stop(self) -> None:
        raise RuntimeError("CUPTI_ERROR_INVALID_OPERATION")


@pytest.mark.parametrize(
    ("failing", "said"),
    [
        (_FailingStart([]), "could not be started (RuntimeError: CUPTI_ERROR_UNKNOWN)"),
        (
            _FailingStop([_samples(0, 1_100_000)]),
            "could not be stopped (RuntimeError: CUPTI_ERROR_INVALID_OPERATION)",
        ),
    ],
    ids=["start", "stop"],
)
def test_sampling_that_would_not_start_or_stop_keeps_its_calls_empty_with_the_reason(
    failing: _StandInSampler, said: str
) -> None:
    counters = _sampler(failing)
    counters.start()
    counters.call(1_000_000, 1_200_000)  # its last sample is not taken by the first drain, if any
    counters.close()
    assert counters.windows == [{}] and failing.disabled and counters.outgrown == []
    assert said in counters.why


def test_the_buffer_is_sized_from_the_stages_first_round_and_the_interval_grows_only_past_the_largest() -> (
    None
):
    # A round of a fraction of a second gets the floor's window; longer ones twenty times the first round.
    assert window_for(0.004) == WINDOW_FLOOR_S and window_for(0.005) == WINDOW_FLOOR_S
    assert window_for(0.1) == 2.0
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
    # The lead and settle are counted in the interval taken, so a grown one still has its first sample.
    longer = CallCounters(0, window_s=60.0)
    assert longer.lead_s == 5 * longer.interval_ns / 1e9 > 5 * SAMPLING_INTERVAL_NS / 1e9


def test_a_timed_call_that_outgrew_the_sampler_fails_the_proof_and_names_the_call() -> None:
    launches = [_launch("gemm", WGMMA)]
    sampled = SampledCalls([dict(WGMMA), {}, {}], "", [2], 0.25)
    verdict = counters_against_timed(launches, None, sampled, FLOPS)
    assert verdict.failed == (
        "timed call 2 of 3: the sampler's buffer filled before its samples were read (it holds 0.25 s, "
        "sized from the stage's first round), so neither it nor the calls after it were counted: a round "
        "far slower than the warm-up's is not proved to run the profiled path"
    )
    # Where ncu did not count the profiled call there is nothing to prove against: said, not failed.
    unprofiled = counters_against_timed([{"name": "gemm"}], None, sampled, FLOPS)
    assert unprofiled.failed is None and "not compared" in unprofiled.note
