"""The judging pipeline end to end on the CPU: the real worker drives a real runner (the candidate's
process, sandboxed) and a real judge; the candidates are C++ kernels with the kernel ABI built here.

What is shown: honest work passes with its speedup; wrong, half-written and input-writing kernels fail
with their statuses in a process that never ran them; a kernel that turns stale once correctness is over
is caught by the timed calls read after the fact; and a kernel that reaches the interpreter hosting it
(through the C library's own symbol table: no import the link check refuses) cannot patch the judge
(it is not there), cannot patch the harness (fingerprints), cannot forge the harness's reply (nonces),
and cannot reach its worker (the sandbox).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from cpu_pipeline import CpuWorker, build_cpu, cpu_spec

from workbench.evaluate.build.link_policy import check_library
from workbench.evaluate.gpu import timing as timing_module
from workbench.evaluate.gpu.child_protocol import encode_runner
from workbench.evaluate.gpu.isolation import HANG_REPORT_S, HOLD_ENV, Child
from workbench.evaluate.gpu.protocol import BeginRequest
from workbench.evaluate.gpu.sandbox import available
from workbench.evaluate.gpu.session import Session
from workbench.evaluate.gpu.timing_stage import IDLE_S
from workbench.evaluate.gpu.worker import child_argv

pytestmark = pytest.mark.skipif(not available(), reason="the sandbox is built for Linux on x86-64")

PAYLOADS = {
    "patch_harness": "import workbench.evaluate.gpu.kernel_trace as k\nk._Trace.collect = lambda self: None\n",
    "forge_reply": (
        "import os\nfd = int(os.environ['PTXWB_CHILD_FDS'].split(',')[1])\n"
        'os.write(fd, b\'{"done": true, "changed": []}\\n\')\n'
    ),
    "patch_comparison": (
        "import workbench.evaluate.gpu.correctness as c\n"
        "c.compare_output = lambda name, *a: ('passed', {'name': name, 'passed': True})\n"
    ),
    "escape": (
        "import os, signal\n"
        "for door in (lambda: os.kill(os.getppid(), signal.SIGKILL), os.fork, os.setsid,\n"
        "             lambda: open('/proc/%d/mem' % os.getppid(), 'r+b'), lambda: open('/tmp/ptxwb-escape', 'w'),\n"
        "             lambda: os.execv('/bin/sh', ['sh', '-c', 'kill -9 %d' % os.getppid()])):\n"
        "    try:\n"
        "        door()\n"
        "    except OSError:\n"
        "        pass\n"
    ),
}


ENTRANTS = ("candidate", "empty", "0")  # the timed calls of a round: the empty call and cuBLAS beside


def c_string(code: str) -> str:
    return '"' + code.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@pytest.fixture(autouse=True)
def no_wall_clock_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU "kernel" is timed by the host's clock too, so its host overhead against the baseline's is
    the scheduler's noise on a busy machine, not the candidate's: here the wall-clock check (its own
    test is test_timing_stats.py's, on fixed numbers) has all the slack, and no verdict depends on how
    idle the machine is."""
    monkeypatch.setattr(timing_module, "HOST_SLACK_MS", math.inf)


@pytest.fixture(scope="module")
def worker():
    worker = CpuWorker()
    yield worker
    worker.close()


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cpu_kernels")


def stages_of(worker: CpuWorker, folder: Path, **defines: str) -> dict:
    return worker.evaluate(build_cpu(defines, folder))["stages"]


def test_an_honest_kernel_passes_both_tiers_with_every_timed_call_read(worker, libraries) -> None:
    reply = worker.evaluate(build_cpu({}, libraries))
    stages = reply["stages"]
    # The seconds outside the stages, phase by phase, in the order they happen.
    assert list(reply["phases_s"]) == ["spawn", "runner_ready", "judge_setup", "baseline", "load"]
    assert all(seconds >= 0 for seconds in reply["phases_s"].values())
    assert reply["phases_s"]["runner_ready"] > 0  # a fresh runner imports torch before it is ready
    assert stages["correctness"]["status"] == "passed", stages["correctness"]["message"]
    assert [t["fresh_addresses"] for t in stages["correctness"]["trials"]] == [False, False, False, True]
    timing = stages["timing"]
    assert timing["status"] == "passed", timing["message"]
    assert timing["speedup"] > 0 and timing["baselines"][0]["name"] == "cuBLAS (torch.matmul)"
    assert timing["calls_checked"] == timing["iterations"] == 6
    assert len(timing["checked_calls"]) == 3 and all(t["passed"] for t in timing["checked_calls"])
    parts = timing["parts_s"]  # where the stage's time went: the checks are part of the timed rounds
    # The checks by the judge's own parts (no library answer on the CPU: reference and compare).
    judged = {"checks.draw", "checks.copy", "checks.inputs", "checks.reference", "checks.compare"}
    assert set(parts) == {
        "profiler_warm",
        "warm_up",
        "counters_open",
        "timed_rounds",
        "counters_close",
        "checks",
        "counters",
        "collect",
        "statistics",
    } | judged | {f"{part}.{entrant}" for part in ("gap", "prepare", "call") for entrant in ENTRANTS} | {
        f"prepare_parts.{part}" for part in ("inputs", "settings", "flush", "fingerprint")
    } | {f"collect.{part}" for part in ("synchronize", "collect", "raw", "fingerprint")}
    # A round's time is its entrants' prepares, waits and calls, the checks and the counters; the runner's
    # own parts lie within the prepares and the collection.
    rounds = sum(parts[f"{part}.{entrant}"] for part in ("gap", "prepare", "call") for entrant in ENTRANTS)
    assert rounds + parts["checks"] + parts["counters"] <= parts["timed_rounds"]
    runner_parts = sum(seconds for part, seconds in parts.items() if part.startswith("prepare_parts."))
    assert 0 < runner_parts <= sum(parts[f"prepare.{entrant}"] for entrant in ENTRANTS)
    assert (
        0 < sum(seconds for part, seconds in parts.items() if part.startswith("collect.")) <= parts["collect"]
    )
    # Each entrant's waits between its flush and its call, and the checks, are apart within the timed rounds;
    # every kept call of every entrant waited out at least the same idle after its flush.
    gaps = [parts[f"gap.{entrant}"] for entrant in ENTRANTS]
    assert min(gaps) >= timing["iterations"] * IDLE_S - 1e-6
    assert sum(gaps) + parts["checks"] < parts["timed_rounds"]
    assert parts["counters"] == 0.0  # no PM sampling on the CPU: no counter requests around the calls
    assert 0 < parts["checks"] < parts["timed_rounds"] and parts["warm_up"] > 0
    assert all(parts[part] > 0 for part in judged) and sum(parts[part] for part in judged) < parts["checks"]
    # No seed follows from another or from the workload's public one (7 here): each evaluation's are new.
    seeds = [t["seed"] for t in stages["correctness"]["trials"]] + [
        t["seed"] for t in timing["checked_calls"]
    ]
    assert len(set(seeds)) == 7 and not {6, 7, 8, 9, 10} & set(seeds)
    again = worker.evaluate(build_cpu({}, libraries), ("correctness",))
    assert not set(seeds) & {t["seed"] for t in again["stages"]["correctness"]["trials"]}
    # The next candidate says how long the worker's end of the one before took (its processes closed, the
    # next spares started): a request that came meanwhile waited behind it.
    assert again["phases_s"]["previous_end"] > 0
    assert reply["seed"] != again["seed"]


def test_a_verdicts_seed_replays_its_inputs_exactly(worker, libraries) -> None:
    first = worker.evaluate(build_cpu({}, libraries))
    replay = worker.evaluate(build_cpu({}, libraries), seed=first["seed"])
    assert replay["seed"] == first["seed"]
    trials = [t["seed"] for t in first["stages"]["correctness"]["trials"]]
    assert [t["seed"] for t in replay["stages"]["correctness"]["trials"]] == trials


@pytest.mark.parametrize(
    ("defines", "status", "words"),
    [
        ({"BIAS": "1.0f"}, "incorrect_numerical", ["trial 1", "outside atol"]),
        ({"HALF": "1"}, "incorrect_numerical", ["NaN", "unwritten"]),
        ({"CLOBBER": "1"}, "inputs_modified", ["trial 1", "A"]),
    ],
)
def test_a_faulty_kernel_fails_correctness_in_the_judge(worker, libraries, defines, status, words) -> None:
    stages = stages_of(worker, libraries, **defines)
    assert list(stages) == ["correctness"]
    assert stages["correctness"]["status"] == status
    assert all(word in stages["correctness"]["message"] for word in words), stages["correctness"]["message"]


def test_an_outputs_own_tolerance_replaces_the_tasks_for_that_output(worker, libraries) -> None:
    off = build_cpu({"BIAS": "0.05f"}, libraries)  # every element 0.05 off: outside 1e-2
    own = {**cpu_spec(), "output_tolerances": {"C": {"atol": 0.1, "rtol": 0.1}}}
    assert worker.evaluate(off, ("correctness",), spec=own)["stages"]["correctness"]["status"] == "passed"
    tighter = {
        **cpu_spec(),
        "atol": 0.1,
        "rtol": 0.1,
        "output_tolerances": {"C": {"atol": 0.01, "rtol": 0.01}},
    }
    failed = worker.evaluate(off, ("correctness",), spec=tighter)["stages"]["correctness"]
    assert failed["status"] == "incorrect_numerical" and "atol=0.01" in failed["message"], failed["message"]


def test_the_judge_lets_the_tasks_share_of_elements_miss_and_no_more(worker, libraries) -> None:
    # 1,536 outputs; an FP8 task's matched ratio of 0.995 lets 7 of them be outside atol/rtol.
    spec = {**cpu_spec(), "matched_ratio": 0.995}
    few, many = build_cpu({"WRONG": "5"}, libraries), build_cpu({"WRONG": "20"}, libraries)
    passed = worker.evaluate(few, ("correctness",), spec=spec)["stages"]["correctness"]
    assert passed["status"] == "passed", passed["message"]
    assert all(t["outputs"]["C"]["matched_ratio"] == 1 - 5 / 1536 for t in passed["trials"])
    failed = worker.evaluate(many, ("correctness",), spec=spec)["stages"]["correctness"]
    assert failed["status"] == "incorrect_numerical" and "(at most 7 may be)" in failed["message"]
    # Without the task's ratio (every task before the FP8 ones) the same few fail.
    strict = worker.evaluate(few, ("correctness",))["stages"]["correctness"]
    assert strict["status"] == "incorrect_numerical" and "5 of 1536 elements" in strict["message"]


def test_a_kernel_stale_once_correctness_is_over_is_caught_by_a_timed_call(worker, libraries) -> None:
    stages = stages_of(worker, libraries, HONEST_CALLS="5")
    assert stages["correctness"]["status"] == "passed"
    assert stages["timing"]["status"] == "incorrect_numerical"
    assert "the kernel answers differently when it is timed" in stages["timing"]["message"]


def test_one_wrong_call_among_the_timed_ones_is_caught_every_time(worker, libraries) -> None:
    # Calls 1-4 are the trials, 5-6 the warm-up, 7-12 the timed ones: call 9 is timed call 3 of 6, which
    # three calls sampled at random would miss half the time.
    stages = stages_of(worker, libraries, WRONG_ON_CALL="9")
    assert stages["correctness"]["status"] == "passed"
    timing = stages["timing"]
    assert timing["status"] == "incorrect_numerical", timing["message"]
    assert (
        timing["message"].startswith("timed call 3 of 6")
        and "1 of the 6 timed calls were wrong" in timing["message"]
    )
    assert [t["passed"] for t in timing["checked_calls"]] == [False]


def test_a_warm_up_that_fails_leaves_the_judge_in_step_for_the_next_candidate(worker, libraries) -> None:
    # Calls 1-4 are the trials, 5 the warm-up's first: it hangs while the judge sets up the sampling beside
    # it, and the judge's answer must still be read, or the next candidate's first request gets it.
    hung = worker.evaluate(build_cpu({"HANG_ON_CALL": "5"}, libraries), timeouts={"call_s": 2.0})["stages"]
    assert hung["correctness"]["status"] == "passed"
    assert hung["timing"]["status"] == "timeout", hung["timing"]["message"]
    after = worker.evaluate(build_cpu({}, libraries))["stages"]
    assert after["timing"]["status"] == "passed", after["timing"]["message"]


def test_the_door_to_the_interpreter_passes_the_link_check(libraries) -> None:
    """Why the run-time layers exist: this library imports nothing but strlen, memcmp and strcmp."""
    library = build_cpu({"PAYLOAD": c_string(PAYLOADS["patch_harness"])}, libraries)
    report = check_library(library, "__tvm_ffi_run")
    assert report.denials == [] and report.system_calls == 0


@pytest.mark.parametrize(
    ("name", "bias", "status", "words"),
    [
        ("patch_harness", "0", "tampered", ["harness", "_Trace.collect"]),
        ("forge_reply", "0", "tampered", ["candidate wrote to it"]),
        ("patch_comparison", "1.0f", "incorrect_numerical", ["trial 1"]),
        ("escape", "1.0f", "incorrect_numerical", ["trial 1"]),
    ],
)
def test_python_inside_the_candidate_process_cannot_rewrite_its_verdict(
    worker, libraries, name, bias, status, words
) -> None:
    stages = stages_of(worker, libraries, PAYLOAD=c_string(PAYLOADS[name]), BIAS=bias)
    assert stages["correctness"]["status"] == status, stages["correctness"]["message"]
    assert all(word in stages["correctness"]["message"] for word in words), stages["correctness"]["message"]
    assert not Path("/tmp/ptxwb-escape").exists()
    # The worker lives on and judges the next candidate.
    assert stages_of(worker, libraries)["correctness"]["status"] == "passed"


def test_the_next_runner_starts_with_the_first_stage_not_after_the_verdict(worker, libraries) -> None:
    # warm=False: nothing is started when the candidate ends, so a held spare alive now was started by
    # its stages (with the first: its imports take longer than the tiers); it still waits for the GPU.
    library = build_cpu({}, libraries)
    reply = worker.evaluate(library, stages=("correctness",), warm=False)
    assert reply["stages"]["correctness"]["status"] == "passed"
    line = worker.worker.runners.line
    assert [(s.device, s.held) for s in line] == [("cpu", True)] and line[0].child.alive()
    spare = line[0].child
    again = worker.evaluate(library, stages=("correctness",), warm=False)
    assert again["stages"]["correctness"]["status"] == "passed"
    # The second candidate ran in that spare (closed with it) and started the next one held.
    assert not spare.alive()
    line = worker.worker.runners.line
    assert len(line) == 1 and line[0].child is not spare and line[0].held


def test_a_call_past_its_limit_is_asked_what_it_is_stuck_in_before_it_is_killed(worker, libraries) -> None:
    library = build_cpu({"HANG_ON_CALL": "1"}, libraries)
    request: BeginRequest = {
        "op": "begin",
        "library": str(library),
        "spec": cpu_spec(),
        "stages": ["correctness"],
        "sanitize": False,
    }
    session = Session(worker.worker, request)
    try:
        assert session.begin()["ok"]
        assert session.runner is not None
        session.ask_runner({"cmd": "prepare", "set": "same", "seed": 1}, "preparing")
        started = time.monotonic()
        reply = session.runner.request(encode_runner({"cmd": "call", "set": "same"}), 2.0)
        # Its watch thread answered for the main thread, stuck in the call (on a GPU: with the
        # kernels launched and finished there), and then the process was killed.
        assert reply.timed_out and reply.hang == {"window": "call"}
        assert not session.runner.alive() and time.monotonic() - started < 2.0 + HANG_REPORT_S + 30
    finally:
        session.end()


def test_a_hung_call_is_a_timeout_in_the_verdict(worker, libraries) -> None:
    stage = worker.evaluate(
        build_cpu({"HANG_ON_CALL": "2"}, libraries), stages=("correctness",), timeouts={"call_s": 2.0}
    )["stages"]["correctness"]
    assert stage["status"] == "timeout" and stage["message"].startswith("trial 2"), stage["message"]


def test_a_held_spare_runner_goes_no_further_than_its_imports_until_told_to_start() -> None:
    child = Child(child_argv(), env={"PTXWB_DEVICE": "cpu", HOLD_ENV: "1"})
    try:
        assert child.send({"cmd": "exit"})
        reply = child.receive(120)  # it leaves without a context or a `ready`
        assert not reply.ok and reply.data is None and child.process.returncode == 0
    finally:
        child.close()
