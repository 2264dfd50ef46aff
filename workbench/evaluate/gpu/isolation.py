"""One candidate, one process: a child in its own session (process group), spoken to over two private
pipes, its stdout/stderr drained into a capped buffer, every request under a deadline, killed as a group.

Standard library only: this runs inside the worker on a bare GPU host. The child's protocol is one JSON
object per line on the pipes named by `PTXWB_CHILD_FDS` ("READ,WRITE" from the child's side), so nothing
the candidate prints on fd 1 or 2 can forge or corrupt a reply.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import signal
import subprocess
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass

FDS_ENV = "PTXWB_CHILD_FDS"
TOOL_ENV = "PTXWB_TOOL"  # which tool watches a candidate's process: its doors differ (child.py)
# Set on a spare runner started early: it imports, then waits for `{"cmd": "start"}` before the GPU.
HOLD_ENV = "PTXWB_HOLD"
# A runner's wake pipe: a byte on it asks the runner's watch thread what the process is running, when a
# request's time limit struck (the main thread is then blocked behind the GPU and cannot answer).
WAKE_ENV = "PTXWB_WAKE_FD"
HANG_REPORT_S = 3.0
OUTPUT_CAP_BYTES = 64 * 1024

# Lines that frame an error rather than say what it was (Python tracebacks, torch's CUDA advice).
_NOISE_PREFIXES = (
    "Traceback (most recent call last)",
    "File ",
    "CUDA kernel errors might be asynchronously reported",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING",
    "Compile with `TORCH_USE_CUDA_DSA`",
    "Search for `cuda",
    "Device-side assertions will be",
    "~~~",
    "^^^",
    "During handling of the above exception",
    "The above exception was the direct cause",
)


def first_useful_line(text: str) -> str:
    """The first line of `text` that names a cause, not the traceback frame or advice around it."""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(_NOISE_PREFIXES) or set(line) <= set("~^ "):
            continue
        return line[:500]
    return ""


def error_line(exc: BaseException) -> str:
    """One line for an exception raised while serving a request (inside `except`: its traceback helps)."""
    text = f"{type(exc).__name__}: {exc}"
    return first_useful_line(text) or first_useful_line(traceback.format_exc()) or type(exc).__name__


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exited with status {returncode}"


def signal_group(pid: int) -> None:
    """SIGKILL every process in the group that `pid` leads (its own session); nothing when it is gone."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the process's whole group, then reap the leader."""
    signal_group(process.pid)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


class CappedOutput:
    """Drains a pipe on a thread so the child never blocks on it; keeps the first `cap` bytes."""

    def __init__(self, stream, cap: int = OUTPUT_CAP_BYTES) -> None:
        self._stream = stream
        self._cap = cap
        self._chunks: list[bytes] = []
        self._kept = 0
        self.total = 0
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while True:
            chunk = self._stream.read1(65536) if hasattr(self._stream, "read1") else self._stream.read(65536)
            if not chunk:
                break
            self.total += len(chunk)
            if self._kept < self._cap:
                piece = chunk[: self._cap - self._kept]
                self._chunks.append(piece)
                self._kept += len(piece)

    def join(self, timeout: float = 2.0) -> None:
        self._thread.join(timeout)

    def text(self) -> str:
        kept = b"".join(self._chunks).decode(errors="replace")
        if self.total > self._kept:
            kept += f"\n[... {self.total - self._kept} more bytes of output dropped]"
        return kept


@dataclass
class Reply:
    """What came back for one request: the child's JSON reply, or why there is none."""

    data: dict | None
    timed_out: bool = False
    exit_description: str = ""
    evidence: str = ""
    forged: bool = False  # a line that does not answer this request came first: written by the candidate
    hang: dict | None = None  # on a timeout: what the child's watch thread said it was running (unchecked)

    @property
    def ok(self) -> bool:
        return self.data is not None


@dataclass(frozen=True)
class Asked:
    """A request sent and not yet answered: its nonce, whether a line was already waiting, whether it went."""

    nonce: str
    stale: bool
    sent: bool


class Child:
    """A child process speaking JSON lines on private pipes, in its own process group."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None, wake: bool = False) -> None:
        """`wake`: the child watches a wake pipe (a runner), asked on a timeout what it was running."""
        child_read, parent_write = os.pipe()
        parent_read, child_write = os.pipe()
        wake_read, self._wake_fd = os.pipe() if wake else (-1, -1)
        wake_env = {WAKE_ENV: str(wake_read)} if wake else {}
        self.process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(child_read, child_write, *((wake_read,) if wake else ())),
            env={**os.environ, **(env or {}), FDS_ENV: f"{child_read},{child_write}", **wake_env},
            start_new_session=True,
        )
        for fd in (child_read, child_write, wake_read):
            if fd >= 0:
                os.close(fd)
        self._write_fd = parent_write
        self._read_fd = parent_read
        self._buffer = b""
        self.stdout = CappedOutput(self.process.stdout)
        self.stderr = CappedOutput(self.process.stderr)

    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, message: dict) -> bool:
        try:
            os.write(self._write_fd, (json.dumps(message) + "\n").encode())
            return True
        except OSError:
            return False

    def _fill(self, deadline: float) -> bool | None:
        """Read until a whole line is buffered: True; the deadline passed: False; the child closed its
        end (it is gone): None."""
        selector = selectors.DefaultSelector()
        selector.register(self._read_fd, selectors.EVENT_READ)
        try:
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                if not selector.select(timeout=min(left, 0.5)):
                    continue
                chunk = os.read(self._read_fd, 65536)
                if not chunk:
                    return None
                self._buffer += chunk
            return True
        finally:
            selector.close()

    def receive(self, timeout_s: float) -> Reply:
        """The next reply line, waiting at most `timeout_s`; on death or timeout, the evidence."""
        filled = self._fill(time.monotonic() + timeout_s)
        if filled is False:
            hang = self._hang_report()
            self.kill()
            return Reply(
                None,
                timed_out=True,
                exit_description="killed after the time limit",
                evidence=self.evidence(),
                hang=hang,
            )
        if filled is None:
            self.process.wait(timeout=10)
            return Reply(
                None, exit_description=describe_exit(self.process.returncode), evidence=self.evidence()
            )
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            return Reply(json.loads(line))
        except json.JSONDecodeError:
            self.kill()
            return Reply(
                None,
                exit_description="sent an unreadable reply",
                evidence=line[:300].decode(errors="replace"),
            )

    def request(self, message: dict, timeout_s: float) -> Reply:
        """Send `message` with a fresh nonce; the reply must echo it and be the only line waiting. Anything
        else on the channel was written by someone other than the harness: the reply is `forged`."""
        return self.answer(self.ask(message), timeout_s)

    def ask(self, message: dict) -> Asked:
        """`request`'s first half: `message` sent with a fresh nonce, its reply read by `answer` (nothing
        else may be asked of this child in between)."""
        nonce = secrets.token_hex(16)
        stale = bool(self._buffer)
        return Asked(nonce, stale, self.send({**message, "nonce": nonce}))

    def answer(self, asked: Asked, timeout_s: float) -> Reply:
        """`request`'s second half: the reply to `asked`, waiting at most `timeout_s`."""
        if not asked.sent:
            self.process.wait(timeout=10)
            return Reply(
                None, exit_description=describe_exit(self.process.returncode), evidence=self.evidence()
            )
        reply = self.receive(timeout_s)
        if reply.data is not None and (asked.stale or self._buffer or reply.data.get("nonce") != asked.nonce):
            reply.forged = True
        return reply

    def _hang_report(self) -> dict | None:
        """Wake the child's watch thread and take its one line, within HANG_REPORT_S; None without."""
        if self._wake_fd < 0:
            return None
        self._buffer = b""  # a partial line of the request that timed out is of no use now
        try:
            os.write(self._wake_fd, b"w")
        except OSError:
            return None
        if not self._fill(time.monotonic() + HANG_REPORT_S):
            return None
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            return None
        hang = data.get("hung") if isinstance(data, dict) else None
        return hang if isinstance(hang, dict) else None

    def pause(self) -> None:
        """Stop every process in the child's group (SIGSTOP): nothing in it runs while the judge reads."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, number: signal.Signals) -> None:
        try:
            os.killpg(self.process.pid, number)
        except (ProcessLookupError, PermissionError):
            pass

    def evidence(self) -> str:
        """The first useful line the child wrote on stderr, else on stdout."""
        self.stderr.join(0.5)
        self.stdout.join(0.5)
        return first_useful_line(self.stderr.text()) or first_useful_line(self.stdout.text())

    def kill(self) -> None:
        """End the whole process group (the candidate may have forked), then reap."""
        kill_group(self.process)

    def close(self) -> None:
        self.kill()  # also when the leader is gone: anything it left in its group goes too
        for fd in (self._write_fd, self._read_fd, self._wake_fd):
            if fd < 0:
                continue
            try:
                os.close(fd)
            except OSError:
                pass
        # Closed once: a second close() must not close a descriptor number reused since.
        self._write_fd = self._read_fd = self._wake_fd = -1
        self.stdout.join(1.0)
        self.stderr.join(1.0)


def wake_fd() -> int | None:
    """Inside a runner: the wake pipe's read end the parent passed, if any."""
    value = os.environ.get(WAKE_ENV)
    return int(value) if value else None


def child_channel() -> tuple[int, int]:
    """Inside a child: the (read, write) protocol descriptors the parent passed."""
    value = os.environ.get(FDS_ENV)
    if not value:
        raise RuntimeError(f"{FDS_ENV} is not set: this process was not started by the workbench worker")
    read_fd, write_fd = (int(part) for part in value.split(","))
    return read_fd, write_fd


class ChildChannel:
    """The child's side of the protocol: read requests, write replies."""

    def __init__(self) -> None:
        read_fd, write_fd = child_channel()
        self._reader = os.fdopen(read_fd, "rb", buffering=0)
        self._write_fd = write_fd
        self._buffer = b""

    def read(self) -> dict | None:
        while b"\n" not in self._buffer:
            chunk = self._reader.read(65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def write(self, message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            written = os.write(self._write_fd, data)
            data = data[written:]
