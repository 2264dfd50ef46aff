"""The candidate with its tensor-core products negated: does its answer depend on them?

A decoy runs the target's instructions for show and answers from another path (integer multiply-adds
in fixed point, tables in shared memory: work no counter credits to the task). In PTX every Hopper
tensor-core product is a `wgmma.mma_async` instruction, floating-point ones with an `imm-scale-a` of 1
or -1: flipping it negates A, so the instruction adds -A·B. The PTX is compiled again by the ptxas
command nvcc ran for the build (read from its dry run; the paths the cubin records come from the PTX's
`.file` lines, so the SASS is the original's but for the negation), and the new cubin is put where the
original lies in the library's fat binary: the same host code, the same kernels, every product negated.
An honest kernel's answer then moves; one that does not never depended on its tensor-core products
(`gpu/negated_check.py`).

Integer wgmma has no scale to flip and Blackwell's tcgen05.mma takes its negation from a runtime
descriptor: neither is negated here.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import shutil
from pathlib import Path
from typing import NamedTuple

from workbench.evaluate.build.source_text import split_top_level

NEGATED_DIR = "negated"  # the negated library lies in it, named as the original beside it
NEGATED_PTX = "kernel_negated.ptx"
NEGATED_CUBIN = "kernel_negated.cubin"
PTXAS_TIMEOUT_S = 300.0

_WGMMA = re.compile(
    r"\bwgmma\.mma_async(?P<modifiers>(?:\.[A-Za-z0-9_]+)+)(?P<space>\s+)(?P<operands>[^;]*);"
)
_FLOAT_TYPES = frozenset({"f16", "bf16", "tf32", "e4m3", "e5m2"})


class Negated(NamedTuple):
    """The PTX with every floating-point wgmma's A negated: how many were, and how many had no scale."""

    ptx: str
    negated: int
    left: int


def _negate_one(match: re.Match[str]) -> tuple[str, bool]:
    """The instruction with its imm-scale-a flipped, and whether it was (an integer one has none)."""
    modifiers = match["modifiers"].split(".")[1:]
    if not _FLOAT_TYPES.intersection(modifiers[-2:]):
        return match[0], False
    operands = split_top_level(match["operands"])
    # d, a, b, scale-d, imm-scale-a, ...; sparse: d, a, b, sp-meta, sp-sel, scale-d, imm-scale-a, ...
    index = 6 if "sp" in modifiers else 4
    if len(operands) <= index or operands[index] not in ("1", "-1"):
        return match[0], False
    operands[index] = "1" if operands[index] == "-1" else "-1"
    return f"wgmma.mma_async{match['modifiers']}{match['space']}{', '.join(operands)};", True


def negate_products(ptx: str) -> Negated:
    """`ptx` with every floating-point wgmma's imm-scale-a flipped."""
    counts = [0, 0]

    def replace(match: re.Match[str]) -> str:
        text, done = _negate_one(match)
        counts[0 if done else 1] += 1
        return text

    return Negated(_WGMMA.sub(replace, ptx), counts[0], counts[1])


def ptxas_line(dry_run: str, ptx: str, cubin: str) -> list[str] | None:
    """The ptxas command of nvcc's `--dryrun` output that compiles `ptx` into `cubin`, its program found
    where nvcc finds it (on the PATH the dry run sets), or None."""
    path = None
    for line in dry_run.splitlines():
        if line.startswith("#$ PATH="):
            path = line[len("#$ PATH=") :].strip()
        if not line.startswith("#$ ptxas "):
            continue
        words = shlex.split(line[3:])
        program = shutil.which(words[0], path=path)
        if ptx in words and cubin in words and program is not None:
            return [program, *words[1:]]
    return None


async def _output(command: list[str], cwd: Path) -> tuple[int | None, str]:
    process = await asyncio.create_subprocess_exec(
        *command, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(), PTXAS_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        return None, ""
    return process.returncode, out.decode(errors="replace")


async def build_negated(
    entry: Path, work: Path, nvcc_command: list[str], built: tuple[str, str, str], kept: tuple[str, str]
) -> str:
    """Write the negated library of the finished build in `entry`, whose library, PTX and cubin are the
    files `built` names there, the last two written by nvcc's command as `kept` (keep/ paths), into the
    empty folder `work` (where the negated PTX and cubin go too): as `NEGATED_DIR`/library. '' when
    written, else why not."""
    library_name, ptx_name, cubin_name = built
    negated = negate_products((entry / ptx_name).read_text())
    if not negated.negated:
        return "its PTX holds no floating-point wgmma to negate"
    original = (entry / cubin_name).read_bytes()
    code, dry_run = await _output([*nvcc_command, "--dryrun"], work)
    command = ptxas_line(dry_run, *kept) if code == 0 else None
    if command is None:
        return "nvcc's dry run names no ptxas command for its PTX"
    keep = work / Path(kept[0]).parent
    keep.mkdir(exist_ok=True)
    (keep / NEGATED_PTX).write_text(negated.ptx)
    names = {kept[0]: str(keep / NEGATED_PTX), kept[1]: str(keep / NEGATED_CUBIN)}
    code, output = await _output([command[0], *(names.get(word, word) for word in command[1:])], work)
    if code is None:
        return f"ptxas did not finish the negated PTX within {PTXAS_TIMEOUT_S:g} s"
    if code != 0:
        last = output.strip().splitlines()[-1:] or [f"exit {code}"]
        return f"ptxas failed on the negated PTX: {last[0]}"
    changed = (keep / NEGATED_CUBIN).read_bytes()
    if len(changed) != len(original):
        return f"the negated cubin is {len(changed)} bytes, the original {len(original)}"
    library = (entry / library_name).read_bytes()
    if library.count(original) != 1:
        return "the library does not hold its cubin once, uncompressed"
    at = library.index(original)
    (work / NEGATED_DIR).mkdir()
    target = work / NEGATED_DIR / library_name
    target.write_bytes(library[:at] + changed + library[at + len(changed) :])
    target.chmod(0o755)
    return ""
