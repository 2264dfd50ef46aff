"""The seccomp filters of the candidate's processes, installed in real child processes: every door they
close stays closed, and what a kernel's process legitimately does (threads, memory, reading files,
signals to itself) still works."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from workbench.evaluate.sandbox import available, doors_program, no_new_code_program

pytestmark = pytest.mark.skipif(not available(), reason="the sandbox is built for Linux on x86-64")

PROBE = """
import json, mmap, os, signal, socket, threading
from workbench.evaluate import sandbox
sandbox.close_doors(no_writes={no_writes})
sandbox.forbid_new_code()
results = {{}}
def attempt(name, door):
    try:
        door()
        results[name] = "open"
    except OSError:
        results[name] = "closed"
attempt("fork", os.fork)
attempt("exec", lambda: os.execv("/bin/true", ["true"]))
attempt("new session", os.setsid)
attempt("signal the parent", lambda: os.kill(os.getppid(), 0))
attempt("write a file", lambda: open("{path}", "w"))
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


def probe(tmp_path, no_writes: bool) -> dict[str, str]:
    code = textwrap.dedent(PROBE).format(no_writes=no_writes, path=tmp_path / "written")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_runner_filters_close_every_door_and_leave_the_work_open(tmp_path) -> None:
    results = probe(tmp_path, no_writes=True)
    for door in ("fork", "exec", "new session", "signal the parent", "write a file", "write /proc/self/mem",
                 "socket", "executable memory"):  # fmt: skip
        assert results[door] == "closed", (door, results)
    for work in ("read a file", "signal itself", "writable memory", "a thread"):
        assert results[work] == "open", (work, results)
    assert not (tmp_path / "written").exists()


def test_a_tool_watched_process_keeps_its_files_but_not_the_other_doors(tmp_path) -> None:
    results = probe(tmp_path, no_writes=False)
    assert results["write a file"] == "open" and results["socket"] == "open"
    assert results["fork"] == results["exec"] == results["signal the parent"] == "closed"


def test_the_programs_are_whole_bpf_instructions() -> None:
    for program in (doors_program(1234, True), doors_program(1234, False), no_new_code_program()):
        assert len(program) % 8 == 0 and 0 < len(program) // 8 < 4096
