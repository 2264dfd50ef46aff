"""The Nsight Compute run of one candidate, launched before the candidate exists.

ncu starts `python -m workbench.evaluate.child profile DIR WORKER_PID`, which imports torch and makes
its CUDA context (about 7-9 s under ncu on the H200) while the worker waits for the next candidate. The
worker then hands it the candidate (`request.json`: library and spec, written at the candidate's start
so the module loads and the inputs are made while correctness runs) and, when the dynamic tier begins,
the `go` file: the child calls the candidate once inside cudaProfilerStart/Stop and exits. ncu's raw
page lands in DIR/ncu.log.

Standard library only, like the worker.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from workbench.evaluate.isolation import CappedOutput, kill_group
from workbench.evaluate.profile import ncu_command


class ProfiledProcess:
    """ncu and the child it profiles, in their own process group, spoken to through files in `workdir`."""

    def __init__(self, ncu: str, target: str, child_argv: Sequence[str]) -> None:
        self.target = target
        self.workdir = Path(tempfile.mkdtemp(prefix="ptxwb-ncu-"))
        self.log = self.workdir / "ncu.log"
        app = [*child_argv, "profile", str(self.workdir), str(os.getpid())]
        self.process = subprocess.Popen(
            ncu_command(ncu, str(self.log), target, app),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.output = CappedOutput(self.process.stdout)
        self.submitted = False

    def alive(self) -> bool:
        return self.process.poll() is None

    def submit(self, library: str, spec: dict) -> None:
        """The candidate to load and the inputs to make; written whole, then renamed into place."""
        partial = self.workdir / "request.json.partial"
        partial.write_text(json.dumps({"library": library, "spec": spec}))
        partial.rename(self.workdir / "request.json")
        self.submitted = True

    def go(self) -> None:
        (self.workdir / "go").touch()

    def wait(self, timeout_s: float) -> bool:
        """True when the process ended within `timeout_s`; else its group is killed and False."""
        try:
            self.process.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            kill_group(self.process)
            return False

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def report(self) -> str:
        """ncu's own output: messages, then the raw page as CSV."""
        return self.log.read_text(errors="replace") if self.log.is_file() else ""

    def app_output(self) -> str:
        """What the profiled child (and the candidate in it) printed."""
        self.output.join()
        return self.output.text()

    def close(self) -> None:
        if self.alive():
            kill_group(self.process)
        self.output.join(1.0)
        shutil.rmtree(self.workdir, ignore_errors=True)
