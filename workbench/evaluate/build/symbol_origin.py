"""Where in the user's file a refused symbol comes from: its call site, or the include that brought it.

The library is built with host line tables (`-Xcompiler -g1`), so each instruction that calls or
reads a symbol maps (addr2line, inlined frames too) to a line of `kernel.cu` or of a header. A call
the user wrote names its line; one that only a header's code makes (a static initialiser of an
object type, say) names the header and the user's `#include` that reaches it. Paths are shown
relative to their include folder: no host path reaches a message.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from workbench.evaluate.build.ban import includes

_FUNCTION = re.compile(r"^[0-9a-f]+ <(.+)>:$")
_FRAME = re.compile(r"^(?:\s*\(inlined by\)\s*|0x[0-9a-f]+:\s*)(.+?):(\d+|\?)")
MAX_SITES = 16


@dataclass(frozen=True)
class Origin:
    line: int | None  # the user's line, when known
    header: str | None = None  # the header whose code refers to the symbol, relative to its include folder
    header_line: int | None = None
    chain: tuple[str, ...] = ()  # headers from the user's #include down to `header`

    def describe(self) -> str:
        where = f"{self.header}:{self.header_line}" if self.header and self.header_line else self.header
        if self.line is None:
            return f"from {where}" if where else "from a header's code"
        if where and self.chain:
            return f"line {self.line} (#include <{self.chain[0]}>, through {' → '.join(self.chain[1:]) or where})"
        return f"line {self.line}" + (f" (in {where})" if where else "")


def call_sites(disassembly: str, symbol: str) -> list[int]:
    """Addresses of the instructions that call or read `symbol` (not its own PLT stub)."""
    name = re.escape(symbol.split("@", 1)[0])
    reference = re.compile(rf"<{name}(@[^>+]*)?(\+0x[0-9a-f]+)?>")
    sites: list[int] = []
    inside_stub = False
    for line in disassembly.splitlines():
        function = _FUNCTION.match(line)
        if function:
            inside_stub = function.group(1).endswith("@plt")
            continue
        if not inside_stub and reference.search(line):
            address = line.strip().split(":", 1)[0]
            if re.fullmatch(r"[0-9a-f]+", address):
                sites.append(int(address, 16))
    return sites[:MAX_SITES]


def _frames(library: Path, addresses: list[int]) -> list[list[tuple[str, int | None]]]:
    """Per address, its source frames innermost first (file, line), from the library's line tables."""
    tool = shutil.which("addr2line")
    if tool is None or not addresses:
        return []
    done = subprocess.run(
        [tool, "-p", "-i", "-a", "-e", str(library), *(hex(a) for a in addresses)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    groups: list[list[tuple[str, int | None]]] = []
    for line in done.stdout.splitlines():
        frame = _FRAME.match(line)
        if not frame:
            continue
        if line.startswith("0x"):
            groups.append([])
        if groups and frame.group(1) != "??":
            number = frame.group(2)
            groups[-1].append((frame.group(1), int(number) if number.isdigit() else None))
    return groups


def _relative(path: str, include_dirs: list[Path]) -> str:
    for folder in include_dirs:
        try:
            return str(Path(path).relative_to(folder))
        except ValueError:
            continue
    return Path(path).name


def include_chain(source: str, header: str, include_dirs: list[Path]) -> tuple[int, tuple[str, ...]] | None:
    """The user's `#include` line and the header path from it down to `header` (breadth first)."""
    start = [(item.line, item.header) for item in includes(source) if item.header]
    queue: deque[tuple[int, tuple[str, ...]]] = deque((line, (name,)) for line, name in start)
    seen: set[str] = set()
    while queue:
        line, chain = queue.popleft()
        current = chain[-1]
        if current == header:
            return line, chain
        if current in seen:
            continue
        seen.add(current)
        found = next((d / current for d in include_dirs if (d / current).is_file()), None)
        if found is None:
            continue
        for item in includes(found.read_text(errors="replace")):
            if item.header and item.header not in seen:
                queue.append((line, (*chain, item.header)))
    return None


def origin(
    symbol: str, disassembly: str, library: Path, source: str, source_name: str, include_dirs: list[Path]
) -> Origin | None:
    """Where `symbol` enters the library: the user's line if they call it, else the header and its include."""
    groups = _frames(library, call_sites(disassembly, symbol))
    header: tuple[str, int | None] | None = None
    for frames in groups:
        own = [line for file, line in frames if Path(file).name == source_name and line]
        inner = frames[0] if frames and Path(frames[0][0]).name != source_name else None
        if own:
            shown = _relative(inner[0], include_dirs) if inner else None
            return Origin(own[0], shown, inner[1] if inner else None)
        header = header or inner
    if header is None:
        return None
    name = _relative(header[0], include_dirs)
    reached = include_chain(source, name, include_dirs)
    if reached is None:
        return Origin(None, name, header[1])
    return Origin(reached[0], name, header[1], reached[1])
