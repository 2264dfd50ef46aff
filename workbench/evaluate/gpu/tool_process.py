"""A tool (Nsight Compute, compute-sanitizer) around one call of a candidate, started before the candidate
exists.

The tool starts `python -m workbench.evaluate.gpu.candidate_entry once DIR WORKER_PID`, which imports torch and makes
its CUDA context (seconds under a tool) while the worker waits for the next candidate. The worker then
hands it the candidate (`request.json`: library and spec, written when the candidate begins, so the
inputs are made while correctness runs) and, when the tier begins, the `go` file: the child calls the
candidate once and exits. The tool's report lands in a log in a folder of its own, whose name the child
is never given (and any descriptor onto it the child inherits, it closes before loading the candidate).

Standard library only, like the worker.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.evaluate.gpu.demangle import demangle
from workbench.evaluate.gpu.isolation import HOLD_ENV, TOOL_ENV, CappedOutput, kill_group
from workbench.evaluate.gpu.profile import (
    WARM_RAN,
    import_commands,
    ncu_command,
    parse_raw_csv,
    report_file,
    without_warm_launch,
)
from workbench.evaluate.gpu.sanitizer import SANITIZER_EXIT
from workbench.evaluate.gpu.source_counters import SourcePageError, own_kernels, parse_source_page, stored

IMPORT_TIMEOUT_S = 120.0  # `ncu -i` printing one page of an exported report


def sanitizer_command(sanitizer: str, log_file: str, app: list[str]) -> list[str]:
    """compute-sanitizer's memcheck around `app`, errors only (no API-error noise from torch's probes)."""
    return [
        sanitizer,
        "--tool",
        "memcheck",
        "--report-api-errors",
        "no",
        "--show-backtrace",
        "no",
        "--print-limit",
        "20",
        "--error-exitcode",
        str(SANITIZER_EXIT),
        "--log-file",
        log_file,
        *app,
    ]


class ToolProcess:
    """A tool and the child it watches, in their own process group, spoken to through files."""

    LOG_NAME = "tool.log"
    TOOL = "tool"

    def __init__(
        self,
        command: Callable[[list[str], str], list[str]],
        child_argv: Sequence[str],
        env: dict[str, str] | None = None,
        held: bool = False,
    ) -> None:
        """`command(app, log_file)` is the tool's command line around the child `app`; a `held` child
        imports, then waits for `start()` before it makes its CUDA context."""
        self.held = held
        if held:
            env = {**(env or {}), HOLD_ENV: "1"}
        self.workdir = Path(tempfile.mkdtemp(prefix="ptxwb-once-"))
        self.logdir = Path(tempfile.mkdtemp(prefix="ptxwb-tool-"))
        # The tool's and the child's temporary files: the one folder besides the tool's lock and the
        # device files where the child may still write once its doors are closed.
        self.scratch = Path(tempfile.mkdtemp(prefix="ptxwb-scratch-"))
        app = [*child_argv, "once", str(self.workdir), str(os.getpid())]
        self.process = subprocess.Popen(
            command(app, str(self.log)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, TOOL_ENV: self.TOOL, "TMPDIR": str(self.scratch), **(env or {})},
        )
        self.output = CappedOutput(self.process.stdout)
        self.submitted = False

    @property
    def log(self) -> Path:
        return self.logdir / self.LOG_NAME

    def alive(self) -> bool:
        return self.process.poll() is None

    def start(self) -> None:
        """A held child may go on to the GPU."""
        if self.held:
            (self.workdir / "start").touch()
            self.held = False

    def has_context(self) -> bool:
        """Whether the child has made its CUDA context (it says so with a `ready` file)."""
        return (self.workdir / "ready").exists()

    def prepared(self) -> bool:
        """Whether the child has made the call's inputs (a `prepared` file): it waits for the go, then
        loads the candidate."""
        return (self.workdir / "prepared").exists()

    def submit(self, library: str, spec: dict) -> None:
        """The candidate to load and the inputs to make; written whole, then renamed into place."""
        self.start()
        partial = self.workdir / "request.json.partial"
        partial.write_text(json.dumps({"library": library, "spec": spec}))
        partial.rename(self.workdir / "request.json")
        self.submitted = True

    def go(self, autotuned: dict | None = None) -> None:
        """The call may start; for a Triton candidate, with the configs the runner's autotuners chose."""
        partial = self.workdir / "go.partial"
        partial.write_text(json.dumps({"autotuned": autotuned}) if autotuned else "")
        partial.rename(self.workdir / "go")

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
        """The tool's own output: messages, then its report."""
        return self.log.read_text(errors="replace") if self.log.is_file() else ""

    def app_output(self) -> str:
        """What the child (and the candidate in it) printed."""
        self.output.join()
        return self.output.text()

    def close(self) -> None:
        if self.alive():
            kill_group(self.process)
        self.output.join(1.0)
        for folder in (self.workdir, self.logdir, self.scratch):
            shutil.rmtree(folder, ignore_errors=True)


def await_warm(profilers: Iterable[ProfiledProcess | None], limit_s: float) -> bool:
    """Wait until none of `profilers` is running its first range; False when `limit_s` passed first."""
    deadline = time.monotonic() + limit_s
    for profiler in profilers:
        while profiler is not None and profiler.warming():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
    return True


@dataclass(frozen=True)
class Went:
    """The go given to an ncu run: when (perf_counter seconds), and how far its child had come then."""

    at: float
    prepared: bool  # False: ncu's wait held the child's set-up
    warmed: bool  # True: ncu's first range ran before the candidate came
    first_range_s: float | None


class ProfiledProcess(ToolProcess):
    """Nsight Compute around the call, for the dynamic tier.

    `required` is the task's required family ("": the target's), which picks the tensor-pipe metric
    ncu collects (FP8's for QGMMA on Hopper, none for a memory-bound family); `extra_metrics` are more
    to collect (what a memory-bound task's ordinary loads fetched). With `source_counters`
    ncu exports a report into the tool's folder (the child never learns it and cannot write there);
    once ncu has exited, the worker prints its raw page and its source page from it, both at once."""

    LOG_NAME = "ncu.log"
    TOOL = "ncu"

    def __init__(
        self,
        ncu: str,
        target: str,
        child_argv: Sequence[str],
        required: str = "",
        source_counters: bool = False,
        held: bool = False,
        extra_metrics: Sequence[str] = (),
    ) -> None:
        self.ncu = ncu
        self.target = target
        self.required = required
        self.source_counters = source_counters
        self._pages: tuple[str, str] | None = None
        self.warm_asked = False
        self.warm_asked_at = 0.0  # wall time (the files' clock) of the ask
        self.went: Went | None = None
        super().__init__(
            lambda app, log: ncu_command(
                ncu,
                log,
                target,
                app,
                source_counters=source_counters,
                required=required,
                extra_metrics=extra_metrics,
            ),
            child_argv,
            held=held,
        )

    def warm(self) -> None:
        """The child may run ncu's first range now, before its candidate (`candidate_entry`): only while
        nothing is timed or profiled, and only before `submit`."""
        if not self.warm_asked and not self.submitted:
            self.warm_asked_at = time.time()
            (self.workdir / "warm").touch()
            self.warm_asked = True

    def warmed(self) -> bool:
        return (self.workdir / "warmed").exists()

    def go_once(self, autotuned: dict | None = None) -> Went:
        """The go, given once: the timing stage gives it as its rounds end, where the dynamic tier then
        finds it given."""
        if self.went is None:
            self.went = Went(time.perf_counter(), self.prepared(), self.warmed(), self.first_range_s())
            self.go(autotuned)
        return self.went

    def first_range_s(self) -> float | None:
        """Seconds ncu's first range took before the candidate came, from its ask or the child's context,
        whichever was later, to its end (the files' times); None where it did not run through."""
        if not self.warm_ran():
            return None
        try:
            ended = (self.workdir / "warmed").stat().st_mtime
            began = max(self.warm_asked_at, (self.workdir / "ready").stat().st_mtime)
        except OSError:
            return None
        return round(max(0.0, ended - began), 3)

    def warm_ran(self) -> bool:
        """Its warm range ran through: its kernel's launch leads the report."""
        try:
            return (self.workdir / "warmed").read_text() == WARM_RAN
        except OSError:
            return False

    def call_launches(self, report: str) -> list[dict]:
        """The profiled call's launches in `report` (its raw page), less the warm range's where it ran."""
        launches = parse_raw_csv(report)
        return without_warm_launch(launches) if self.warm_ran() else launches

    def warming(self) -> bool:
        """Its first range was asked for and is not over (nor is the process)."""
        return self.warm_asked and not self.warmed() and self.alive()

    def _imported(self) -> tuple[str, str]:
        """The exported report's raw page and source page, each with what ncu said about it."""
        if self._pages is None:
            report = report_file(str(self.log))
            if not Path(report).is_file():
                self._pages = ("", "")
                return self._pages
            runs = [
                subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
                for command in import_commands(self.ncu, report)
            ]
            pages = []
            for run in runs:
                try:
                    pages.append(run.communicate(timeout=IMPORT_TIMEOUT_S)[0])
                except subprocess.TimeoutExpired:
                    run.kill()
                    run.communicate()
                    pages.append(f"==ERROR== ncu -i did not print {report} within {IMPORT_TIMEOUT_S:g} s\n")
            self._pages = (pages[0], pages[1])
        return self._pages

    def report(self) -> str:
        """ncu's messages, then the raw page (printed from the exported report with source counters)."""
        log = super().report()
        return f"{log}\n{self._imported()[0]}" if self.source_counters else log

    def source_counts(self, own: Iterable[str]) -> tuple[dict[str, list[dict]], str | None]:
        """Per-instruction counts of the candidate's own kernels (mangled name -> rows in address order),
        or why there are none."""
        page = self._imported()[1] if self.source_counters else ""
        try:
            parsed = parse_source_page(page)
        except SourcePageError as exc:
            return {}, str(exc)
        own = set(own)
        kept = own_kernels(parsed, own, demangle(sorted(own)))
        if not kept:
            return {}, "no per-instruction counts for the candidate's kernels on ncu's source page"
        return {kernel: stored(rows) for kernel, rows in kept.items()}, None


class SanitizedProcess(ToolProcess):
    """compute-sanitizer's memcheck around the call, at the smallest workload. Torch's caching allocator
    is off in it, so every tensor is an allocation of its own and an access past its end is caught."""

    LOG_NAME = "sanitizer.log"
    TOOL = "memcheck"

    def __init__(self, sanitizer: str, child_argv: Sequence[str], held: bool = False) -> None:
        super().__init__(
            lambda app, log: sanitizer_command(sanitizer, log, app),
            child_argv,
            env={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
            held=held,
        )
