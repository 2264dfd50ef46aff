"""A recorded candidate built again here, for its PTX and SASS, and checked against the recording.

A session that carries no listings and whose build folder is on another machine can still show PTX
and SASS wherever nvcc and cuobjdump are: the candidate's source is in the session. The rebuild is
shown only when it is provably the recorded code: the cubin's sha256 when the session carries it,
else the SASS opcode counts of every kernel, which the static tier recorded.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from workbench.evaluate.build.lineinfo import LineTable, line_table
from workbench.evaluate.build.nvcc import compile_source
from workbench.evaluate.build.sass import disassemble, parse_sass
from workbench.evaluate.gpu.toolchain import find_tool
from workbench.evaluate.result import StaticStage, Status
from workbench.tasks.targets import get_target


@dataclass(frozen=True)
class Rebuilt:
    ptx: str | None = None
    sass: str | None = None
    lines: LineTable | None = None  # the rebuilt cubin's line table
    why_not: str = ""  # set when there is nothing to show


def can_rebuild() -> bool:
    return find_tool("nvcc") is not None and find_tool("cuobjdump") is not None


def _opcode_profile(kernels: dict[str, dict[str, int]]) -> list[str]:
    """Per-kernel opcode counts, names left out (a demangler here may spell them differently)."""
    return sorted(json.dumps(counts, sort_keys=True) for counts in kernels.values())


def mismatch(sass: str, cubin: bytes, static: StaticStage, cubin_sha256: str | None) -> str | None:
    """Why the rebuild is not the recorded code, or None when it provably is."""
    if cubin_sha256 is not None:
        here = hashlib.sha256(cubin).hexdigest()
        return (
            None
            if here == cubin_sha256
            else f"its cubin's sha256 {here[:12]}… is not the recorded {cubin_sha256[:12]}…"
        )
    if not static.kernels:
        return "the session recorded neither the cubin's hash nor the SASS counts to check it against"
    rebuilt = {name: dict(counts) for name, counts in parse_sass(sass).kernels.items()}
    if _opcode_profile(rebuilt) != _opcode_profile(static.kernels):
        return "its SASS opcode counts differ from the recorded ones (another nvcc?)"
    return None


async def rebuild(source: str, target: str, static: StaticStage, cubin_sha256: str | None) -> Rebuilt:
    """Build `source` here (through the build cache) and return its listings if they are the recorded ones."""
    build = await compile_source(source, get_target(target))
    if build.status != Status.passed or build.cubin_path is None or build.ptx_path is None:
        return Rebuilt(why_not=f"the rebuild here did not pass ({build.status.value}: {build.message})")
    cubin = Path(build.cubin_path)
    disassembly = await disassemble(cubin)
    if disassembly.text is None:
        return Rebuilt(why_not=f"the rebuild here could not be disassembled: {disassembly.error}")
    problem = mismatch(disassembly.text, cubin.read_bytes(), static, cubin_sha256)
    if problem is not None:
        return Rebuilt(why_not=f"rebuilt here, but {problem}: not shown")
    ptx = Path(build.ptx_path).read_text(encoding="utf-8", errors="replace")
    return Rebuilt(ptx=ptx, sass=disassembly.text, lines=await asyncio.to_thread(line_table, cubin))
