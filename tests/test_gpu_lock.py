"""The GPU lock: one candidate at a time on a GPU across workers, users and processes."""

from __future__ import annotations

import io
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import pytest

from workbench.evaluate.gpu.device_uuid import device_ordinal, format_uuid, gpu_uuid
from workbench.evaluate.gpu.gpu_lock import LOCK_DIR_ENV, GpuLock
from workbench.evaluate.gpu.worker import Worker

UUID = "GPU-0a1b2c3d-0000-1111-2222-333344445555"

# Another process takes the lock, says so, and holds it until its stdin closes.
HOLDER = """
import sys
from pathlib import Path
from workbench.evaluate.gpu.gpu_lock import GpuLock
lock = GpuLock(sys.argv[1], Path(sys.argv[2]))
lock.hold()
print("held", flush=True)
sys.stdin.read()
"""


def _start_holder(folder: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, UUID, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _holder(folder: Path) -> subprocess.Popen[str]:
    """A holder that has taken the lock."""
    holder = _start_holder(folder)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_a_gpu_held_by_another_process_is_waited_for_until_it_lets_go_or_ends(tmp_path: Path) -> None:
    folder = tmp_path / "locks"
    holder = _holder(folder)
    lock = GpuLock(UUID, folder)
    taken = threading.Event()
    waiting = threading.Thread(target=lambda: (lock.hold(), taken.set()))
    waiting.start()
    assert not taken.wait(0.5)  # the other process holds it
    assert holder.stdin is not None
    holder.stdin.close()  # it ends without letting go: the kernel drops its lock
    holder.wait()
    assert taken.wait(10)
    waiting.join()
    assert lock.held and lock.why == ""
    # While this one holds it, another process waits; once it is released, that one takes it.
    again = _start_holder(folder)
    assert again.stdout is not None
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(again.stdout.readline() if again.stdout else ""))
    reader.start()
    reader.join(0.5)
    assert got == []
    lock.release()
    reader.join(10)
    assert got == ["held\n"]
    assert again.stdin is not None
    again.stdin.close()
    again.wait()
    lock.close()


def test_the_locks_folder_is_shared_by_every_user_and_a_link_or_a_closed_one_is_refused(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "locks"
    GpuLock(UUID, folder).close()
    assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o1777  # sticky, open to every user
    assert (folder / f"{UUID}.lock").is_file()
    # A link left where the lock file goes is not followed: no lock, and why.
    linked = tmp_path / "linked"
    linked.mkdir(mode=0o700)
    os.chmod(linked, 0o1777)
    (linked / f"{UUID}.lock").symlink_to(tmp_path / "elsewhere")
    lock = GpuLock(UUID, linked)
    assert lock.fd is None and "could not be opened" in lock.why
    lock.hold()  # at once: nothing to wait on
    assert not lock.held
    assert not (tmp_path / "elsewhere").exists()
    # A folder others may not use is not taken for the shared one.
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    assert "not 1777" in GpuLock(UUID, private).why
    (tmp_path / "folder_link").symlink_to(folder)
    assert "not a folder" in GpuLock(UUID, tmp_path / "folder_link").why


def test_a_worker_holds_its_candidates_gpu_from_begin_to_end_and_drops_it_when_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    first, second = Worker(io.StringIO()), Worker(io.StringIO())
    try:
        assert first.hold_gpu(UUID) == ""
        taken = threading.Event()
        waiting = threading.Thread(target=lambda: (second.hold_gpu(UUID), taken.set()))
        waiting.start()
        assert not taken.wait(0.5)  # the other worker's candidate waits for this one's end
        first.release_gpu()
        assert taken.wait(10)
        waiting.join()
        second.release_gpu()
        # Without a UUID, a worker holds the GPUs it judged on before (at a candidate's begin, before its
        # runner's hello names the GPU): the other worker waits again.
        assert first.hold_gpu() == ""
        taken.clear()
        waiting = threading.Thread(target=lambda: (second.hold_gpu(UUID), taken.set()))
        waiting.start()
        assert not taken.wait(0.5)
        first.release_gpu()
        assert taken.wait(10)
        waiting.join()
        # Another GPU is another lock: not waited for.
        assert first.hold_gpu("GPU-ffff") == ""
    finally:
        second.close()
        first.close()
    assert first.gpu_locks == {} and second.gpu_locks == {}


def test_a_release_waits_for_the_workers_own_range_and_a_hold_meanwhile_keeps_the_lock(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "locks"
    lock, other = GpuLock(UUID, folder), GpuLock(UUID, folder)
    try:
        lock.hold()
        ranging = threading.Event()
        ranging.set()  # this worker's next ncu run's first range is in flight
        lock.release_after(ranging.is_set, 30)
        taken = threading.Event()
        waiting = threading.Thread(target=lambda: (other.hold(), taken.set()))
        waiting.start()
        assert not taken.wait(0.5)  # another worker waits while the range runs
        ranging.clear()
        assert taken.wait(10)  # then it gets the GPU
        waiting.join()
        assert not lock.held
        other.release()
        # A hold before the range ends keeps the lock: the pending release lets go no more.
        lock.hold()
        ranging.set()
        lock.release_after(ranging.is_set, 30)
        lock.hold()  # this worker's next candidate came first
        ranging.clear()
        taken.clear()
        waiting = threading.Thread(target=lambda: (other.hold(), taken.set()))
        waiting.start()
        assert not taken.wait(0.5) and lock.held
        lock.release()
        assert taken.wait(10)
        waiting.join()
        # A range that never ends is given up on after the limit.
        other.release()
        lock.hold()
        lock.release_after(lambda: True, 0.2)
        taking = threading.Thread(target=other.hold)
        taking.start()
        taking.join(10)
        assert not taking.is_alive() and other.held
    finally:
        lock.close()
        other.close()


def test_a_device_is_named_as_the_runners_hello_names_its_gpu() -> None:
    raw = bytes(range(0x10, 0x20))
    assert format_uuid(raw) == f"GPU-{uuid.UUID(bytes=raw)}"
    assert [device_ordinal(d) for d in ("cuda", "cuda:3", "cpu", "cuda:x")] == [0, 3, None, None]
    assert gpu_uuid("cpu") == ("", "cpu is not a CUDA device")
    # Without a driver (CI) the lock waits for the runner's hello, and why is said; with one, it names it.
    named, why = gpu_uuid("cuda")
    assert bool(named) != bool(why)
    assert why or re.fullmatch(r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", named)


SYSTEM_PYTHON = "/usr/bin/python3"  # one a second user may run (the project's may sit in root's home)

# The second user's side, with the syscalls GpuLock makes: opens (making it if absent) and flocks the file,
# says so, holds it until stdin closes; with "try", only says whether it could take it now.
OTHER_USER = """
import fcntl, os, sys
path, mode = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if mode == "try" else 0))
except BlockingIOError:
    print("busy", flush=True)
    sys.exit()
print("held", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(
    os.getuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK), reason="needs root to act as a second user"
)
def test_two_users_share_one_gpus_lock_whoever_made_its_file() -> None:
    scratch = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        scratch.chmod(0o755)
        folder = scratch / "locks"
        GpuLock("GPU-other", folder).close()  # the folder is this user's, shared (1777)
        path = folder / f"{UUID}.lock"

        def as_nobody(mode: str) -> subprocess.Popen[str]:
            return subprocess.Popen(
                [SYSTEM_PYTHON, "-c", OTHER_USER, str(path), mode], user=65534, group=65534, cwd="/",
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            )  # fmt: skip

        other = as_nobody("hold")  # the other user's candidate came first: its file, its lock
        assert other.stdout is not None and other.stdout.readline() == "held\n"
        assert os.stat(path).st_uid == 65534
        # Opened though another user made it (an O_CREAT open is refused there under fs.protected_regular).
        lock = GpuLock(UUID, folder)
        assert lock.fd is not None and lock.why == ""
        taken = threading.Event()
        waiting = threading.Thread(target=lambda: (lock.hold(), taken.set()))
        waiting.start()
        assert not taken.wait(0.5)  # the other user's candidate is judged: this one waits
        assert other.stdin is not None
        other.stdin.close()
        other.wait()
        assert taken.wait(10)
        waiting.join()
        trying = as_nobody("try")
        assert trying.communicate(timeout=30)[0] == "busy\n"  # and now the other user waits for this one
        lock.release()
        again = as_nobody("hold")
        assert again.stdout is not None and again.stdout.readline() == "held\n"
        assert again.stdin is not None
        again.stdin.close()
        again.wait()
        lock.close()
    finally:
        shutil.rmtree(scratch)
