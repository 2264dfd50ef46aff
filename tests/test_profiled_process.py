"""The file protocol between the worker and the ncu run it starts ahead of a candidate, on this machine
(compute-sanitizer's run is the same `ToolProcess`).

Nsight Compute cannot profile here (no GPU), so `stand_in_ncu.py` plays its part: it takes ncu's
command line, does what the profiled child does with the files in its work folder, and writes the raw
page recorded on the H200 into the log file ncu was given. Everything else is the real code.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from workbench.evaluate.child import wait_for
from workbench.evaluate.profile import parse_raw_csv
from workbench.evaluate.tool_process import ProfiledProcess

DATA = Path(__file__).parent / "data" / "ncu"
STAND_IN = r"""
import sys, time
from pathlib import Path
args = sys.argv[1:]
log = Path(args[args.index("--log-file") + 1])
workdir = Path(args[args.index("once") + 1])
(workdir / "ready").touch()
while not (workdir / "request.json").exists():
    time.sleep(0.01)
while not (workdir / "go").exists():
    time.sleep(0.01)
behaviour = (Path(sys.argv[0]).parent / "behaviour").read_text()
if behaviour == "hang":
    time.sleep(600)
if behaviour == "crash":
    print("RuntimeError: CUDA error: an illegal memory access was encountered", flush=True)
    sys.exit(1)
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


def test_the_candidate_and_the_go_signal_reach_the_waiting_run_and_its_page_comes_back(
    tmp_path: Path,
) -> None:
    ncu = stand_in(tmp_path, str(DATA / "wgmma_gemm_m256_raw_details.csv"))
    run = ProfiledProcess(ncu, "hopper", ["python", "-m", "workbench.evaluate.child"])
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
