"""The file protocol between the worker and the ncu run it starts ahead of a candidate, on this machine
(compute-sanitizer's run is the same `ToolProcess`).

Nsight Compute cannot profile here (no GPU), so `stand_in_ncu.py` plays its part: it takes ncu's
command line, does what the profiled child does with the files in its work folder, and writes the raw
page recorded on the H200 into the log file ncu was given (with source counters: exports a report, then
prints the pages `ncu -i` is asked for). Everything else is the real code.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from ncu_support import FILL
from source_page_support import block, listing_kernels

from workbench.evaluate.gpu.candidate_entry import await_candidate, load_after_go, wait_for
from workbench.evaluate.gpu.profile import WARM_RAN, parse_raw_csv
from workbench.evaluate.gpu.tool_process import ProfiledProcess, await_warm
from workbench.evaluate.gpu.worker import Worker

DATA = Path(__file__).parent / "data" / "ncu"
TUI_DATA = Path(__file__).parent / "data" / "tui"
PROBE = "_Z14families_probePfmm"
STAND_IN = r"""
import os, sys, time
from pathlib import Path
args = sys.argv[1:]
here = Path(sys.argv[0]).parent
with open(here / "commands", "a") as commands:  # each command line, for the tests that read them
    commands.write(" ".join(args) + "\n")
if "-i" in args:  # printing a page of the exported report
    page = args[args.index("--page") + 1]
    with open(here / "imports", "a") as imports:
        imports.write(" ".join(args) + "\n")
    print((here / f"{page}.page").read_text(), end="")
    sys.exit(0)
log = Path(args[args.index("--log-file") + 1])
workdir = Path(args[args.index("once") + 1])
while os.environ.get("PTXWB_HOLD") and not (workdir / "start").exists():  # as the held child waits
    time.sleep(0.01)
(workdir / "ready").touch()
# The child's own wait for its candidate, its first range a sleep as long as the test says (or "never").
from workbench.evaluate.gpu.candidate_entry import await_candidate
warm_s = (here / "warm_s").read_text() if (here / "warm_s").exists() else "0.2"
if not await_candidate(workdir, int(args[args.index("once") + 2]),
                       lambda: time.sleep(600 if warm_s == "never" else float(warm_s))):
    sys.exit(3)
while not (workdir / "go").exists():
    time.sleep(0.01)
behaviour = (Path(sys.argv[0]).parent / "behaviour").read_text()
if behaviour == "hang":
    time.sleep(600)
if behaviour == "crash":
    print("RuntimeError: CUDA error: an illegal memory access was encountered", flush=True)
    sys.exit(1)
if "-o" in args:  # the report is exported; the log keeps ncu's messages
    Path(args[args.index("-o") + 1]).write_text("a report")
    log.write_text("==PROF== Connected to process 1\n==PROF== Report: " + args[args.index("-o") + 1] + "\n")
else:
    log.write_text("==PROF== Connected to process 1\n" + Path(behaviour).read_text())
"""


def stand_in(tmp_path: Path, behaviour: str) -> str:
    script = tmp_path / "stand_in_ncu.py"
    script.write_text(STAND_IN)
    (tmp_path / "behaviour").write_text(behaviour)
    wrapper = tmp_path / "ncu"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def ncu_worker(tmp_path: Path) -> Worker:
    """A worker whose ncu is the stand-in (whose call hangs) and which keeps no spare runners or memcheck
    runs: the tests that use it are about its ncu runs only."""
    worker = Worker(io.StringIO())
    worker.ncu, worker.profiling_refused, worker.sanitizer_tool = stand_in(tmp_path, "hang"), None, None
    worker.runners.gpu_depth = 0
    return worker


def test_the_candidate_and_the_go_signal_reach_the_waiting_run_and_its_page_comes_back(
    tmp_path: Path,
) -> None:
    ncu = stand_in(tmp_path, str(DATA / "wgmma_gemm_m256_raw_details.csv"))
    run = ProfiledProcess(ncu, "hopper", ["python", "-m", "workbench.evaluate.gpu.candidate_entry"])
    workdir = run.workdir
    try:
        deadline = time.monotonic() + 20
        while not (workdir / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert run.alive()  # waiting for a candidate
        run.submit("/tmp/kernel.so", {"axes": {"M": 256}})
        assert not (workdir / "request.json.partial").exists()
        run.go()
        assert run.wait(20) and run.returncode == 0
        (launch,) = parse_raw_csv(run.report())
        assert launch["tensor_flops"] == 2 * 256 * 7168 * 5120
    finally:
        run.close()
    assert not workdir.exists()


def _report_led_by_the_fill(folder: Path) -> Path:
    """The recorded raw page with the warm range's fill as launch 0 and the candidate's GEMM as launch 1."""
    text = (DATA / "wgmma_gemm_m256_raw_details.csv").read_text()
    start = text.find('"ID"')
    rows = list(csv.reader(io.StringIO(text[start:])))
    header, units, gemm = rows
    at = {name: index for index, name in enumerate(header)}
    fill = [""] * len(header)
    fill[at["ID"]], fill[at["Kernel Name"]] = "0", FILL
    gemm = [*gemm]
    gemm[at["ID"]] = "1"
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([header, units, fill, gemm])
    page = folder / "warmed_raw.csv"
    page.write_text(text[:start] + out.getvalue())
    return page


def test_a_warmed_runs_fill_leaves_the_profiled_call_and_the_candidates_launch_stays(tmp_path: Path) -> None:
    ncu = stand_in(tmp_path, str(_report_led_by_the_fill(tmp_path)))
    for warm in (True, False):
        run = ProfiledProcess(ncu, "hopper", ["python", "-m", "workbench.evaluate.gpu.candidate_entry"])
        try:
            if warm:
                run.warm()
                assert await_warm([run], 20) and run.warm_ran()
            run.submit("/tmp/kernel.so", {"axes": {"M": 256}})
            run.go()
            assert run.wait(20) and run.returncode == 0
            names = [launch["name"] for launch in run.call_launches(run.report())]
        finally:
            run.close()
        gemm = "wgmma_gemm_kernel(CUtensorMap_st, CUtensorMap_st, __nv_bfloat16 *, int, int, int)"
        # Unwarmed, a leading fill is not the worker's: it stays (and the tier leaves it out as foreign).
        assert names == ([gemm] if warm else [FILL, gemm])


def test_the_go_is_given_once_and_keeps_how_far_the_child_had_come_when_it_was(tmp_path: Path) -> None:
    ncu = stand_in(tmp_path, str(DATA / "wgmma_gemm_m256_raw_details.csv"))
    run = ProfiledProcess(ncu, "hopper", ["python", "-m", "workbench.evaluate.gpu.candidate_entry"])
    try:
        run.warm()
        assert await_warm([run], 20)
        run.submit("/tmp/kernel.so", {"axes": {"M": 256}})
        before = time.perf_counter()
        went = run.go_once()
        assert before <= went.at <= time.perf_counter() and went.warmed
        assert run.wait(20) and run.returncode == 0
        (run.workdir / "go").write_text("stale")  # a second go would write the file afresh
        assert run.go_once({"config": 1}) is went
        assert (run.workdir / "go").read_text() == "stale"
    finally:
        run.close()


def test_with_source_counters_both_pages_are_printed_from_the_report_in_the_tools_own_folder(
    tmp_path: Path,
) -> None:
    raw = DATA / "wgmma_gemm_m256_raw_details.csv"
    (tmp_path / "raw.page").write_text(raw.read_text())
    listing = listing_kernels((TUI_DATA / "families_probe.sm_90a.sass").read_text())
    page = block(PROBE, listing[PROBE]) + block(
        "nvjet_sm90_tst_256x128_64x4_2x1_v_bz_coopA_TNT", listing[PROBE]
    )
    (tmp_path / "source.page").write_text(page)
    run = ProfiledProcess(stand_in(tmp_path, str(raw)), "hopper", ["python"], source_counters=True)
    try:
        run.submit("/tmp/kernel.so", {"axes": {"M": 256}})
        run.go()
        assert run.wait(20) and run.returncode == 0
        (launch,) = parse_raw_csv(run.report())
        assert launch["tensor_flops"] == 2 * 256 * 7168 * 5120
        counts, problem = run.source_counts({PROBE})
        assert problem is None and list(counts) == [PROBE]  # the foreign kernel is left out
        assert len(counts[PROBE]) == len(listing[PROBE]) and counts[PROBE][0]["executed"] == 1_000_000
        imports = (tmp_path / "imports").read_text().splitlines()
        assert len(imports) == 2 and all(f"-i {run.logdir}/" in line for line in imports)
        assert not any(str(run.workdir) in line or str(run.scratch) in line for line in imports)
    finally:
        run.close()


def test_without_source_counters_there_are_no_counts_and_nothing_is_imported(tmp_path: Path) -> None:
    run = ProfiledProcess(
        stand_in(tmp_path, str(DATA / "wgmma_gemm_m256_raw_details.csv")), "hopper", ["python"]
    )
    try:
        run.submit("/tmp/kernel.so", {})
        run.go()
        assert run.wait(20)
        assert len(parse_raw_csv(run.report())) == 1
        assert run.source_counts({PROBE})[0] == {}
        assert not (tmp_path / "imports").exists()
    finally:
        run.close()


def test_a_crashed_run_keeps_its_evidence_and_a_hung_one_is_killed(tmp_path: Path) -> None:
    crashed = ProfiledProcess(stand_in(tmp_path, "crash"), "hopper", ["python"])
    try:
        crashed.submit("/tmp/kernel.so", {})
        crashed.go()
        assert crashed.wait(20) and crashed.returncode == 1
        assert parse_raw_csv(crashed.report()) == []
        assert "illegal memory access" in crashed.app_output()
    finally:
        crashed.close()
    hung = ProfiledProcess(stand_in(tmp_path, "hang"), "hopper", ["python"])
    try:
        hung.submit("/tmp/kernel.so", {})
        hung.go()
        started = time.monotonic()
        assert not hung.wait(1.0)
        assert not hung.alive() and time.monotonic() - started < 15
    finally:
        hung.close()


def test_a_waiting_profiled_child_gives_up_once_its_worker_is_gone(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    started = time.monotonic()
    assert wait_for(tmp_path / "never", gone.pid) is False
    assert time.monotonic() - started < 5
    (tmp_path / "here").touch()
    assert wait_for(tmp_path / "here", os.getpid()) is True


def test_a_spare_ncu_run_with_other_sections_than_asked_is_replaced(tmp_path: Path) -> None:
    worker = ncu_worker(tmp_path)
    try:
        first = worker.take_profiler("hopper")
        assert not first.source_counters
        first.close()
        worker.warm_spare("cuda")  # for the next two candidates: as the last one asked
        spares = list(worker.spare_profilers.line)
        assert len(spares) == 2 and not any(spare.source_counters for spare in spares)
        counted = worker.take_profiler("hopper", source_counters=True)
        assert counted not in spares and counted.source_counters
        assert not any(spare.alive() for spare in spares) and worker.spare_profilers.line == []
        counted.close()
        worker.warm_spare("cuda")
        again, later = worker.spare_profilers.line
        assert again.source_counters and later.source_counters
        assert worker.take_profiler("hopper", source_counters=True) is again  # the oldest fits: kept
        assert worker.spare_profilers.line == [later]
        again.close()
    finally:
        worker.close()


def metrics_of(tmp_path: Path, run: ProfiledProcess) -> set[str]:
    """The metrics the stand-in was asked for by `run` (found by its log file), once it has started."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        commands = tmp_path / "commands"
        lines = commands.read_text().splitlines() if commands.exists() else []
        mine = [line.split() for line in lines if str(run.log) in line]
        if mine:
            return set(mine[0][mine[0].index("--metrics") + 1].split(","))
        time.sleep(0.01)
    raise AssertionError(f"no ncu command for {run.log}")


def test_the_ncu_run_counts_the_pipe_of_the_tasks_family_and_a_spare_for_another_is_replaced(
    tmp_path: Path,
) -> None:
    worker = ncu_worker(tmp_path)
    try:
        bf16 = worker.take_profiler("hopper", "GMMA")
        assert "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum" in metrics_of(tmp_path, bf16)
        bf16.close()
        worker.warm_spare("cuda")  # for the next candidates: as the last one's task required
        spare = worker.spare_profilers.line[0]
        assert spare.required == "GMMA"
        fp8 = worker.take_profiler("hopper", "QGMMA")
        assert fp8 is not spare and fp8.required == "QGMMA" and not spare.alive()
        metrics = metrics_of(tmp_path, fp8)
        assert "sm__ops_path_tensor_src_fp8.sum" in metrics
        assert "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum" not in metrics
        fp8.close()
        copy = worker.take_profiler("hopper", "ASYNC_COPY")  # memory-bound: no tensor metric at all
        assert not any("tensor" in metric for metric in metrics_of(tmp_path, copy))
        copy.close()
    finally:
        worker.close()


def test_a_held_run_goes_no_further_until_started_then_serves_as_any(tmp_path: Path) -> None:
    ncu = stand_in(tmp_path, str(DATA / "wgmma_gemm_m256_raw_details.csv"))
    run = ProfiledProcess(
        ncu, "hopper", ["python", "-m", "workbench.evaluate.gpu.candidate_entry"], held=True
    )
    try:
        time.sleep(1.0)
        assert run.alive() and not (run.workdir / "ready").exists()  # started, holding
        run.submit("lib.so", {"axes": {}})  # submitting starts it
        assert wait_for(run.workdir / "ready", os.getpid())
        run.go()
        assert run.wait(20) and run.returncode == 0
        assert parse_raw_csv(run.report())
    finally:
        run.close()


def test_the_child_runs_its_warm_range_only_when_asked_and_before_its_candidate(tmp_path: Path) -> None:
    ranges: list[bool] = []  # at each range: whether the candidate had come yet
    asked, plain = tmp_path / "asked", tmp_path / "plain"
    for folder in (asked, plain):
        folder.mkdir()
    (asked / "warm").touch()
    later = threading.Timer(0.3, lambda: (asked / "request.json").touch())
    later.start()
    assert await_candidate(asked, os.getpid(), lambda: ranges.append((asked / "request.json").exists()))
    later.join()
    assert ranges == [False] and (asked / "warmed").read_text() == WARM_RAN
    (plain / "request.json").touch()
    assert await_candidate(plain, os.getpid(), lambda: ranges.append(True))
    assert ranges == [False] and not (plain / "warmed").exists()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert await_candidate(tmp_path, gone.pid, lambda: ranges.append(True)) is False
    # A range that fails (no GPU here: torch's own) still lets the candidate come, as without one.
    failed = tmp_path / "failed"
    failed.mkdir()
    (failed / "warm").touch()
    (failed / "request.json").touch()
    # Its `warmed` file does not say it ran: the report's first launch is then the candidate's own.
    assert await_candidate(failed, os.getpid()) and (failed / "warmed").read_text() == ""


def test_a_tools_run_loads_its_candidate_only_at_the_go(tmp_path: Path) -> None:
    # Its candidate's code (a library's constructors, a Triton module's Python) must not run in a process
    # nothing traces while the timed calls run: the tool's run waits through the timing stage.
    loaded: list[bool] = []  # at each load: whether the go had come
    later = threading.Timer(0.3, lambda: (tmp_path / "go").touch())
    later.start()
    module = load_after_go(
        tmp_path, os.getpid(), lambda: loaded.append((tmp_path / "go").exists()) or "module"
    )
    later.join()
    assert module == "module" and loaded == [True]
    # A worker gone before the go: nothing is loaded.
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    assert load_after_go(quiet, gone.pid, lambda: loaded.append(True)) is None and loaded == [True]


def test_the_next_ncu_run_in_line_warms_when_released_and_a_timing_stage_can_wait_for_it(
    tmp_path: Path,
) -> None:
    worker = ncu_worker(tmp_path)
    worker.target = "hopper"
    try:
        worker.warm_spare("cuda", held=True)  # while a candidate is judged: none may touch the GPU
        first, second = worker.spare_profilers.line
        assert not first.warm_asked and not second.warm_asked
        worker.release_spares()  # its profiled call is over: the next one in line warms, alone
        assert first.warm_asked and not second.warm_asked and worker.next_profiler() is first
        assert first.warming()
        assert await_warm([first, second], 20) and first.warmed() and first.warm_ran() and not first.warming()
        # At least the range's own seconds (the stand-in's 0.2 s; file times are a tick coarser).
        assert (first.first_range_s() or 0) >= 0.19
        assert second.first_range_s() is None  # not asked
        taken = worker.take_profiler("hopper")
        assert taken is first and worker.next_profiler() is second
        taken.close()
        worker.release_spares()
        assert second.warm_asked  # now next in line
        late = worker.take_profiler("hopper", "GMMA")  # none fits: a new run, its candidate given at once
        late.submit("lib.so", {})
        late.warm()  # once its candidate came, never
        assert not late.warm_asked and not (late.workdir / "warm").exists()
        late.close()
    finally:
        worker.close()


def test_an_idle_worker_warms_its_next_ncu_run_and_a_range_that_never_ends_is_given_up_on(
    tmp_path: Path,
) -> None:
    (tmp_path / "warm_s").write_text("never")
    worker = ncu_worker(tmp_path)
    worker.target = "hopper"
    try:
        worker.warm_spare("cuda")  # a candidate ended and nothing waits: its spares start unheld
        first, second = worker.spare_profilers.line
        assert first.warm_asked and not second.warm_asked
        started = time.monotonic()
        assert await_warm([first], 0.5) is False and time.monotonic() - started >= 0.5
        first.close()  # a run that died is not waited for
        assert await_warm([first, None, second], 0.5) is True
    finally:
        worker.close()
