"""Static SASS: the candidate's own cubin disassembled, opcodes counted, instruction families found.

Only instruction lines count (`/*0070*/  @!P0 HGMMA.64x128x16.F32.BF16 ... ;`): the predicate is
dropped, the opcode is the mnemonic without its modifiers. The family tables were checked against
cuobjdump output of kernels compiled here with nvcc 13.0 (tests/data/kernels/family_probe_*.cu).
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from workbench.evaluate.gpu.demangle import demangle
from workbench.evaluate.gpu.toolchain import find_tool
from workbench.evaluate.result import BuildStage, StaticStage, Status
from workbench.tasks.targets import Target

# The architecture's own instructions, by family, as cuobjdump 13.4 names what nvcc 13.0 emits
# (tests/data/kernels/family_probe_*.cu). Hopper: wgmma bf16/f16/tf32 -> HGMMA, e4m3/e5m2 -> QGMMA,
# s8/u8 -> IGMMA; cp.async.bulk.tensor -> UTMALDG/UTMASTG, cp.reduce.async.bulk.tensor -> UTMAREDG,
# cp.async.bulk.prefetch.tensor -> UTMAPF, prefetch.tensormap -> UTMACCTL, bulk_group commit ->
# UTMACMDFLUSH; cp.async.bulk / cp.reduce.async.bulk / cp.async.bulk.prefetch -> UBLKCP/UBLKRED/UBLKPF;
# mbarrier -> SYNCS.*; setmaxnreg -> USETMAXREG. Blackwell: tcgen05.mma kind::f16/tf32 -> UTCHMMA,
# kind::f8f6f4 -> UTCQMMA, kind::i8 -> UTCIMMA, kind::mxf4 -> UTCOMMA; tcgen05.ld/st -> LDTM/STTM;
# tcgen05.alloc/dealloc -> UTCATOMSWS, tcgen05.commit -> UTCBAR, tcgen05.cp -> UTCCP,
# tcgen05.shift -> UTCSHIFT.
FAMILIES: dict[str, frozenset[str]] = {
    "GMMA": frozenset({"HGMMA", "QGMMA", "IGMMA"}),
    "TMA": frozenset({"UTMALDG", "UTMASTG", "UTMAREDG", "UTMAPF", "UTMACCTL", "UTMACMDFLUSH"}),
    "BULK": frozenset({"UBLKCP", "UBLKRED", "UBLKPF"}),
    "MBARRIER": frozenset({"SYNCS"}),
    "SETMAXNREG": frozenset({"USETMAXREG"}),
    "TCGEN05_MMA": frozenset({"UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCOMMA"}),
    "TMEM": frozenset({"LDTM", "STTM"}),
    "TCGEN05_OTHER": frozenset({"UTCBAR", "UTCATOMSWS", "UTCCP", "UTCSHIFT"}),
    # Narrower families a task may require instead of its target's (its sidecar's `required`), listed
    # after the families above, which keep every opcode they share: FP8 operands on the tensor core
    # (wgmma e4m3/e5m2, tcgen05.mma kind::f8f6f4), and global-to-shared copies through the TMA unit,
    # tensor or bulk (cp.async.bulk[.tensor], the same opcodes on sm_90a and sm_100a).
    "QGMMA": frozenset({"QGMMA"}),
    "UTCQMMA": frozenset({"UTCQMMA"}),
    "ASYNC_COPY": frozenset({"UTMALDG", "UBLKCP"}),
}
# What a kernel without the required family usually runs instead; named in the message.
FALLBACK_FAMILIES: dict[str, frozenset[str]] = {
    "MMA_SYNC": frozenset({"HMMA", "IMMA", "DMMA", "BMMA", "QMMA", "OMMA"}),  # mma.sync / WMMA
    "SIMT_FMA": frozenset({"FFMA", "FFMA2", "HFMA2", "DFMA"}),
}
# Per required family, what a kernel without it does the family's job with instead (opcode: what it is),
# named first in its message: a memory-bound task's bytes through loads rather than the copy engine.
REQUIRED_FALLBACKS: dict[str, dict[str, str]] = {
    "ASYNC_COPY": {
        "LDG": "ordinary global loads",
        "LDGSTS": "cp.async, Ampere's asynchronous copy, not the copy engine",
    },
}
FAMILY_DESCRIPTIONS: dict[str, str] = {
    "GMMA": "wgmma.mma_async",
    "TMA": "cp.async.bulk.tensor",
    "BULK": "cp.async.bulk",
    "MBARRIER": "mbarrier",
    "SETMAXNREG": "setmaxnreg",
    "TCGEN05_MMA": "tcgen05.mma",
    "TMEM": "tcgen05.ld/st",
    "TCGEN05_OTHER": "tcgen05 alloc/commit/cp",
    "QGMMA": "wgmma.mma_async with e4m3/e5m2 operands",
    "UTCQMMA": "tcgen05.mma kind::f8f6f4",
    "ASYNC_COPY": "cp.async.bulk or cp.async.bulk.tensor from global memory",
    "MMA_SYNC": "mma.sync/WMMA, the pre-Hopper tensor-core path",
    "SIMT_FMA": "SIMT fused multiply-add, no tensor core",
}
_ALL_FAMILIES: dict[str, frozenset[str]] = {**FAMILIES, **FALLBACK_FAMILIES}
# Each opcode's family is the first that holds it, so the narrower families never take one over.
_FAMILY_OF: dict[str, str] = {}
for _family, _ops in _ALL_FAMILIES.items():
    for _opcode in _ops:
        _FAMILY_OF.setdefault(_opcode, _family)
NARROW_FAMILIES = frozenset(FAMILIES) - set(_FAMILY_OF.values())

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
# `/*0650*/   @!P0 HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], R24, gsb0 ;  /* 0x... */`
_INSTRUCTION = re.compile(
    r"^\s*/\*([0-9a-fA-F]{4,})\*/\s+(?:@!?U?P(?:T|\d+)\s+)?([A-Z][A-Z0-9_]*)((?:\.[^\s;]+)?)"
)


def family_of(opcode: str) -> str | None:
    return _FAMILY_OF.get(opcode)


@dataclass
class SassDump:
    """Opcode counts per kernel, and per matrix-multiply opcode the fewest FLOPs one thread's execution of
    it does among the shapes the dump holds (0 where one of its shapes is not read here: then only its
    least over every shape holds)."""

    kernels: dict[str, Counter[str]] = field(default_factory=dict)
    mma_least: dict[str, float] = field(default_factory=dict)

    @property
    def mma_flops_per_thread(self) -> dict[str, float]:
        return {opcode: flops for opcode, flops in self.mma_least.items() if flops > 0}

    @property
    def opcodes(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for counts in self.kernels.values():
            total.update(counts)
        return total


# Matrix-multiply opcodes and the threads that issue one together: a warpgroup's wgmma, a warp's mma.sync.
_MMA_THREADS = {"HGMMA": 128, "IGMMA": 128, "QGMMA": 128, "HMMA": 32, "IMMA": 32, "DMMA": 32}
# mma.sync's shapes as ptxas spells them on sm_90a (`HMMA.16816.F32.BF16` is m16n8k16); wgmma's and
# DMMA's are `64x256x16`, `16x8x16`.
_MMA_CODES = {
    "1684": (16, 8, 4),
    "1688": (16, 8, 8),
    "16816": (16, 8, 16),
    "16832": (16, 8, 32),
    "16864": (16, 8, 64),
    "8816": (8, 8, 16),
    "8832": (8, 8, 32),
}
_MMA_SHAPE = re.compile(r"^\.(\d+)x(\d+)x(\d+)(?:\.|$)")


def _mma_flops(opcode: str, modifiers: str) -> float:
    """One thread's FLOPs in one execution of a matrix multiply of this spelling; 0 where the shape is
    not read here."""
    shape = _MMA_SHAPE.match(modifiers)
    dims = tuple(int(d) for d in shape.groups()) if shape else _MMA_CODES.get(modifiers[1:].split(".")[0])
    return 0.0 if dims is None else 2.0 * dims[0] * dims[1] * dims[2] / _MMA_THREADS[opcode]


def parse_sass(text: str) -> SassDump:
    dump = SassDump()
    current: Counter[str] | None = None
    for line in text.splitlines():
        if match := _FUNCTION.match(line):
            current = dump.kernels.setdefault(match.group(1), Counter())
            continue
        match = _INSTRUCTION.match(line)
        if match is None or current is None:
            continue
        opcode = match.group(2)
        current[opcode] += 1
        if opcode in _MMA_THREADS:
            flops = _mma_flops(opcode, match.group(3))
            dump.mma_least[opcode] = min(dump.mma_least.get(opcode, flops), flops)
    return dump


def family_counts(opcodes: Mapping[str, int], required: str | None = None) -> dict[str, int]:
    """family -> instruction count (fallback families included), for every family present; a narrower
    family counts too when it is the `required` one."""
    counts: Counter[str] = Counter()
    for opcode, count in opcodes.items():
        family = _FAMILY_OF.get(opcode)
        if family is not None:
            counts[family] += count
    if required is not None and required in NARROW_FAMILIES:
        narrow = sum(opcodes.get(op, 0) for op in FAMILIES[required])
        if narrow:
            counts[required] = narrow
    return dict(sorted(counts.items()))


def missing_family_message(required: str, opcodes: Mapping[str, int]) -> str:
    """Why a kernel fails the static tier, naming what it runs instead."""
    wanted = "/".join(sorted(FAMILIES[required]))
    message = f"no {required} instruction ({wanted}, from {FAMILY_DESCRIPTIONS[required]}) in the SASS"
    instead: list[str] = []
    fallbacks = REQUIRED_FALLBACKS.get(required, {})
    instead += [f"{op} x{opcodes[op]} ({why})" for op, why in fallbacks.items() if opcodes.get(op)]
    for family in (*FALLBACK_FAMILIES, *(f for f in FAMILIES if f not in NARROW_FAMILIES)):
        present = {op: opcodes[op] for op in sorted(_ALL_FAMILIES[family]) if opcodes.get(op)}
        if family != required and present:
            shown = ", ".join(f"{op} x{count}" for op, count in present.items())
            instead.append(f"{shown} ({FAMILY_DESCRIPTIONS[family]})")
    if instead:
        return f"{message}; it has instead: {'; '.join(instead)}"
    return f"{message}; it has no instruction of any other family either (no tensor core at all)"


@dataclass(frozen=True)
class _Disassembly:
    text: str | None
    error: str = ""


async def disassemble(cubin: Path, timeout_s: float = 120.0) -> _Disassembly:
    """cuobjdump --dump-sass of one cubin (needs nvdisasm, found beside cuobjdump or on PATH)."""
    tool = find_tool("cuobjdump")
    if tool is None:
        return _Disassembly(None, "cuobjdump not found (install the CUDA toolkit or nvidia-cuda-cuobjdump)")
    env = None
    nvdisasm = find_tool("nvdisasm")
    if nvdisasm is not None:
        env = {**os.environ, "PATH": f"{nvdisasm.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    process = await asyncio.create_subprocess_exec(
        str(tool),
        "--dump-sass",
        str(cubin),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=timeout_s)
    except TimeoutError:
        process.kill()
        await process.wait()
        return _Disassembly(None, f"cuobjdump did not finish within {timeout_s:g} s")
    except asyncio.CancelledError:
        process.kill()
        await process.wait()  # its pipes close while the event loop still runs
        raise
    if process.returncode != 0:
        return _Disassembly(None, f"cuobjdump failed: {stderr.decode(errors='replace').strip()[:500]}")
    return _Disassembly(stdout.decode(errors="replace"))


SASS_NAME = "kernel.sass"


async def static_stage(build: BuildStage, target: Target) -> StaticStage:
    """The static tier for a passed build: SASS opcodes and families, the required family present."""
    started = time.perf_counter()
    stage = StaticStage(required_family=target.required_family)
    if build.cubin_path is None:
        stage.status = Status.infrastructure_error
        stage.message = "the build kept no cubin"
        return stage
    cubin = Path(build.cubin_path)
    sass_path = cubin.with_name(SASS_NAME)  # cached beside the cubin: a cache hit skips cuobjdump
    if sass_path.is_file():
        text = sass_path.read_text()
    else:
        disassembly = await disassemble(cubin)
        if disassembly.text is None:
            stage.status = Status.infrastructure_error
            stage.message = disassembly.error
            return stage
        text = disassembly.text
        partial = sass_path.with_suffix(".sass.part")
        partial.write_text(text)
        partial.replace(sass_path)
    dump = parse_sass(text)
    names = demangle(list(dump.kernels))
    opcodes = dump.opcodes
    stage.sass_path = str(sass_path)
    stage.kernels = {names.get(k, k): dict(sorted(v.items())) for k, v in dump.kernels.items()}
    stage.opcodes = dict(sorted(opcodes.items(), key=lambda item: (-item[1], item[0])))
    stage.mma_flops_per_thread = dump.mma_flops_per_thread
    required = target.required_family
    stage.families = family_counts(opcodes, required)
    stage.required_present = stage.families.get(required, 0) > 0
    if not dump.kernels:
        stage.status = Status.static_missing_family
        stage.message = "the cubin holds no kernel"
    elif stage.required_present:
        stage.status = Status.passed
        own = ", ".join(f"{family} {count}" for family, count in stage.families.items() if family in FAMILIES)
        stage.message = f"{required} present ({own})"
    else:
        stage.status = Status.static_missing_family
        stage.message = missing_family_message(required, opcodes)
    stage.duration_s = time.perf_counter() - started
    return stage
