"""The real `ptxwb` in a tmux pane, as a person at a terminal sees it: keys in, the screen's text out.

Tests that use it skip where tmux is not installed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

PTXWB = Path(sys.executable).parent / "ptxwb"
needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Pane:
    def __init__(self, name: str) -> None:
        self.name = name

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.name, *args], check=True, capture_output=True, text=True, timeout=30
        )
        return done.stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", self.name)

    def keys(self, *keys: str) -> None:
        for key in keys:  # one at a time, as typed: the app handles each before the next
            self._tmux("send-keys", "-t", self.name, key)
            time.sleep(0.15)

    def alive(self) -> bool:
        return (
            subprocess.run(
                ["tmux", "-L", self.name, "has-session", "-t", self.name], check=False, capture_output=True
            ).returncode
            == 0
        )

    def wait(self, condition: Callable[[str], bool], timeout_s: float = 60.0) -> str:
        """The screen once `condition` holds for it; fails with the last screen after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        shown = ""
        while time.monotonic() < deadline:
            if not self.alive():
                raise AssertionError(f"ptxwb exited; last screen:\n{shown}")
            shown = self.screen()
            if condition(shown):
                return shown
            time.sleep(0.2)
        raise AssertionError(f"the screen never got there; last screen:\n{shown}")


@contextmanager
def ptxwb_in_tmux(
    *args: str, cwd: Path, size: tuple[int, int] = (180, 50), cache: Path | None = None
) -> Iterator[Pane]:
    """`ptxwb ARGS` in a detached tmux session of `size` columns × rows, on a tmux server of its own (a
    shared one sizes every session to its first: tests run side by side); killed on the way out. Its builds
    go to `cache` (the run's shared one, where a test's subject is not the build), else a folder of its own."""
    name = f"ptxwb-test-{uuid.uuid4().hex[:8]}"
    command = " ".join(shlex.quote(a) for a in [str(PTXWB), *args])
    # Not COLUMNS or LINES (pytest-xdist's workers have them): Textual would take them over the pane's size.
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(PTXWB_CACHE=str(cache or cwd / "cache"), TERM="xterm-256color")
    subprocess.run(
        [
            "tmux",
            "-L",
            name,
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            str(size[0]),
            "-y",
            str(size[1]),
            "-c",
            str(cwd),
            command,
        ],
        check=True,
        env=env,
        timeout=30,
    )
    pane = Pane(name)
    try:
        yield pane
    finally:
        subprocess.run(["tmux", "-L", name, "kill-server"], check=False, capture_output=True)
