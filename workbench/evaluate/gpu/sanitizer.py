"""compute-sanitizer's memcheck report, read into the fault a person or a model can act on.

The report names the kind of fault, the kernel, the source line (the build uses `-lineinfo`), the thread
and block, and the address; the message quotes the candidate's source line too. Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from workbench.evaluate.gpu.isolation import describe_exit, first_useful_line

_PREFIX = re.compile(r"^=+\s?")
_AT = re.compile(r"^\s*at\s+(?P<where>.+?)(?:\s+in\s+(?P<file>[^\s:]+):(?P<line>\d+))?\s*$")
_THREAD = re.compile(r"by thread \((?P<thread>[\d, ]+)\) in block \((?P<block>[\d, ]+)\)")
# "Address 0x.. is out of bounds", "Access at 0x..", "Access to 0x..": the wording varies by release.
_ADDRESS = re.compile(r"(?:Access|Address)\b(?:\s+[a-z]+){0,3}?\s+(?P<address>0x[0-9a-fA-F]+)(?P<rest>.*)")
_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+) error")
SANITIZER_EXIT = 86  # compute-sanitizer's exit status when it found errors (--error-exitcode)
_NOT_A_FAULT = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "Saved host backtrace", "Target application returned")


@dataclass
class Fault:
    kind: str
    kernel: str | None = None
    file: str | None = None
    line: int | None = None
    thread: str | None = None
    block: str | None = None
    address: str | None = None
    detail: str = ""

    def describe(self, source: str | None = None) -> str:
        parts = [self.kind]
        if self.kernel:
            parts.append(f"in {self.kernel}")
        if self.line is not None:
            where = f"at {Path(self.file or 'kernel.cu').name}:{self.line}"
            quoted = _source_line(source, self.line)
            parts.append(f"{where} (`{quoted}`)" if quoted else where)
        if self.thread is not None:
            parts.append(f"thread ({self.thread}) block ({self.block})")
        if self.address:
            parts.append(f"address {self.address}{self.detail}")
        return ", ".join(parts)


def _source_line(source: str | None, line: int) -> str:
    if not source:
        return ""
    lines = source.splitlines()
    return lines[line - 1].strip()[:160] if 0 < line <= len(lines) else ""


def _kernel_name(where: str) -> str:
    """`simt_gemm_kernel(const __nv_bfloat16 *, int)+0x2b0` -> `simt_gemm_kernel`."""
    name = where.split("+0x")[0].strip()
    depth, cut = 0, len(name)
    for index, char in enumerate(name):
        if char in "(<":
            if depth == 0 and char == "(":
                cut = index
                break
            depth += 1
        elif char in ")>":
            depth -= 1
    return name[:cut].strip() or name


def parse_memcheck(report: str) -> tuple[list[Fault], int | None]:
    """The faults memcheck reported, in order, and the error count of its summary (None if absent)."""
    faults: list[Fault] = []
    current: Fault | None = None
    summary = None
    for raw in report.splitlines():
        if not raw.startswith("="):
            continue
        line = _PREFIX.sub("", raw).rstrip()
        if match := _SUMMARY.search(line):
            summary = int(match.group(1))
            continue
        if not line.strip() or any(marker in line for marker in _NOT_A_FAULT):
            continue
        indented = raw.startswith("=========     ") or line.startswith("    ")
        text = line.strip()
        if not indented:
            current = Fault(kind=text)
            faults.append(current)
        elif current is not None:
            if (at := _AT.match(text)) and current.kernel is None and text.startswith("at "):
                current.kernel = _kernel_name(at.group("where"))
                if at.group("line"):
                    current.file, current.line = at.group("file"), int(at.group("line"))
            elif thread := _THREAD.search(text):
                current.thread = thread.group("thread").replace(" ", "")
                current.block = thread.group("block").replace(" ", "")
            elif (address := _ADDRESS.search(text)) and current.address is None:
                current.address = address.group("address")
                current.detail = address.group("rest").rstrip(".")
            elif current.address and text.startswith("and is"):
                current.detail += f" ({text.removeprefix('and is ').rstrip('.')})"
    return faults, summary


def workload_label(axes: dict) -> str:
    """`N=7168, K=5120, M=1024`: the workload a memcheck line speaks of."""
    return ", ".join(f"{k}={v}" for k, v in axes.items())


def memcheck_message(
    report: str, source: str | None, axes: dict, where: str = "the smallest workload"
) -> str | None:
    """The line for the agent: the first fault and how many there were; None when memcheck found none."""
    faults, summary = parse_memcheck(report)
    if not faults:
        return None
    count = summary if summary is not None else len(faults)
    more = f" ({count} errors in all)" if count > 1 else ""
    return f"memcheck at {where} ({workload_label(axes)}): {faults[0].describe(source)}{more}"


def nothing_found(axes: dict, returncode: int | None, app_output: str) -> str:
    """The line for a call that crashed where memcheck, run again at that workload, reported no fault:
    whether the call failed under it too (a fault memcheck does not report) or ran through (the fault
    hangs on timing or on what memcheck's slower, uncached run does not share: a race, a barrier's phase)."""
    head = f"memcheck at the failing workload ({workload_label(axes)}) found no memory error"
    if returncode == SANITIZER_EXIT:
        return f"{head} in its report, though its exit status says it found errors"
    if returncode == 0:
        return (
            f"{head}, and the call did not fail under it: the fault depends on timing (a race, a wait on a "
            "barrier's phase) or on memory the slower run lays out otherwise"
        )
    said = first_useful_line(app_output)
    failed = describe_exit(returncode) + (f": {said}" if said else "")
    return f"{head}, though the call failed under it too ({failed}): a fault memcheck does not report"
