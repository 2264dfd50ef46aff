"""One candidate at a time on a GPU, whoever's worker judges it. Standard library only, like the worker.

Each user's worker service is their own (its socket is theirs alone), and a user's commands pinned to one
GPU under two names (an index, its UUID) reach two services. Their candidates must still not be timed on
one GPU at once: each would slow the other's calls, and the PM sampler, which is device-wide, would count
the other's kernels into a counted call. So a worker holds the GPU's lock, named by the GPU's UUID, from a
candidate's begin to its end, and past it while its own next ncu run's first range is still in flight
(that range beside another worker's sampled calls never ended, f151dbe): an exclusive `flock` on a file
every user may open, in a shared sticky folder. The kernel drops it when the worker's process ends,
however it ends.
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

LOCK_DIR_ENV = "PTXWB_GPU_LOCK_DIR"  # where the locks are (tests set their own); else DEFAULT_LOCK_DIR
DEFAULT_LOCK_DIR = "/tmp/ptxwb-gpu"


def lock_folder() -> Path:
    return Path(os.environ.get(LOCK_DIR_ENV, DEFAULT_LOCK_DIR))


class GpuLock:
    """The lock of one GPU (by UUID) for this worker; `why` says why there is none."""

    def __init__(self, uuid: str, folder: Path | None = None) -> None:
        self.uuid = uuid
        self.fd: int | None = None
        self.held = False
        self.why = ""
        self.state = threading.Lock()  # `held`, against a release pending on its thread
        self.draining = 0  # bumped by every hold and release: a pending release acts only if still last
        folder = folder or lock_folder()
        name = re.sub(r"[^A-Za-z0-9-]+", "+", uuid).strip("+")[:80]
        try:
            _shared_folder(folder)
            self.fd = _open_lock_file(folder / f"{name}.lock")
        except OSError as exc:
            self.why = f"GPU {uuid}'s lock could not be opened in {folder} ({exc.strerror or exc})"

    def hold(self) -> None:
        """Take the lock, waiting for another worker's candidate to end (the session times the wait); at
        once without a lock (`why` says why) or where it is still held, a release pending."""
        with self.state:
            self.draining += 1  # a pending release, if any, lets go no more
            if self.fd is None or self.held:
                return
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        self.held = True

    def release(self) -> None:
        with self.state:
            self.draining += 1
            self._let_go()

    def release_after(self, busy: Callable[[], bool], limit_s: float) -> None:
        """Let go once `busy` is over (this worker's own GPU work between candidates, at most `limit_s`),
        on a thread; a `hold` before then keeps it."""
        with self.state:
            self.draining += 1
            mine = self.draining
        threading.Thread(target=self._drain, args=(mine, busy, limit_s), name="gpu-lock", daemon=True).start()

    def _drain(self, mine: int, busy: Callable[[], bool], limit_s: float) -> None:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline and busy():
            time.sleep(0.005)
        with self.state:
            if self.draining == mine:
                self._let_go()

    def _let_go(self) -> None:
        if self.fd is not None and self.held:
            self.held = False  # before the unlock: whoever takes it next sees it let go here
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        self.release()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _open_lock_file(path: Path) -> int:
    """The lock file, read-only (enough for flock); O_NOFOLLOW: a link another user left in its place is
    refused. Opened without O_CREAT where it exists: with `fs.protected_regular` (systemd's default), an
    O_CREAT open of another user's file in a sticky folder is refused even when the file exists, so the
    second user on a GPU would judge without its lock. Made with O_EXCL where absent, opened again if
    another process made it first."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        pass
    try:
        return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return os.open(path, flags)  # made between the two opens: open it as it is


def _shared_folder(folder: Path) -> None:
    """The locks' folder, made sticky and open to every user if absent; one that is a link, or that
    others may not use, is refused (OSError)."""
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    else:
        os.chmod(folder, 0o1777)  # after mkdir, whose mode the umask cuts
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise OSError(0, "not a folder (a link or a file)")
    if stat.S_IMODE(info.st_mode) & 0o1777 != 0o1777:
        raise OSError(0, f"mode {stat.S_IMODE(info.st_mode):o}, not 1777 as a folder shared by every user is")
