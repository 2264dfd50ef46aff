"""Child isolation without a GPU: real child processes that crash, hang, exit, flood and fork.

Each child speaks the real protocol (`ChildChannel`); the parent side is the real `Child`. What a
candidate can do to its process is done here with plain Python: abort(), a segfault, exit(0), a
sleep past the deadline, 20 MB on stdout, a grandchild that outlives its parent.
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time

import pytest

from workbench.evaluate.gpu.isolation import Child, describe_exit, first_useful_line

PRELUDE = """
import ctypes, os, subprocess, sys, time
from workbench.evaluate.gpu.isolation import ChildChannel
channel = ChildChannel()
channel.write({"type": "ready"})
while True:
    request = channel.read()
    if request is None:
        break
    action = request["do"]
"""


def start(body: str) -> Child:
    code = PRELUDE + textwrap.indent(textwrap.dedent(body), "    ")
    child = Child([sys.executable, "-c", code])
    ready = child.receive(60)
    assert ready.ok and ready.data == {"type": "ready"}, ready
    return child


def test_a_well_behaved_child_answers_every_request() -> None:
    child = start('channel.write({"echo": action})')
    try:
        for word in ("one", "two", "three"):
            assert child.request({"do": word}, 10).data == {"echo": word}
    finally:
        child.close()
    assert not child.alive()


def test_a_request_asked_now_is_answered_later_and_its_nonce_still_checked() -> None:
    child = start('channel.write({"echo": action, "nonce": request["nonce"] if action != "other" else "x"})')
    try:
        asked = child.ask({"do": "slow"})
        time.sleep(0.3)  # the parent works on meanwhile: the reply waits on the pipe
        reply = child.answer(asked, 10)
        assert reply.data is not None and reply.data["echo"] == "slow" and not reply.forged
        assert child.request({"do": "next"}, 10).data["echo"] == "next"  # the channel is in step
        other = child.answer(child.ask({"do": "other"}), 10)  # a reply that does not echo its nonce
        assert other.data is not None and other.forged
    finally:
        child.close()
    gone = start("os._exit(3)")
    asked = gone.ask({"do": "it"})
    assert gone.answer(asked, 30).exit_description == "exited with status 3"
    gone.close()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("os.abort()", "killed by SIGABRT"),
        ("ctypes.string_at(0)", "killed by SIGSEGV"),
        ("sys.exit(0)", "exited with status 0"),
        ("os._exit(7)", "exited with status 7"),
    ],
)
def test_a_crash_or_exit_becomes_a_description_not_a_parent_failure(body: str, expected: str) -> None:
    child = start(body)
    try:
        reply = child.request({"do": "it"}, 30)
    finally:
        child.close()
    assert not reply.ok and not reply.timed_out
    assert reply.exit_description == expected


def test_a_hang_is_killed_at_the_deadline_with_its_whole_process_group() -> None:
    child = start(
        """
        if action == "fork":
            grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            channel.write({"pid": grandchild.pid})
        else:
            time.sleep(600)
        """
    )
    grandchild = child.request({"do": "fork"}, 60).data["pid"]
    started = time.monotonic()
    reply = child.request({"do": "hang"}, 1.0)
    waited = time.monotonic() - started
    child.close()
    assert reply.timed_out and not reply.ok
    assert waited < 30
    for _ in range(100):  # the kernel reaps it asynchronously once its parent (the child) is gone
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"grandchild {grandchild} survived the group kill")


def test_an_output_flood_is_drained_and_capped_and_the_reply_still_arrives() -> None:
    child = start(
        """
        chunk = "x" * 1023 + "\\n"
        for _ in range(20 * 1024):
            sys.stdout.write(chunk)
        sys.stdout.flush()
        channel.write({"done": True})
        """
    )
    try:
        reply = child.request({"do": "flood"}, 60)
    finally:
        child.close()
    assert reply.data == {"done": True}
    text = child.stdout.text()
    assert child.stdout.total == 20 * 1024 * 1024
    assert len(text) < 70 * 1024 and "more bytes of output dropped" in text


def test_evidence_is_the_first_line_that_names_the_cause() -> None:
    child = start(
        """
        print("Traceback (most recent call last):", file=sys.stderr)
        print('  File "x.py", line 1, in <module>', file=sys.stderr)
        print("RuntimeError: CUDA error: an illegal memory access was encountered", file=sys.stderr)
        print("CUDA kernel errors might be asynchronously reported at some other API call", file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)
        """
    )
    try:
        reply = child.request({"do": "fail"}, 30)
    finally:
        child.close()
    assert reply.evidence == "RuntimeError: CUDA error: an illegal memory access was encountered"


def test_a_reply_printed_on_stdout_is_not_a_reply() -> None:
    child = start('print(\'{"stage": {"status": "passed"}}\', flush=True); os._exit(0)')
    try:
        reply = child.request({"do": "forge"}, 30)
    finally:
        child.close()
    assert not reply.ok and reply.exit_description == "exited with status 0"


def test_exit_descriptions() -> None:
    assert describe_exit(-signal.SIGKILL) == "killed by SIGKILL"
    assert describe_exit(3) == "exited with status 3"
    assert describe_exit(None) == "still running"


def test_first_useful_line_skips_frames_and_advice() -> None:
    text = '\nTraceback (most recent call last):\n  File "a.py", line 3, in f\n    ^^^^^^\ntvm_ffi.error.InternalError: Check failed: K % 64 == 0: needs K % 64 == 0'
    assert first_useful_line(text).startswith("tvm_ffi.error.InternalError: Check failed")
    assert first_useful_line("") == ""
