"""Which CUDA line each SASS instruction came from: the cubin's line table, read by `nvdisasm -gi`.

Builds use `-lineinfo`, so the cubin keeps a line table. `nvdisasm -gi` prints it before the
instructions it covers (`//## File "…/kernel.cu", line 42`), with the chain of inlined calls
(`… line 585 inlined at "…/kernel.cu", line 50`): an instruction belongs to the first line of the
candidate's own file in that chain, the innermost one written there. The table maps each kernel's
instruction addresses to lines; `listing_lines` applies it to a cuobjdump listing, whose addresses
and kernel names are the same.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from workbench.evaluate.gpu.toolchain import find_tool

SOURCE_FILE = "kernel.cu"  # what the build names the candidate's source

LineTable = dict[str, dict[int, int]]  # kernel (mangled) -> instruction address -> 1-based source line

_SECTION = re.compile(r"^\.text\.(\S+):\s*$")
_ANNOTATION = re.compile(r"^\s*//## File \"([^\"]*)\", line (\d+)(?: inlined at \"([^\"]*)\", line (\d+))?")
_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/")
_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")


def _own_line(chain: list[tuple[str, int]]) -> int | None:
    for file, line in chain:
        if Path(file).name == SOURCE_FILE:
            return line
    return None


def parse_line_table(text: str) -> LineTable:
    """The line table from `nvdisasm -gi` output: every instruction address of every kernel."""
    table: LineTable = {}
    current: dict[int, int] | None = None
    chain: list[tuple[str, int]] = []
    line: int | None = None
    for raw in text.splitlines():
        if match := _SECTION.match(raw):
            current = table.setdefault(match.group(1), {})
            chain, line = [], None
        elif match := _ANNOTATION.match(raw):
            chain.append((match.group(1), int(match.group(2))))
            if match.group(3):
                chain.append((match.group(3), int(match.group(4))))
        elif (match := _INSTRUCTION.match(raw)) and current is not None:
            if chain:  # a new position; none since the last instruction means the same line
                line, chain = _own_line(chain), []
            if line is not None:
                current[int(match.group(1), 16)] = line
    return {kernel: lines for kernel, lines in table.items() if lines}


def line_table(cubin: Path, timeout_s: float = 120.0) -> LineTable | None:
    """The cubin's line table, or None without nvdisasm, a readable cubin or `-lineinfo`."""
    tool = find_tool("nvdisasm")
    if tool is None:
        return None
    try:
        done = subprocess.run(
            [str(tool), "-gi", "-c", str(cubin)],
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (parse_line_table(done.stdout) or None) if done.returncode == 0 else None


def listing_lines(lines: list[str], table: LineTable) -> dict[int, int]:
    """0-based line of a cuobjdump listing -> 1-based source line, for every instruction the table has."""
    found: dict[int, int] = {}
    current: dict[int, int] = {}
    for index, text in enumerate(lines):
        if match := _FUNCTION.match(text):
            current = table.get(match.group(1), {})
        elif match := _INSTRUCTION.match(text):
            source = current.get(int(match.group(1), 16))
            if source is not None:
                found[index] = source
    return found
