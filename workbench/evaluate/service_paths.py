"""Where the per-user GPU worker service lives: one private folder per user, one socket per GPU.

The folder is `$XDG_RUNTIME_DIR/ptxwb` (the user's own runtime folder, cleared at log-out) or, without
one, `ptxwb-UID` in the system's temporary folder. It must be a real folder, owned by this user and
closed to everyone else (0700); a socket in it must be this user's too. Anything else is refused in one
line, so a folder or socket another user planted is never connected to. Messages name no host path: they
can reach a verdict. Standard library only.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import sys
import tempfile
from pathlib import Path

import workbench


class ServiceFolderError(RuntimeError):
    """The service's folder or socket is not this user's own and private."""


def _private(path: Path, what: str) -> None:
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise ServiceFolderError(
            f"the worker service's {what} is not a folder (a link or a file is in its place)"
        )
    if info.st_uid != os.getuid():
        raise ServiceFolderError(
            f"the worker service's {what} belongs to user {info.st_uid}, not to this user"
        )
    if info.st_mode & 0o077:
        raise ServiceFolderError(
            f"the worker service's {what} is open to other users (mode {stat.S_IMODE(info.st_mode):o}, not 700)"
        )


def service_folder() -> Path:
    """This user's private folder for the service's sockets, lock and log (made on first use)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_absolute() and Path(runtime).is_dir():
        folder = Path(runtime) / "ptxwb"
    else:
        folder = Path(tempfile.gettempdir()) / f"ptxwb-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise ServiceFolderError(f"the worker service's folder cannot be made: {exc.strerror}") from None
    _private(folder, "folder")
    return folder


def served_gpus(gpu: str | None) -> str:
    """What the service's worker may see, as CUDA_VISIBLE_DEVICES: a pinned GPU, else what this command's
    CUDA_VISIBLE_DEVICES shows, else GPU 0 — the device an unpinned worker judges on anyway, so a command
    and a sweep's worker pinned to GPU 0 share one queue instead of timing on one GPU at once."""
    if gpu is not None:
        return gpu
    shown = os.environ.get("CUDA_VISIBLE_DEVICES")
    return "0" if shown is None else shown


def gpu_label(visible: str) -> str:
    """The service's name for the GPUs it serves (CUDA_VISIBLE_DEVICES's value, made a file name)."""
    label = re.sub(r"[^A-Za-z0-9-]+", "+", visible.strip()).strip("+")
    return label[:40] or "none"


def socket_path(folder: Path, label: str) -> Path:
    return folder / f"worker-{label}.sock"


def checked_socket(path: Path) -> bool:
    """Whether a socket is there to connect to; one that is not this user's own is refused."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(info.st_mode) or info.st_uid != os.getuid():
        raise ServiceFolderError("the worker service's socket is not a socket of this user's: refusing it")
    return True


def code_identity(root: Path | None = None) -> str:
    """Which workbench a service runs: its interpreter, version and the evaluation code's files (name, size,
    time) under `root` (the installed evaluate/). A command run from another install or after an edit gets
    a service of its own code."""
    digest = hashlib.sha256(f"{sys.executable}\0{workbench.__version__}".encode())
    root = root or Path(workbench.__file__).parent / "evaluate"
    for path in sorted(root.rglob("*.py")):
        info = path.stat()
        digest.update(f"{path.relative_to(root)}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:16]
