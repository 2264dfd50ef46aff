"""The seccomp filters of the candidate's processes, installed in real child processes: every door they
close stays closed, and what a kernel's process legitimately does (threads, memory, reading files,
signals to itself) still works."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workbench.evaluate.gpu.sandbox import available, doors_program, landlock_abi, no_new_code_program
from workbench.evaluate.gpu.worker import profiling_refusal

pytestmark = pytest.mark.skipif(not available(), reason="the sandbox is built for Linux on x86-64")

# Each door tried in the probed process: "open" when the call worked, "closed" when it failed.
ATTEMPT = """results = {}
def attempt(name, door):
    try:
        door()
        results[name] = "open"
    except OSError:
        results[name] = "closed"
"""

PROBE = """
import json, mmap, os, signal, socket, threading
from workbench.evaluate.gpu import sandbox
sandbox.close_doors(no_writes={no_writes})
sandbox.forbid_new_code()
{attempt}attempt("fork", os.fork)
attempt("exec", lambda: os.execv("/bin/true", ["true"]))
attempt("new session", os.setsid)
attempt("signal the parent", lambda: os.kill(os.getppid(), 0))
attempt("write a file", lambda: open("{path}", "w"))
attempt("truncate a file opened to read", lambda: os.open("{kept}", os.O_RDONLY | os.O_TRUNC))
attempt("create a file opened to read", lambda: os.open("{path}", os.O_RDONLY | os.O_CREAT))
attempt("truncate by name", lambda: os.truncate("{kept}", 0))
attempt("rename", lambda: os.rename("{kept}", "{path}"))
attempt("replace a name", lambda: os.replace("{kept}", "{other}"))
attempt("unlink", lambda: os.unlink("{other}"))
attempt("hard link", lambda: os.link("{kept}", "{path}"))
attempt("symbolic link", lambda: os.symlink("{kept}", "{path}"))
attempt("make a folder", lambda: os.mkdir("{path}"))
attempt("change a mode", lambda: os.chmod("{kept}", 0o777))
attempt("write the parent's stdout through /proc", lambda: open("/proc/%d/fd/1" % os.getppid(), "w"))
attempt("write /proc/self/mem", lambda: open("/proc/self/mem", "r+b"))
attempt("socket", lambda: socket.socket())
attempt("executable memory", lambda: mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_EXEC))
attempt("read a file", lambda: open("/proc/self/status").read())
attempt("signal itself", lambda: os.kill(os.getpid(), 0))
attempt("writable memory", lambda: mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE))
ran = []
thread = threading.Thread(target=lambda: ran.append(1))
thread.start(); thread.join()
results["a thread"] = "open" if ran else "closed"
print(json.dumps(results))
"""


FILE_DOORS = (
    "write a file", "truncate a file opened to read", "create a file opened to read", "truncate by name",
    "rename", "replace a name", "unlink", "hard link", "symbolic link", "make a folder", "change a mode",
    "write the parent's stdout through /proc",
)  # fmt: skip
REPORT = "a tool's report\n"


def probe(tmp_path, no_writes: bool) -> dict[str, str]:
    kept, other = tmp_path / "report.log", tmp_path / "other.log"
    kept.write_text(REPORT)
    other.write_text(REPORT)
    code = textwrap.dedent(PROBE).format(
        no_writes=no_writes, path=tmp_path / "written", kept=kept, other=other, attempt=ATTEMPT
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_candidate_process_has_every_door_closed_and_the_work_open(tmp_path) -> None:
    """The runner and the processes a tool watches (ncu, memcheck) alike: no file written, truncated,
    created, renamed or linked, so a report another process reads stays the tool's."""
    results = probe(tmp_path, no_writes=True)
    for door in ("fork", "exec", "new session", "signal the parent", "write /proc/self/mem", "socket",
                 "executable memory", *FILE_DOORS):  # fmt: skip
        assert results[door] == "closed", (door, results)
    for work in ("read a file", "signal itself", "writable memory", "a thread"):
        assert results[work] == "open", (work, results)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.log", "report.log"]
    assert (tmp_path / "report.log").read_text() == (tmp_path / "other.log").read_text() == REPORT
    assert (tmp_path / "report.log").stat().st_mode & 0o777 != 0o777


def test_the_triton_trace_keeps_its_files_but_not_the_other_doors(tmp_path) -> None:
    """Triton's trace child writes its cache: its files stay open, the doors to other processes do not."""
    results = probe(tmp_path, no_writes=False)
    assert results["write a file"] == "open" and results["socket"] == "open"
    assert results["fork"] == results["exec"] == results["signal the parent"] == "closed"


def test_the_programs_are_whole_bpf_instructions() -> None:
    for program in (doors_program(1234, True), doors_program(1234, False), no_new_code_program()):
        assert len(program) % 8 == 0 and 0 < len(program) // 8 < 4096


LANDLOCK_PROBE = """
import os
from workbench.evaluate.gpu.candidate_entry import close_tool_doors
close_tool_doors("ncu")
{attempt}attempt("write its temporary folder", lambda: open(os.path.join(os.environ["TMPDIR"], "scratch"), "w").write("x"))
attempt("write the lock folder", lambda: open("/tmp/nvidia/ptxwb-test-{pid}", "w").close())
attempt("write a file elsewhere", lambda: open("{path}", "w"))
attempt("rename a report", lambda: os.rename("{kept}", "{path}"))
attempt("truncate a report", lambda: os.truncate("{kept}", 0))
attempt("write the worker's pipe through /proc", lambda: open("/proc/%d/fd/1" % os.getppid(), "w"))
print(results)
"""

PARENT = """
import subprocess, sys
from workbench.evaluate.gpu import sandbox
sandbox.not_dumpable()
done = subprocess.run([sys.executable, "-c", sys.argv[1]], capture_output=True, text=True, check=False)
sys.stdout.write(done.stdout)
sys.stderr.write(done.stderr)
sys.exit(done.returncode)
"""


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")
def test_the_process_ncu_profiles_writes_only_its_scratch_the_lock_and_devices(tmp_path) -> None:
    """Its writes confined by Landlock, its capabilities gone: a report stays the tool's, and the
    non-dumpable worker's pipe cannot be opened through /proc."""
    kept, scratch = tmp_path / "report.log", tmp_path / "scratch"
    kept.write_text(REPORT)
    scratch.mkdir()
    code = textwrap.dedent(LANDLOCK_PROBE).format(
        path=tmp_path / "written", kept=kept, pid=os.getpid(), attempt=ATTEMPT
    )
    done = subprocess.run([sys.executable, "-c", PARENT, code], capture_output=True, text=True, timeout=60,
                          check=False, env={**os.environ, "TMPDIR": str(scratch)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert results == {
        "write its temporary folder": "open",
        "write the lock folder": "open",
        "write a file elsewhere": "closed",
        "rename a report": "closed",
        "truncate a report": "closed",
        "write the worker's pipe through /proc": "closed",
    }, results
    assert kept.read_text() == REPORT and not (tmp_path / "written").exists()
    Path(f"/tmp/nvidia/ptxwb-test-{os.getpid()}").unlink()


def test_a_host_without_landlock_refuses_the_dynamic_tier_in_one_line() -> None:
    refusal = profiling_refusal(sandboxed=True, landlock=0)
    assert refusal is not None and "Landlock" in refusal and "\n" not in refusal
    assert profiling_refusal(sandboxed=True, landlock=7) is None
    # Where the sandbox itself cannot run (not Linux on x86-64) the runner's verdict says so already.
    assert profiling_refusal(sandboxed=False, landlock=0) is None
